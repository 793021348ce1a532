"""Run-steps per second of N runs in one program over 1, 2, 4, 8 devices, before and after t_d.

  XLA_FLAGS=--xla_force_host_platform_device_count=8 python -m benchmarks.sweep \
      --config=experiments/configs/mnist_cascade.py --runs=8 --devices=1,2,4,8 --steps=3

Builds the trainer's program (:class:`disentangle.train.runs.Program`: the runs on a
``(runs, data)`` mesh, one compiled step per phase) for ``--runs`` seeds on each device count,
and the single run on one device, on synthetic batches (`disentangle.reproduce.throughput.time_runs`). For each layout and
phase (CascadeVAE: ``before`` t_d, without the discrete branch, and ``after``; other methods:
one phase) prints one JSON line: run-steps/s (median step), ``callbacks_per_step`` (host
assignment calls per step, counted), the compiled program's top-level operation count and
``ratio_to_separate`` = N x the single run's step time / the program's step time (> 1: the one
program beats N separate runs on the same devices one after another). Programs are timed one
after another, never two at once; the load average is printed beside each line.
"""
from __future__ import annotations

import functools
import json

from absl import app
from absl import flags
import jax
from ml_collections import config_flags

from benchmarks import step_timing
from disentangle.reproduce import throughput

_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file[:variant].",
                                          lock_config=True)
_RUNS = flags.DEFINE_integer("runs", 8, "N: runs (seeds) in one program.")
_DEVICES = flags.DEFINE_list("devices", ["1", "2", "4", "8"], "Device counts to lay N runs on.")
_STEPS = flags.DEFINE_integer("steps", 3, "Timed steps per program and phase.")
_WARMUP = flags.DEFINE_integer("warmup", 1, "Untimed steps after compilation.")
flags.mark_flag_as_required("config")


def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  malloc = step_timing.configure_host()
  config = _CONFIG.value
  image = throughput.image_shape(config)
  head = {"benchmark": "sweep", "config": step_timing.describe_config(flags.FLAGS["config"]),
          "method": config.method, "backend": jax.default_backend(),
          "device_count": jax.device_count(), "cores": throughput.num_cores(),
          "note": throughput.DATA_NOTE}
  print(json.dumps(head), flush=True)
  measure = functools.partial(throughput.time_runs, image=image, steps=_STEPS.value,
                              warmup=_WARMUP.value)
  with throughput.CallbackCounter() as counter:
    single = measure(config, 1, devices=1, counter=counter)
    for r in single.values():
      print(json.dumps(dict(r, ratio_to_separate=1.0)), flush=True)
    for devices in map(int, _DEVICES.value):
      for r in measure(config, _RUNS.value, devices=devices, counter=counter).values():
        ratio = _RUNS.value * single[r["phase"]]["step_ms"] / r["step_ms"]
        print(json.dumps(dict(r, ratio_to_separate=round(ratio, 3), malloc=malloc)), flush=True)


if __name__ == "__main__":
  app.run(main)
