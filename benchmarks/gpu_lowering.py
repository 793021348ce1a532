"""The dSprites CascadeVAE step as a GPU gets it: executed and useful FLOPs per convolution form.

  python -m benchmarks.gpu_lowering [--runs=1,2] [--conv_impls=flax,fast,phase,gemm,auto]
      [--dtype=float32] [--config=dsprites_cascade:m6]

Runs on any host (nothing is compiled or run): for each ``model.conv_impl`` (``auto``: the GPU's
choice), each count of runs (vmapped: grouped convolutions) and each CascadeVAE phase (before /
after t_d), the trainer's step is lowered with the GPU's ``'auto'`` settings
(`disentangle.train.gpu_lowering.lower_step`) and its convolutions classified by XLA:GPU's cuDNN
rules (`gpu_lowering.read`). ONE JSON line per (form, runs, phase): the convolutions by cuDNN
kind, how many run over a zero-stuffed operand, GFLOP per run-step executed and useful (the
form's own), and ``executed_over_model``: executed FLOPs over the model's useful FLOPs, those of
Flax's lowering without its stuffed zeros (the same reference for every form). A last line gives
each form's after / before t_d ratio of executed FLOPs.
"""
from __future__ import annotations

import importlib
import json

from absl import app
from absl import flags

_RUNS = flags.DEFINE_list("runs", ["1", "2"], "Runs per program (vmapped when > 1).")
_IMPLS = flags.DEFINE_list("conv_impls", ["flax", "fast", "phase", "gemm", "auto"],
                           "model.conv_impl values ('auto': the GPU's).")
_DTYPE = flags.DEFINE_string("dtype", "float32", "model.dtype.")
_CONFIG = flags.DEFINE_string("config", "dsprites_cascade:m6", "experiments.configs module:variant.")


def readings(config, image_shape, impls, runs_list, dtype="float32"):
  """{(impl, runs, phase): gpu_lowering.Reading} of the step (module docstring)."""
  from disentangle.train import gpu_lowering  # pylint: disable=g-import-not-at-top
  out = {}
  for impl in impls:
    c = config.copy_and_resolve_references()
    with c.unlocked():
      c.model.conv_impl, c.model.dtype = impl, dtype
    for runs in runs_list:
      for phase in ("before", "after"):
        text = gpu_lowering.lower_step(c, image_shape, runs, phase == "after")
        out[impl, runs, phase] = gpu_lowering.read(text)
  return out


def main(argv):
  del argv
  from disentangle import config as config_lib  # pylint: disable=g-import-not-at-top
  from disentangle.reproduce import throughput  # pylint: disable=g-import-not-at-top
  name, variant = _CONFIG.value.split(":")
  config = importlib.import_module(f"experiments.configs.{name}").get_config(variant)
  image_shape = throughput.image_shape(config)
  runs_list = [int(r) for r in _RUNS.value]
  impls = list(dict.fromkeys(["flax"] + _IMPLS.value))
  found = readings(config, image_shape, impls, runs_list, _DTYPE.value)
  for (impl, runs, phase), reading in found.items():
    if impl not in _IMPLS.value:
      continue
    model = found["flax", runs, phase].useful_flops
    print(json.dumps(dict(
        config=_CONFIG.value, conv_impl=impl,
        resolved=config_lib.resolve("model.conv_impl", impl, backend="gpu"), runs=runs,
        phase=phase, dtype=_DTYPE.value, **reading.summary(runs),
        model_gflop_per_run_step=round(model / runs / 1e9, 3),
        executed_over_model=round(reading.executed_flops / model, 3))))
  print(json.dumps({"after_over_before_executed": {
      f"{impl}/runs={runs}": round(found[impl, runs, "after"].executed_flops
                                   / found[impl, runs, "before"].executed_flops, 3)
      for impl in _IMPLS.value for runs in runs_list}}))


if __name__ == "__main__":
  app.run(main)
