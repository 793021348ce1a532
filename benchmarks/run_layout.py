"""The convolutions of N runs in one program: ``vmap`` (grouped convolutions) against the runs
unrolled and against their images folded into one batch.

  python -m benchmarks.run_layout [--config=experiments/configs/dsprites_cascade.py:m6]
      [--runs=1,10,40] [--layouts=vmap,unroll,folded] [--steps=10] [--step_level]

N runs in one program have N sets of weights, so their convolutions cannot share a kernel. For each
N of ``--runs`` and each layout, the forward and backward pass of the config's encoder and decoder
(:mod:`disentangle.nn.networks`, as the method builds them: reconstruction of every image from its
posterior mean, Bernoulli cross-entropy, gradients with respect to all weights) is compiled and
timed on synthetic images ``[N, B, H, W, C]``:

- ``vmap``: ``jax.vmap`` over the runs' weights and images; XLA lowers each convolution to one
  grouped convolution (``feature_group_count = N``). What the trainer runs on accelerators
  (`disentangle.train.seeds`, ``seed_layout='auto'``).
- ``unroll``: N copies of the single-run pass in one program, N convolutions per layer. What the
  trainer runs on CPU.
- ``folded``: the N x B images through ONE network (run 0's weights), one dense convolution per
  layer over a batch of N x B. The same arithmetic (FLOPs) as the other two but not the same
  computation: runs with their own weights cannot be folded. It is the rate a convolution of that
  size reaches, the ceiling of what grouping could give.

Steps are timed round-robin (one step of each layout in turn, ``--steps`` rounds after two warm-up
steps), so load hits all alike. One JSON line per N: median ms per step of each layout, run-steps
per second, ``<layout>_over_folded`` (its time / folded's: 1 = grouping costs nothing),
``best_per_run_layout`` (the faster of vmap and unroll, the two that train distinct runs), compile
seconds, and the load average before and after.

``--step_level`` adds, per N > 1, the trainer's whole step (`benchmarks.step_timing.build_step`, the
CascadeVAE discrete branch on) as ``vmap`` and ``unroll`` (folding does not apply: every run has
its own optimiser state and assignment), timed the same way.
"""
from __future__ import annotations

import json
import time
from typing import Any, Callable

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
from ml_collections import config_flags
import numpy as np

from benchmarks import layout_programs as layouts_lib
from benchmarks import step_timing
from disentangle.reproduce import throughput

_CONFIG = config_flags.DEFINE_config_file(
    "config", "experiments/configs/dsprites_cascade.py:m6", "Experiment config file[:variant].",
    lock_config=True)
_RUNS = flags.DEFINE_list("runs", ["1", "10", "40"], "Runs per program (N).")
_LAYOUTS = flags.DEFINE_list("layouts", list(layouts_lib.LAYOUTS),
                             f"Layouts of the network level, from {list(layouts_lib.LAYOUTS)}.")
_STEPS = flags.DEFINE_integer("steps", 10, "Timed rounds (one step of each layout per round).")
_STEP_LEVEL = flags.DEFINE_bool("step_level", False,
                                "Also time the trainer's whole step as vmap and unroll.")

WARMUP = 2


class Timed:
  """A compiled function with its arguments, stepped and timed one call at a time."""

  def __init__(self, fn: Callable, *args):
    t0 = time.perf_counter()
    self.compiled = jax.jit(fn).lower(*args).compile()
    self.compile_s = time.perf_counter() - t0
    self.args, self.times = args, []

  def step(self, record: bool = True) -> None:
    t0 = time.perf_counter()
    jax.block_until_ready(self.compiled(*self.args))
    if record:
      self.times.append(time.perf_counter() - t0)


class TimedStep:
  """The trainer's step (`step_timing.StepBench`) behind :class:`Timed`'s interface."""

  def __init__(self, bench):
    self.bench, self.compile_s, self.times = bench, bench.compile_s, []

  def step(self, record: bool = True) -> None:
    t = self.bench.run(1)
    if record:
      self.times += t


