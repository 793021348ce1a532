"""What makes the dSprites step fast on a GPU: each lever timed on the real vmapped step.

:func:`measure` times the trainer's step of dSprites CascadeVAE ``m6`` (N runs in one program,
before and after t_d; `throughput.time_runs`, the code of the slot's throughput figures) for each
candidate of :data:`CANDIDATES` -- yesterday's GPU settings, each convolution form of
``model.conv_impl``, float32 / TF32 / bfloat16 (``model.precision``, ``model.dtype``), the reuse
of the S decoder passes (``cascade.reuse_passes``) and the host solve overlapped with the
device's work (``assignment_overlap``) -- and gives for each: run-steps/s, images/s, useful
TFLOP/s (the model's own multiply-adds, `gpu_lowering`), the convolutions of the lowered step by
cuDNN kind and how many read a zero-stuffed operand (`gpu_lowering.read`; on a GPU also the
compiled program's cuDNN and GEMM kernels and its interior pads, :func:`kernel_census`), and the
loss and discrete-code differences of one run against true float32 (:func:`fidelity`). A profile
of the chosen candidate's step gives the top kernels (`disentangle.train.profiling`).
"""
from __future__ import annotations

import importlib
import re
import tempfile
import time
from typing import Any, Callable, Sequence

import jax
import numpy as np

from disentangle.reproduce import throughput

# (name, config overrides), in the order they are measured (the budget may end the list).
# 'gpu_before': the GPU's settings before the stride-1 forms (Flax's convolutions, TF32, the
# update's decoder pass recomputed); 'reference': true float32, the fidelity's reference.
CANDIDATES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("gpu_before", {"model.conv_impl": "flax", "cascade.reuse_passes": False}),
    ("gemm", {"model.conv_impl": "gemm"}),
    ("phase", {"model.conv_impl": "phase"}),
    ("gemm_bf16", {"model.conv_impl": "gemm", "model.dtype": "bfloat16"}),
    ("phase_bf16", {"model.conv_impl": "phase", "model.dtype": "bfloat16"}),
    ("gemm_no_reuse", {"model.conv_impl": "gemm", "cascade.reuse_passes": False}),
    ("gemm_bf16_overlap", {"model.conv_impl": "gemm", "model.dtype": "bfloat16",
                           "assignment_overlap": True}),
    ("gemm_f32", {"model.conv_impl": "gemm", "model.precision": "highest"}),
    ("fast", {"model.conv_impl": "fast"}),
    ("flax", {"model.conv_impl": "flax"}),
)
REFERENCE = {"model.conv_impl": "flax", "model.precision": "highest", "model.dtype": "float32",
             "cascade.reuse_passes": False}
SMOKE_CANDIDATES = ("gpu_before", "gemm", "gemm_bf16")
# A candidate's numbers agree with true float32 when at most this share of the codes and this
# relative loss differ after the fidelity's steps (a seed changes both by far more:
# benchmarks/README.md, "Mixed precision").
TOLERANCE = {"codes_changed": 0.05, "loss_rel_diff": 0.01}


def config_of(overrides: dict[str, Any], smoke: bool):
  """dSprites CascadeVAE ``m6`` (``m6,smoke`` with ``smoke``) with ``overrides``."""
  from disentangle import config as config_lib  # pylint: disable=g-import-not-at-top
  module = importlib.import_module("experiments.configs.dsprites_cascade")
  c = module.get_config("m6,smoke" if smoke else "m6")
  with c.unlocked():
    for field, value in overrides.items():
      config_lib.set_field(c, field, value)
  return c


def kernel_census(hlo_text: str) -> dict[str, Any]:
  """The kernels of a compiled program's HLO (a GPU's): cuDNN calls by target, GEMMs (cuBLAS calls
  and Triton GEMM fusions), and pads with interior padding (a materialised dilation)."""
  targets = re.findall(r'custom_call_target="([^"]+)"', hlo_text)
  cudnn: dict[str, int] = {}
  for t in targets:
    if t.startswith("__cudnn$"):
      cudnn[t] = cudnn.get(t, 0) + 1
  gemms = sum(t.startswith("__cublas$") for t in targets) + hlo_text.count('"__triton_gemm"')
  stuffed = 0
  for padding in re.findall(r" pad\([^)]*\), padding=(\S+)", hlo_text):
    stuffed += any(len(d.split("_")) == 3 and int(d.split("_")[2]) > 0
                   for d in padding.rstrip(",").split("x"))
  return {"cudnn": cudnn, "gemms": gemms, "interior_pads": stuffed}


def sampled_unary(method, params, images, key) -> np.ndarray:
  """CascadeVAE's assignment costs u [B, S] of ``images`` at ``params``, at one sample z of the
  posterior drawn with ``key`` (the step's costs, Algorithm 1), on the host."""
  from disentangle import losses  # pylint: disable=g-import-not-at-top

  def unary(p, x, k):
    mean, logvar = method.encode(p["vae"], x)
    return method.unary(p["vae"], losses.reparameterize(k, mean, logvar), x)
  return np.asarray(jax.jit(unary)(params, images, key))


