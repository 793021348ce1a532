"""Milliseconds per train step of an experiment config, as the trainer compiles it.

  python -m benchmarks.train_step --config=experiments/configs/dsprites_cascade.py --steps=30 \
      [--warmup=5] [--config.model.conv_impl=fast] [--force_discrete=true]

Prints ONE JSON line: median / p10 / p90 ms per step after ``--warmup`` steps, compile time (s,
``lower`` + ``compile``), steps/s and images/s (from the median), the share of the step spent in
the host assignment callback (measured by wrapping its host function with a timer, see
:class:`benchmarks.step_timing.CallbackTimer`), the achieved GFLOP/s (XLA cost analysis flops of one
step / median time), the config name / variant / overrides, conv_impl, batch size, jax version,
number of devices and the machine's load average. Batches are synthetic (uniform random images in
[0, 1] of the configured shape; data loading is excluded). For CascadeVAE configs the discrete
branch is forced on (``cascade.discrete_start = 0``, so t > t_d at every timed step) unless
``--force_discrete=false``; the JSON says which.
"""
from __future__ import annotations

import json
from typing import Any

from absl import app
from absl import flags
from ml_collections import config_flags

from benchmarks import step_timing
from disentangle.reproduce import throughput

_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file[:variant].",
                                          lock_config=True)
_STEPS = flags.DEFINE_integer("steps", 30, "Timed steps (after the warm-up).")
_WARMUP = flags.DEFINE_integer("warmup", 5, "Untimed steps after compilation.")
_FORCE_DISCRETE = flags.DEFINE_bool(
    "force_discrete", True, "CascadeVAE: set cascade.discrete_start=0 (discrete branch active).")
flags.mark_flag_as_required("config")


def measure(config, *, steps: int, warmup: int, num_seeds: int = 1) -> dict[str, Any]:
  """Times ``steps`` steps of ``config`` (after ``warmup``) and returns the JSON fields.

  Args:
    config: the experiment config (already forced / overridden).
    steps: timed steps.
    warmup: untimed steps before timing.
    num_seeds: seeds trained at once by one vmapped step (the trainer's ``num_seeds``).

  Returns:
    Timing, throughput, callback share and GFLOP/s fields.
  """
  solver = config.cascade.solver if config.method == "cascadevae" else None
  with step_timing.CallbackTimer() as timer:
    bench = step_timing.build_step(config, throughput.image_shape(config), num_seeds=num_seeds)
    bench.run(warmup)
    mark = timer.mark()
    times = bench.run(steps)
    callback = timer.since(mark)
    cpu = bench.cpu_times[-steps:]
    problem = timer.last_problem
  callback_jit_ms = step_timing.time_callback_jit(*problem) if problem is not None else None
  stats = step_timing.summarize_ms(times)
  stats.update(step_timing.summarize_cpu_ms(cpu))
  median_s = stats["median_ms"] / 1e3
  images = config.batch_size * num_seeds
  out: dict[str, Any] = dict(stats)
  out.update(
      warmup_steps=warmup,
      compile_s=round(bench.compile_s, 2),
      steps_per_s=round(1.0 / median_s, 3),
      images_per_s=round(images / median_s, 1),
      gflops_per_step=round(bench.flops / 1e9, 4) if bench.flops else None,
      gflop_per_s=round(bench.flops / 1e9 / median_s, 2) if bench.flops else None,
      flops_note="XLA cost_analysis()['flops'] of the compiled step (a multiply-add counts 2; "
                 "with several devices, of one device's SPMD program) / median step time",
  )
  out.update(step_timing.callback_summary(callback, times, solver, callback_jit_ms))
  out.update(bench.metrics_summary())
  return out


def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  malloc = step_timing.configure_host()
  config = _CONFIG.value
  record = step_timing.header("train_step", flags.FLAGS["config"], config, _FORCE_DISCRETE.value)
  record.update(measure(config, steps=_STEPS.value, warmup=_WARMUP.value))
  print(json.dumps(step_timing.finish_record(record, malloc)), flush=True)


if __name__ == "__main__":
  app.run(main)
