"""`disentangle.reproduce.levers` and its command, ``python -m benchmarks.gpu_levers``."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from disentangle.reproduce import levers
from tests import helpers


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
  assert levers.kernel_census(hlo) == {
      "cudnn": {"__cudnn$convForward": 2, "__cudnn$convBackwardFilter": 1},
      "gemms": 2, "interior_pads": 1}


def test_candidates_are_valid_configs_with_one_true_float32_reference():
  from disentangle import methods  # pylint: disable=g-import-not-at-top
  names = [name for name, _ in levers.CANDIDATES]
  assert len(names) == len(set(names)) and set(levers.SMOKE_CANDIDATES) <= set(names)
  for _, overrides in levers.CANDIDATES:
    methods.validate(levers.config_of(overrides, smoke=True))
  reference = levers.config_of(levers.REFERENCE, smoke=True)
  assert (reference.model.dtype, reference.model.precision) == ("float32", "highest")


@pytest.mark.slow
def test_smoke_command_prints_each_candidate_and_a_choice():
  out = subprocess.run(
      [sys.executable, "-m", "benchmarks.gpu_levers", "--smoke", "--budget_s=0"],
      cwd=helpers.REPO, capture_output=True, text=True, timeout=900, check=True).stdout
  lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
  figures, last = lines[:-1], lines[-1]
  # A budget of 0 s measures the first candidate only, both phases.
  assert [(f["candidate"], f["phase"]) for f in figures] == [
      ("gpu_before", "before"), ("gpu_before", "after")]
  before, after = figures
  assert after["lowering"]["zero_stuffed"] > 0  # Flax's transposed convolutions
  assert after["run_steps_per_s"] > 0 and after["useful_tflop_per_s"] > 0
  assert after["vs_float32"]["codes_changed"] <= levers.TOLERANCE["codes_changed"]
  assert last["chosen"]["candidate"] == "gpu_before"
  assert last["top_kernels"] and last["environment"]["backend"] == "cpu"
