"""The slot's throughput figures alone, as one JSON object (`disentangle.reproduce.throughput`).

  python -m benchmarks.slot_throughput [--runs=1,10,20,40] [--smoke] [--minutes=5]

dSprites CascadeVAE ``m6`` and MNIST ``m10`` (``--smoke``: their smoke variants, 2 steps), N runs
in one program for each N of ``--runs``, before and after t_d, with the host solver, the
on-device one and the host's solves overlapped; what ``python -m experiments.slot`` writes to
``throughput.json``, measured until ``--minutes`` have passed (the first figure always).
"""
from __future__ import annotations

import json
import sys
import time

from absl import app
from absl import flags

from benchmarks import step_timing
from disentangle.reproduce import throughput
from disentangle.reproduce import utilisation
from experiments import aggregate

_RUNS = flags.DEFINE_list("runs", ["1", "10", "20", "40"], "Runs per program, one figure each.")
_SMOKE = flags.DEFINE_bool("smoke", False, "The smoke variants, 2 steps.")
_MINUTES = flags.DEFINE_float("minutes", 5.0, "Minutes of measurement (the first figure always).")


def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  malloc = step_timing.configure_host()
  log = lambda line: print(line, file=sys.stderr, flush=True)
  modules = {m.__name__.rpartition(".")[2]: m for m in aggregate.config_modules()}
  with utilisation.GpuSampler(None) as sampler:
    record = throughput.measure([int(r) for r in _RUNS.value], _SMOKE.value, sampler,
                                time.time() + 60 * _MINUTES.value, log, modules=modules)
  print(json.dumps(dict(record, host_setup=malloc)), flush=True)


if __name__ == "__main__":
  app.run(main)
