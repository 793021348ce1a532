"""Timing of the exact assignment solvers of `disentangle.assignment` (CascadeVAE Eq. 6).

  python -m benchmarks.assignment_solvers [--sizes 64,256] [--classes 3,10] [--penalty 0.1]

Prints one JSON line per (solver, n, S) with the median milliseconds per solve:

- ``scipy_numpy``: ``assign(numpy_u, penalty)`` (linear_sum_assignment on the host, float64);
- ``scipy_callback_jit``: the same through ``jax.pure_callback`` inside ``jax.jit``;
- ``hungarian_jit``: the on-device class-graph shortest-augmenting-path solver under jit;

u is Bernoulli-log-likelihood-like (about -600, class differences ~ N(0, 2^2)); every solver's
objective is checked against scipy's on the same problem (``objective_gap``, relative).
"""
from __future__ import annotations

import argparse
import functools
import json
import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from disentangle import assignment


def _median_ms(fn: Callable[[], object], *, min_reps: int = 5, max_reps: int = 50,
               budget_s: float = 0.5) -> tuple[float, int]:
  times = []
  start = time.perf_counter()
  while len(times) < max_reps and (len(times) < min_reps or time.perf_counter() - start < budget_s):
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    times.append(time.perf_counter() - t0)
  return 1e3 * float(np.median(times)), len(times)


def _problem(n: int, num_classes: int, seed: int) -> np.ndarray:
  rng = np.random.default_rng(seed)
  u = -600.0 - 50.0 * rng.random((n, 1)) + 2.0 * rng.normal(size=(n, num_classes))
  return u.astype(np.float32)


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--sizes", default="64,256")
  parser.add_argument("--classes", default="3,10")
  parser.add_argument("--penalty", type=float, default=0.1)
  args = parser.parse_args(argv)
  penalty = args.penalty
  for n in (int(v) for v in args.sizes.split(",")):
    for num_classes in (int(v) for v in args.classes.split(",")):
      u = _problem(n, num_classes, seed=n + num_classes)
      u_dev = jnp.asarray(u)
      reference = assignment.assignment_objective(u, assignment.assign(u, penalty), penalty)
      runs = {
          "scipy_numpy": lambda: assignment.assign(u, penalty),
          "scipy_callback_jit": jax.jit(lambda v: assignment.assign(v, penalty)),
          "hungarian_jit": jax.jit(lambda v: assignment.assign(v, penalty, solver="hungarian")),
      }
      for name, fn in runs.items():
        call = fn if name == "scipy_numpy" else functools.partial(fn, u_dev)
        t0 = time.perf_counter()
        labels = np.asarray(jax.block_until_ready(call()))
        first_ms = 1e3 * (time.perf_counter() - t0)
        median_ms, reps = _median_ms(call)
        objective = assignment.assignment_objective(u, labels, penalty)
        record = dict(solver=name, n=n, S=num_classes, penalty=penalty,
                      median_ms=round(median_ms, 3), reps=reps,
                      first_call_ms=round(first_ms, 1),
                      objective_gap=float(abs(objective - reference) / abs(reference)),
                      backend=jax.default_backend())
        if name == "scipy_numpy":
          record["slots_per_class"] = assignment.slots_per_class(u.astype(np.float64), penalty)
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
  main()
