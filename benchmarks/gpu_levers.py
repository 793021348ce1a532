"""One GPU command that decides: every lever of the dSprites step, timed on the real vmapped step.

  python -m benchmarks.gpu_levers [--runs=40,10] [--budget_s=420] [--candidates=NAME,...]
  python -m benchmarks.gpu_levers --smoke      # a CPU: the smoke config, 2 runs, 3 candidates

For each candidate of `disentangle.reproduce.levers.CANDIDATES` (yesterday's GPU settings, each
``model.conv_impl``, float32 / TF32 / bfloat16, the reuse of the S decoder passes, the overlapped
host solve) and each count of runs, largest first, until ``--budget_s`` (the first always):
ONE JSON line per (candidate, runs, phase) with run-steps/s, images/s, useful TFLOP/s, the
lowered step's convolutions by cuDNN kind and how many read a zero-stuffed operand, on a GPU the
compiled program's kernels, and the loss and code differences of one run against true float32;
then ONE line with the chosen candidate (the fastest after t_d at the most runs within
`levers.TOLERANCE`) and the top kernels of a profile of its step. Timing is
`disentangle.reproduce.throughput.time_runs`, as the slot's throughput section.
"""
from __future__ import annotations

import json
import sys

from absl import app
from absl import flags

_RUNS = flags.DEFINE_list("runs", ["40", "10"], "Runs per program (largest first).")
_BUDGET = flags.DEFINE_float("budget_s", 420.0, "Seconds of measurement (the first always).")
_CANDIDATES = flags.DEFINE_list("candidates", None, "Names of levers.CANDIDATES (default: all).")
_SMOKE = flags.DEFINE_bool("smoke", False, "The smoke config, 2 runs, a few candidates (CPU).")


def main(argv):
  del argv
  from disentangle.reproduce import levers  # pylint: disable=g-import-not-at-top
  from disentangle.reproduce import throughput  # pylint: disable=g-import-not-at-top
  runs = [2] if _SMOKE.value else [int(r) for r in _RUNS.value]
  found = levers.measure(smoke=_SMOKE.value, runs=runs, budget_s=_BUDGET.value,
                         names=_CANDIDATES.value, log=lambda m: print(m, file=sys.stderr))
  env = throughput.environment()
  for figure in found["figures"]:
    print(json.dumps({**figure, "smoke": _SMOKE.value}), flush=True)
  print(json.dumps({"chosen": found["chosen"], "top_kernels": found["top_kernels"],
                    "environment": env, "command": " ".join(sys.argv)}), flush=True)


if __name__ == "__main__":
  app.run(main)
