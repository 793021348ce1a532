"""XLA's FLOP count of a CascadeVAE step after t_d against the step before t_d.

Each phase's step is compiled as the trainer compiles it (:func:`benchmarks.step_timing.build_step`,
the phase fixed, N runs vmapped) and ``compiled.cost_analysis()['flops']`` read per run; nothing
is timed, so the figures do not depend on the machine's load. After t_d the step adds the S
decoder passes of the assignment's costs (CascadeVAE Algorithm 1, Eq. 6), from which the update's
decoder forward is taken.

  python -m benchmarks.step_flops --config=experiments/configs/dsprites_cascade.py:m6
"""
from __future__ import annotations

import json

from absl import app
from absl import flags
from ml_collections import config_flags

from benchmarks import step_timing
from disentangle import config as config_lib
from disentangle.reproduce import throughput

_CONFIG = config_flags.DEFINE_config_file("config", None, "experiment config", lock_config=False)
_RUNS = flags.DEFINE_list("runs", ["1", "2"], "runs vmapped in one program")
_CONV_IMPLS = flags.DEFINE_list("conv_impls", ["flax", "fast"], "model.conv_impl values")


def main(argv):
  del argv
  config = _CONFIG.value
  image = throughput.image_shape(config)
  gflop = lambda runs, phase: step_timing.build_step(config, image, num_seeds=runs,
                                                phase=phase).flops / runs / 1e9
  for impl in _CONV_IMPLS.value:
    config.model.conv_impl = impl
    for runs in map(int, _RUNS.value):
      before = gflop(runs, False)
      after = gflop(runs, True)
      print(json.dumps({"benchmark": "step_flops", "conv_impl": impl, "runs": runs,
                        "unary_batching": config_lib.resolve(
                            "cascade.unary_batching", config.cascade.unary_batching),
                        "gflop_per_run_before_t_d": round(before, 4),
                        "gflop_per_run_after_t_d": round(after, 4),
                        "after_over_before": round(after / before, 4)}), flush=True)


if __name__ == "__main__":
  app.run(main)
