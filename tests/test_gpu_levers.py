"""``python -m benchmarks.gpu_levers``: its kernel census, each candidate's fidelity settings, the
stages' lines in order and a SIGTERM that keeps every line written and closes with the choice."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from benchmarks import gpu_levers
from disentangle import config as config_lib
from disentangle import methods
from tests import helpers

# The config fields of `gpu_levers.settings`, in its order.
SETTINGS = {"conv_impl": "model.conv_impl", "dtype": "model.dtype",
            "precision": "model.precision", "assignment_placement": "assignment_placement"}


def test_kernel_census_counts_cudnn_calls_gemms_and_interior_pads():
  hlo = "\n".join([
      '  a = (f32[2,8,8,4], u8[0]) custom-call(x, k), custom_call_target="__cudnn$convForward"',
      '  b = (f32[2,8,8,4], u8[0]) custom-call(x, k), custom_call_target="__cudnn$convForward"',
      '  c = (f32[4,4,4,4], u8[0]) custom-call(x, g), '
      'custom_call_target="__cudnn$convBackwardFilter"',
      '  d = (f32[64,16], s8[0]) custom-call(p, q), custom_call_target="__cublas$gemm"',
      '  e = f32[64,16] fusion(p, q), kind=kCustom, backend_config={"fusion_backend_config":'
      '{"kind":"__triton_gemm"}}',
      "  f = f32[2,15,15,4] pad(x, z), padding=0_0x0_0_1x0_0_1x0_0",   # stuffed: interior 1
      "  g = f32[2,10,10,4] pad(x, z), padding=0_0x1_1x1_1x0_0",       # border only
      "  h = f32[2,10,10,4] pad(x, z), padding=0_0x1_1_0x1_1_0x0_0",   # interior 0
  ])
  assert gpu_levers.kernel_census(hlo) == {
      "cudnn": {"__cudnn$convForward": 2, "__cudnn$convBackwardFilter": 1},
      "gemms": 2, "interior_pads": 1}


@pytest.mark.parametrize("smoke", [True, False])
def test_each_candidate_is_judged_under_its_own_settings(smoke):
  """What `Fidelity.of` builds for a candidate (`gpu_levers.candidate`) is the candidate's
  overrides over the base config, not over true float32's, and a valid config; the method
  computes with them. The reference is Flax's convolutions, 'highest', float32."""
  names = [name for name, _ in gpu_levers.CANDIDATES]
  assert len(names) == len(set(names)) and set(gpu_levers.SMOKE_CANDIDATES) <= set(names)
  base = gpu_levers.settings(gpu_levers.config_of({}, smoke))
  reference, _ = gpu_levers.candidate(gpu_levers.REFERENCE, smoke)
  assert gpu_levers.settings(reference) == {"conv_impl": "flax", "dtype": "float32",
                                            "precision": "highest", "assignment_placement": "step"}
  # The base differs from the reference: a candidate that leaves a field keeps the base's.
  assert base["precision"] == "default"
  for name, overrides in gpu_levers.CANDIDATES:
    config, method = gpu_levers.candidate(overrides, smoke)
    methods.validate(config)
    want = {key: overrides.get(field, base[key]) for key, field in SETTINGS.items()}
    assert gpu_levers.settings(config) == want, name
    assert {key: config_lib.resolve(field, config_lib.get_field(config, field))
            if field == "assignment_placement" else config_lib.get_field(config, field)
            for key, field in SETTINGS.items()} == want
    assert (method.decoder.conv_impl, method.decoder.dtype, method.decoder.precision) == (
        want["conv_impl"], want["dtype"], want["precision"]), name


def test_a_deadline_already_past_emits_only_the_closing_line():
  lines = []
  closing = gpu_levers.measure(emit=lambda kind, **r: lines.append({"kind": kind, **r}) or r,
                               smoke=True, runs=[2], deadline=time.time() - 1)
  assert [line["kind"] for line in lines] == ["choice"]
  assert closing["chosen"] is None and closing["bound"] == "no time left"
  assert "stopped_by" not in closing and closing["environment"]["backend"] == "cpu"


@pytest.mark.slow
def test_smoke_stages_emit_their_lines_in_order_and_choose_within_tolerance():
  """One smoke candidate, one run, through every stage (a CPU has no XLA-flag variants); the
  command's first line and its file are `test_sigterm_keeps_every_line_and_closes_with_the_choice`'s."""
  lines = []

  def emit(kind, **record):
    lines.append({"kind": kind, **json.loads(json.dumps(record))})  # each line JSON
    return record

  closing = gpu_levers.measure(emit=emit, smoke=True, runs=[1], deadline=time.time() + 900,
                               names=["gemm_bf16"], warmup=1, num_images=64, log=lambda m: None)
  kinds = [line["kind"] for line in lines]
  assert sorted(set(kinds), key=kinds.index) == [
      "timing", "reference", "fidelity", "lowering", "profile", "choice"]
  assert kinds[-1] == "choice" and kinds.count("choice") == 1
  timings = [(l["candidate"], l["phase"]) for l in lines if l["kind"] == "timing"]
  assert timings == [("gemm_bf16", "after"), ("gemm_bf16", "before")]
  (fidelity,) = [l for l in lines if l["kind"] == "fidelity"]
  assert fidelity["settings"] == {"conv_impl": "gemm", "dtype": "bfloat16", "precision": "default",
                                  "assignment_placement": "step"}
  chosen = closing["chosen"]
  assert chosen["candidate"] == "gemm_bf16" and chosen["vs_float32"]["within_tolerance"]
  assert all(chosen["vs_float32"][k] <= v for k, v in gpu_levers.TOLERANCE.items())
  assert closing["bound"] == "the profile's top kernels" and closing["top_kernels"]


def _complete_lines(path) -> str:
  """The text of ``path`` up to its last newline ('' while it does not exist)."""
  text = path.read_text() if path.exists() else ""
  return text[:text.rfind("\n") + 1]


@pytest.mark.slow
def test_sigterm_keeps_every_line_and_closes_with_the_choice(tmp_path):
  out, log = tmp_path / "levers.jsonl", tmp_path / "log.txt"
  with open(log, "w", encoding="utf-8") as sink:
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.gpu_levers", "--smoke", f"--out={out}",
         "--deadline_s=600"], cwd=helpers.REPO, stdout=sink, stderr=subprocess.STDOUT)
  try:
    before, started = "", time.time()
    while '"kind": "timing"' not in before:
      assert proc.poll() is None and time.time() - started < 400, log.read_text()[-3000:]
      time.sleep(0.2)
      before = _complete_lines(out)
    proc.send_signal(signal.SIGTERM)
    # The handler runs once the program being compiled or stepped returns to Python.
    code = proc.wait(timeout=240)
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait()
  assert code == 0, log.read_text()[-3000:]  # the closing line written, the command ends as usual
  text = out.read_text()
  assert text.startswith(before) and text.endswith("\n")
  lines = [json.loads(line) for line in text.splitlines()]
  assert lines[0]["kind"] == "start" and lines[1]["kind"] == "timing"
  assert lines[-1]["kind"] == "choice" and lines[-1]["stopped_by"] == "SIGTERM"
  assert lines[-1]["bound"] in ("stopped by SIGTERM", "the profile's top kernels")
  assert [line["kind"] for line in lines].count("choice") == 1
