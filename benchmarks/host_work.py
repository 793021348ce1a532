"""The host's work per training step for N runs in one program: the batch's input and the
exact assignment's callback, with the training set on the host and on the device.

  python -m benchmarks.host_work --config=experiments/configs/mnist_cascade.py:m10 [--runs=10]
      [--steps=20]

For ``--runs`` runs (``num_seeds``) of the config, timed alone, one step after another, outside
the trainer (medians over ``--steps`` steps, after two warm-up steps):

- ``input_host_ms``: what the prefetch thread does with ``dataset.placement='host'``: every run's
  batch loaded and converted to float32 (``local_batch``: rendering, for dSprites without its
  file), stacked ``[runs, B, ...]``, copied to the device and waited for;
- ``input_device_ms``: the same with the set on the device (`disentangle.train.device_data`):
  the runs' row indices ``[runs, B]`` drawn from the same streams and copied (the gather runs in
  the compiled step, on the device);
- ``callback_ms``: the host part of CascadeVAE's exact discrete assignment after t_d
  (`disentangle.assignment.assign_host`, as the ``pure_callback`` calls it): the runs' problems
  ``[runs, B, K]`` solved with scipy's ``linear_sum_assignment`` on the replicated-slot cost
  matrix (``HOST_THREADS`` threads).

Each also per run-step (``/ runs``). Prints one JSON line with the load average beside it.
"""
from __future__ import annotations

import json
import os

from absl import app
from absl import flags
import jax
from ml_collections import config_flags
import numpy as np

from benchmarks import step_timing
from disentangle import assignment
from disentangle import data as data_lib
from disentangle import methods
from disentangle.train import input_pipeline
from disentangle.train import runs as runs_lib
from disentangle.train import trainer

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file (and variant).",
                                          lock_config=False)
_RUNS = flags.DEFINE_integer("runs", 10, "Runs (num_seeds) in one program.")
_STEPS = flags.DEFINE_integer("steps", 20, "Steps timed (medians).")


def main(argv) -> None:
  del argv
  config = _CONFIG.value
  config.num_seeds = _RUNS.value
  runs = _RUNS.value
  load = os.getloadavg()[0]
  dataset = trainer.load_training_data(config)
  method_cls = type(methods.build(config, dataset.image_shape))
  spec_fn = getattr(method_cls, "batch_spec", None)
  spec = spec_fn(config) if spec_fn is not None else data_lib.IMAGES_ONLY
  cfgs = runs_lib.run_configs(config)
  source = runs_lib.make_source(dataset, spec, config, cfgs)
  device = jax.devices()[0]
  rows = input_pipeline.RowSource(source)
  record = {"benchmark": "host_work", "config": config.method, "dataset": config.dataset.name,
            "runs": runs, "batch_size": int(config.batch_size), "steps": _STEPS.value,
            "backend": jax.default_backend(), "cpu_count": os.cpu_count(),
            "load_average_1min": round(load, 2)}
  record["input_host_ms"] = step_timing.median_ms(
      lambda s: jax.block_until_ready(jax.device_put(source.local_batch(s), device)),
      _STEPS.value, warmup=2)
  record["input_device_ms"] = step_timing.median_ms(
      lambda s: jax.block_until_ready(jax.device_put(rows.local_batch(s), device)),
      _STEPS.value, warmup=2)
  num_discrete = int(config.get("cascade", {}).get("num_discrete", 0) or 0)
  if num_discrete > 1:
    gen = np.random.default_rng(0)
    u = gen.normal(size=(runs, int(config.batch_size), num_discrete))
    penalty = np.full((runs,), float(config.cascade.penalty))
    record["num_discrete"] = num_discrete
    record["host_threads"] = assignment.HOST_THREADS
    record["callback_ms"] = step_timing.median_ms(
        lambda s: assignment.assign_host(u + 1e-3 * s, penalty),
        _STEPS.value, warmup=2)
  for key in ("input_host_ms", "input_device_ms", "callback_ms"):
    if key in record:
      record[key.replace("_ms", "_ms_per_run_step")] = round(record[key] / runs, 4)
  record["load_average_1min_end"] = round(os.getloadavg()[0], 2)
  print(json.dumps(record))


if __name__ == "__main__":
  app.run(main)
