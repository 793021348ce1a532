"""How long the step waits on the host's exact assignment, for N runs in one program.

  python -m benchmarks.assignment_wait [--config=experiments/configs/dsprites_cascade.py:m6]
      [--runs=10,40] [--steps=5] [--config.batch_size=...]

CascadeVAE after t_d (``cascade.discrete_start = 0``, `common.force_discrete`) with
``cascade.solver='scipy'``: every step sends the runs' problems ``[runs, B, S]`` to the host in
one ``jax.pure_callback`` (`disentangle.assignment.assign`, the runs ``vmap``-ped as the trainer
lays them out on accelerators) and waits for the labels before the rest of the step. For each N
of ``--runs`` the step (`common.build_step`, synthetic batches) is compiled and timed twice:

- ``step_ms``: with the real solver (`assignment._assign_host`: scipy's
  ``linear_sum_assignment`` on the slot matrix of every run's problem);
- ``stand_in_step_ms``: with the solver replaced by a zero-cost stand-in (every label 0: the same
  shapes in and out, the same callback, so the rest of the step does the same work);

``wait_ms`` = their difference, the time per step the device waits on the host's solve, with
``wait_share`` = ``wait_ms / step_ms``; ``solve_ms``: the callback body alone (its median per
step), for comparison. Medians over ``--steps`` steps after two warm-up steps. Here the device is
the CPU, which also computes the step, so the figures are the host's cost of the solve in the
step; on a GPU the same difference is the device's idle time.

``overlap``: whether the solve is overlapped with device work (``"none"``: it is not; the module
docstring of `disentangle.assignment` says why the exact solve stays on the step's path). One JSON
line per N, with the load average before and after it.
"""
from __future__ import annotations

import contextlib
import json
import time

from absl import app
from absl import flags
import jax
from ml_collections import config_flags
import numpy as np

from benchmarks import common
from disentangle import assignment

_CONFIG = config_flags.DEFINE_config_file(
    "config", "experiments/configs/dsprites_cascade.py:m6", "Config file (and variant).",
    lock_config=False)
_RUNS = flags.DEFINE_list("runs", ["10", "40"], "Runs per program, one figure each.")
_STEPS = flags.DEFINE_integer("steps", 5, "Steps timed (medians).")


def _stand_in(u, penalty=None):
  """The zero-cost stand-in of `assignment._assign_host`: label 0 for every sample."""
  del penalty
  return np.zeros(np.shape(u)[:-1], np.int32)


@contextlib.contextmanager
def solver(fn):
  """``assignment._assign_host`` replaced by ``fn`` while the step is built (``pure_callback``
  captures the host function when the step is traced)."""
  original = assignment._assign_host  # pylint: disable=protected-access
  assignment._assign_host = fn  # pylint: disable=protected-access
  try:
    yield
  finally:
    assignment._assign_host = original  # pylint: disable=protected-access


def time_step(config, runs: int, steps: int, host_fn) -> tuple[float, float, float]:
  """(median step ms, median callback-body ms per step, compile s) with ``host_fn`` solving."""
  bodies = []

  def timed(*args, **kwargs):
    t0 = time.perf_counter()
    try:
      return host_fn(*args, **kwargs)
    finally:
      bodies.append(time.perf_counter() - t0)

  with solver(timed):
    bench = common.build_step(config, common.image_shape(config), num_seeds=runs,
                              seed_batching="vmap")
  state, times = bench.state, []
  for i in range(steps + 2):
    batch = bench.batches[i % len(bench.batches)]
    t0 = time.perf_counter()
    state, metrics = bench.compiled(state, batch)
    jax.block_until_ready((state, metrics))
    if i >= 2:
      times.append(time.perf_counter() - t0)
  calls = bodies[-steps:] if bodies else [0.0]
  return (1e3 * float(np.median(times)), 1e3 * float(np.median(calls)), bench.compile_s)


def main(argv) -> None:
  del argv
  config = _CONFIG.value
  config.cascade.solver = "scipy"
  head = common.header("assignment_wait", flags.FLAGS["config"], config, force=True)
  for runs in (int(r) for r in _RUNS.value):
    load_before = common.load_average()
    real_ms, solve_ms, compile_s = time_step(config, runs, _STEPS.value,
                                             assignment._assign_host)  # pylint: disable=protected-access
    stand_ms, _, stand_compile_s = time_step(config, runs, _STEPS.value, _stand_in)
    record = dict(head, runs=runs, steps=_STEPS.value, problem=[runs, int(config.batch_size),
                                                                int(config.cascade.num_discrete)],
                  host_threads=assignment.HOST_THREADS, step_ms=round(real_ms, 3),
                  stand_in_step_ms=round(stand_ms, 3), wait_ms=round(real_ms - stand_ms, 3),
                  wait_share=round((real_ms - stand_ms) / real_ms, 4), solve_ms=round(solve_ms, 3),
                  compile_s=round(compile_s + stand_compile_s, 1), overlap="none",
                  load_before=load_before)
    print(json.dumps(common.finish_record(record, common.configure_host())), flush=True)


if __name__ == "__main__":
  app.run(main)