def fidelity(overrides: dict[str, Any], smoke: bool, steps: int = 3) -> dict[str, Any]:
  """One run after t_d from the same initial state and batch, ``steps`` updates, under the
  candidate's settings and under true float32 (:data:`REFERENCE`): the largest relative loss
  difference over the steps, and the share of discrete codes (the exact assignment of the S
  passes at the same eps) that differ at the last step's parameters."""
  from disentangle import assignment  # pylint: disable=g-import-not-at-top
  from disentangle import methods  # pylint: disable=g-import-not-at-top
  out = {}
  for name, settings in (("candidate", {**REFERENCE, **overrides}), ("reference", REFERENCE)):
    c = config_of(settings, smoke)
    with c.unlocked():
      c.assignment_overlap = False
    image = throughput.image_shape(c)
    method = methods.build(c, image).for_phase(True)
    state = jax.jit(method.init)(jax.random.PRNGKey(0))
    batch = jax.device_put(throughput.synthetic_batches(image, c.batch_size, 1, 1, 0)[0])
    step = jax.jit(method.train_step)
    losses_seen = []
    for _ in range(steps):
      state, metrics = step(state, batch)
      losses_seen.append(float(metrics["loss"]))

    u = sampled_unary(method, state.params, batch["image"], jax.random.PRNGKey(1))
    out[name] = (np.asarray(losses_seen), assignment.assign(u, c.cascade.penalty))
  (loss_c, codes_c), (loss_r, codes_r) = out["candidate"], out["reference"]
  return {"loss_rel_diff": float(np.max(np.abs(loss_c - loss_r) / np.abs(loss_r))),
          "codes_changed": float(np.mean(codes_c != codes_r)), "steps": steps}


def measure(*, smoke: bool, runs: Sequence[int], budget_s: float,
            log: Callable[[str], None] = print, names: Sequence[str] | None = None,
            profile_steps: int = 5) -> dict[str, Any]:
  """The lever figures (module docstring) until ``budget_s`` has passed (the first candidate is
  always measured): ``{"figures": [...], "chosen": ..., "top_kernels": [...]}``."""
  from disentangle.train import gpu_lowering  # pylint: disable=g-import-not-at-top
  end = time.time() + budget_s
  timing = throughput.TIMING[smoke]
  wanted = names or (SMOKE_CANDIDATES if smoke else [n for n, _ in CANDIDATES])
  candidates = [(n, o) for n, o in CANDIDATES if n in wanted]
  on_gpu = jax.default_backend() == "gpu"
  figures, model_flops = [], {}
  for count in sorted(runs, reverse=True):  # the largest program first: the slot's question
    for name, overrides in candidates:
      if figures and time.time() >= end:
        log(f"budget spent: {name} at {count} runs not measured")
        continue
      c = config_of(overrides, smoke)
      image = throughput.image_shape(c)
      census: dict[str, dict] = {}
      records = throughput.time_runs(
          c, count, steps=timing["steps"], warmup=timing["warmup"],
          min_seconds=timing["min_seconds"], keep_going=lambda: not figures or time.time() < end,
          inspect=(lambda compiled, phase: census.__setitem__(
              phase, kernel_census(compiled.as_text()))) if on_gpu else None)
      for phase, record in records.items():
        after = phase == "after"
        if phase not in model_flops:  # the model's own FLOPs: Flax's lowering, no stuffed zeros
          flax = config_of({"model.conv_impl": "flax"}, smoke)
          model_flops[phase] = gpu_lowering.read(
              gpu_lowering.lower_step(flax, image, 2, after)).useful_flops / 2
        reading = gpu_lowering.read(gpu_lowering.lower_step(c, image, min(count, 2), after))
        rate = record["run_steps_per_s"]
        figure = {"candidate": name, "overrides": overrides, "runs": count, "phase": phase,
                  "run_steps_per_s": rate, "images_per_s": round(rate * c.batch_size, 1),
                  "useful_tflop_per_s": round(rate * model_flops[phase] / 1e12, 3),
                  "step_ms": record["step_ms"], "compile_s": record["compile_s"],
                  "lowering": {k: v for k, v in reading.summary(min(count, 2)).items()
                               if k in ("by_kind", "zero_stuffed", "executed_gflop_per_run_step")},
                  "kernels": census.get(phase)}
        figures.append(figure)
        log(f"{name} runs={count} {phase}: {rate:.1f} run-steps/s")
  for name, overrides in candidates:
    if any(f["candidate"] == name for f in figures):
      agreement = fidelity(overrides, smoke, steps=1 if smoke else 3)
      for f in figures:
        if f["candidate"] == name:
          f["vs_float32"] = agreement
          f["within_tolerance"] = all(agreement[k] <= v for k, v in TOLERANCE.items())
  after = [f for f in figures if f["phase"] == "after" and f.get("within_tolerance")]
  chosen = max(after, key=lambda f: (f["runs"], f["run_steps_per_s"]), default=None)
  top = []
  if chosen is not None and profile_steps:
    top = profile(chosen["overrides"], chosen["runs"], smoke, profile_steps,
                  device="GPU" if on_gpu else "")
  return {"figures": figures, "chosen": chosen and {k: chosen[k] for k in (
      "candidate", "overrides", "runs", "run_steps_per_s", "useful_tflop_per_s")},
          "top_kernels": top}


def profile(overrides, count: int, smoke: bool, steps: int, device: str) -> list[dict]:
  """The top kernels of ``steps`` steps after t_d of ``count`` runs under ``overrides``, from a
  `jax.profiler` trace (`disentangle.train.profiling.top_kernels`)."""
  from disentangle.train import profiling  # pylint: disable=g-import-not-at-top
  c = config_of(overrides, smoke)
  with tempfile.TemporaryDirectory() as folder:
    throughput.time_runs(c, count, steps=steps, warmup=1, only=("after",), trace_dir=folder)
    (trace,) = profiling.trace_files(folder)[-1:]
    return profiling.top_kernels(trace, k=10, device=device)
