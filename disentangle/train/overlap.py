"""The host's exact assignment overlapped with the device's work: a program's runs in two groups.

From t_d on, every CascadeVAE step needs the exact assignment of its costs u
(`disentangle.assignment`, Eq. 6), solved on the host between the step's two parts: the costs
(encoder, sample, the S decoder passes of u) and the update with the chosen codes. In one
program the device waits for that solve every step (`benchmarks/assignment_wait.py`). With
``assignment_overlap = True`` a program of R >= 2 runs splits its runs into two groups, A (the
first ceil(R / 2)) and B, and dispatches each step as four programs::

    device:  costs(A)  costs(B)                update(A)             update(B)
    host:              solve(A) ............   solve(B) ............

JAX dispatches asynchronously, so the host solves A's problems while the device computes B's
costs, and B's while the device updates A; the device waits only for what the overlap does not
hide. Each group's costs are ``method.host_assignment`` and its update ``method.with_codes(d)``'s
``train_step``, the same pieces the unrolled runs of one program use
(`disentangle.train.runs.unrolled_steps`), and the host solves each problem with the function the
step's callback calls (`disentangle.assignment.solve_host`), with the penalty in the precision
the callback receives it (a Python float in float64, a swept one as the device holds it). The
codes are therefore the exact optimum of the same u, and a program's runs end where they end in
one program (`tests/test_overlap.py`, bit for bit on the CPU).

The cost: every phase with a host assignment compiles four programs instead of one, and each
group runs its encoder once more (its costs are not kept for the update). The one-program step
is kept where there is nothing to overlap: fewer runs than :data:`MIN_RUNS` of the layout, a
runs axis on several devices (``mesh.runs`` > 1, each device solves its own runs), several
processes, or no host assignment (``cascade.solver='hungarian'``, ``assignment_scope='local'``
on a mesh, before t_d).
"""
from __future__ import annotations

from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from disentangle import assignment
from disentangle.train import seeds

# The fewest runs a program overlaps in each layout. Under ``vmap`` a group of one run compiles
# plain convolutions where the program of all runs compiles grouped ones, which round
# differently; two runs a group keep the grouped ones (and the one program's numbers).
MIN_RUNS = {"unroll": 2, "vmap": 4}


def groups(num_runs: int) -> list[tuple[int, int]]:
  """The runs ``[lo, hi)`` of the two groups: the first ceil(R / 2) runs, then the rest."""
  if num_runs < 2:
    raise ValueError(f"two groups need at least 2 runs, got {num_runs}")
  half = (num_runs + 1) // 2
  return [(0, half), (half, num_runs)]


def _rows(tree, lo: int, hi: int):
  return jax.tree_util.tree_map(lambda a: a[lo:hi], tree)


class Penalties:
  """The group's penalties in float64 where they are Python floats (recorded when the costs are
  traced, `assignment.stacked_penalties`); traced ones are returned by the costs instead."""

  def __init__(self):
    self.static = None


def group_programs(built_for: Callable, cfgs: Sequence, how: str, lo: int, hi: int,
                   config_of: Callable) -> tuple[Callable, Callable, Penalties]:
  """``(costs, update, penalties)`` of runs ``[lo, hi)``.

  ``costs(state, batch, values) -> (u, traced penalties or None)`` reads the whole stacked state;
  ``update(state, batch, values, codes) -> (state, metrics of the group)`` steps the group's
  runs with their codes and writes them back into the whole state. ``built_for(config)``: the
  run's method in the phase; ``how``: ``'vmap'`` (a run's config is ``config_of(its swept
  values)``) or ``'unroll'`` (every run's own config ``cfgs[i]`` as constants, as
  `runs.make_step`).
  """
  penalties = Penalties()
  if how == "vmap":
    method_of = lambda values: built_for(config_of(values))

    def problems_of(state, batch, values):
      static = []

      def one(s, b, v):
        u, lam = method_of(v).host_assignment(s, b)
        if not isinstance(lam, jax.Array):  # the same Python float for every run
          static.append(lam)
          return u, jnp.zeros((), u.dtype)
        return u, jnp.asarray(lam, u.dtype)

      u, lam = jax.vmap(one)(state, batch, values)
      return u, (np.full(hi - lo, static[0], np.float64) if static else lam)

    def steps(state, batch, values, codes):
      return jax.vmap(lambda s, b, v, d: method_of(v).with_codes(d).train_step(s, b))(
          state, batch, values, codes)
  else:
    built = [built_for(c) for c in cfgs[lo:hi]]

    def problems_of(state, batch, values):
      del values
      problems = [m.host_assignment(seeds.take(state, i), seeds.take(batch, i))
                  for i, m in enumerate(built)]
      u = jnp.stack([u for u, _ in problems])
      return u, assignment.stacked_penalties([lam for _, lam in problems], u.dtype)

    def steps(state, batch, values, codes):
      del values
      return seeds.stack([m.with_codes(codes[i]).train_step(seeds.take(state, i),
                                                            seeds.take(batch, i))
                          for i, m in enumerate(built)])

  def costs(state, batch, values):
    """(u [n, B, S], the traced penalties [n], or None where they are static)."""
    u, lam = problems_of(_rows(state, lo, hi), _rows(batch, lo, hi), _rows(values, lo, hi))
    if isinstance(lam, np.ndarray):
      penalties.static = lam
      return u, None
    return u, lam

  def update(state, batch, values, codes):
    group, metrics = steps(_rows(state, lo, hi), _rows(batch, lo, hi), _rows(values, lo, hi),
                           codes)
    state = jax.tree_util.tree_map(lambda a, g: a.at[lo:hi].set(g), state, group)
    return state, metrics

  return costs, update, penalties


def concatenate(*trees):
  """The groups' metrics as one tree over every run."""
  return jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs), *trees)


class OverlappedStep:
  """``train_step(state, batch, *rest) -> (state, metrics)`` of the two groups, dispatched as
  the module docstring draws it. ``programs``: per group ``(costs, update, penalties)`` jitted
  (``update`` donating the state); ``join``: the jitted :func:`concatenate`."""

  def __init__(self, programs, join: Callable):
    self.programs, self.join = programs, join

  def __call__(self, state, batch, *rest):
    problems = [costs(state, batch, *rest) for costs, _, _ in self.programs]  # dispatched
    metrics = []
    for (_, update, penalties), (u, lam) in zip(self.programs, problems):
      codes = assignment.solve_host(np.asarray(u),
                                    penalties.static if lam is None else np.asarray(lam))
      state, m = update(state, batch, *rest, codes)
      metrics.append(m)
    return state, self.join(*metrics)