def round_robin(timed: dict[str, Any], steps: int) -> dict[str, float]:
  """Median ms of each after `WARMUP` untimed steps, one step of each in turn per round."""
  for t in timed.values():
    for _ in range(WARMUP):
      t.step(record=False)
  for _ in range(steps):
    for t in timed.values():
      t.step()
  return {k: 1e3 * float(np.median(t.times)) for k, t in timed.items()}


def network_level(config, image, runs: int, layouts, steps: int) -> dict[str, Any]:
  from disentangle import methods  # pylint: disable=g-import-not-at-top
  method = methods.build(config, image)
  keys = jax.random.split(jax.random.PRNGKey(0), runs)
  params = jax.vmap(method.init_params)(keys)
  images = jnp.asarray(np.random.default_rng(0).random(
      (runs, config.batch_size) + tuple(image), dtype=np.float32))
  one = layouts_lib.network_pass(method)
  timed = {k: Timed(layouts_lib.layout_fn(k, one, runs), params, images) for k in layouts}
  ms = round_robin(timed, steps)
  line: dict[str, Any] = {"level": "network", "runs": runs, "batch_size": config.batch_size}
  for k in layouts:
    line[f"{k}_ms"] = round(ms[k], 3)
    line[f"{k}_run_steps_per_s"] = round(runs / ms[k] * 1e3, 1)
    line[f"{k}_compile_s"] = round(timed[k].compile_s, 2)
  if "folded" in ms:
    for k in layouts:
      if k != "folded":
        line[f"{k}_over_folded"] = round(ms[k] / ms["folded"], 3)
  distinct = [k for k in layouts_lib.PER_RUN if k in ms]
  if distinct:
    line["best_per_run_layout"] = min(distinct, key=ms.get)
  return line


def step_level(config, image, runs: int, steps: int) -> dict[str, Any]:
  timed = {k: TimedStep(step_timing.build_step(config, image, num_seeds=runs, seed_batching=k))
           for k in layouts_lib.PER_RUN}
  ms = round_robin(timed, steps)
  line: dict[str, Any] = {"level": "step", "runs": runs, "batch_size": config.batch_size}
  for k, t in timed.items():
    line[f"{k}_ms"] = round(ms[k], 3)
    line[f"{k}_run_steps_per_s"] = round(runs / ms[k] * 1e3, 1)
    line[f"{k}_compile_s"] = round(t.compile_s, 2)
  line["best_per_run_layout"] = min(ms, key=ms.get)
  return line


def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  try:
    counts = [int(r) for r in _RUNS.value]
  except ValueError:
    raise app.UsageError(f"--runs: whole numbers >= 1, got {_RUNS.value}") from None
  if not counts or min(counts) < 1:
    raise app.UsageError(f"--runs: whole numbers >= 1, got {_RUNS.value}")
  bad = [k for k in _LAYOUTS.value if k not in layouts_lib.LAYOUTS]
  if bad or not _LAYOUTS.value:
    raise app.UsageError(f"--layouts: each of {list(layouts_lib.LAYOUTS)}, got {_LAYOUTS.value}")
  malloc = step_timing.configure_host()
  config = _CONFIG.value
  head = step_timing.header("run_layout", flags.FLAGS["config"], config, _STEP_LEVEL.value)
  image = throughput.image_shape(config)
  for runs in counts:
    before = throughput.load_average()
    layouts = ["vmap"] if runs == 1 else list(_LAYOUTS.value)  # one run: every layout is one pass
    lines = [network_level(config, image, runs, layouts, _STEPS.value)]
    if _STEP_LEVEL.value and runs > 1:
      lines.append(step_level(config, image, runs, _STEPS.value))
    for line in lines:
      record = dict(head, **line, loadavg_before=before, loadavg_after=throughput.load_average())
      print(json.dumps(step_timing.finish_record(record, malloc)), flush=True)


if __name__ == "__main__":
  app.run(main)
