"""The step of a method whose discrete codes an exact assignment chooses: costs, solve, update.

A method with such a code (CascadeVAE from t_d on, Algorithm 1) gives its step in two pure parts
and says how its codes are solved (`disentangle.methods.base`):

- ``method.code_costs(state, batch) -> Costs(u, reuse)``: the costs u [B, S] of the codes at the
  step's own key and iteration, without gradient, and what the update reuses of computing them;
- ``method.train_step_given_codes(state, batch, costs, d) -> (state, metrics)``: the update with
  the codes d;
- ``method.code_solve``: an `assignment.Solve` (lambda', ``'scipy'`` on the host or
  ``'hungarian'`` on the device, global or per-shard scope), or None in a phase without codes.

This module is the one place that composes them, and the one place that decides where the
solve runs. For one run, or the runs of one program (their leading axis,
`disentangle.train.runs.Runs`: ``vmap`` or unrolled, with or without a sweep), there are two
placements of the solve, computing the same codes:

- **in the step** (:func:`step`, :func:`runs_step`; the default): costs, solve and update in one
  compiled program, the host's solve through ``jax.pure_callback`` (the problems of every run in
  one callback) or the on-device solver;
- **overlapped** (:func:`overlapped`; ``assignment_placement='overlapped'``, the GPU's
  ``'auto'``): the runs in two groups, A (the first ceil(R / 2)) and B, each group's costs and
  update compiled as programs of their own and the host solving between them::

      device:  costs(A)  costs(B)                update(A)             update(B)
      host:              solve(A) ............   solve(B) ............

  JAX dispatches asynchronously, so the host solves A's problems while the device computes B's
  costs, and B's while the device updates A; the device waits only for what the overlap does
  not hide (`benchmarks/assignment_wait.py`). The host solves each problem with the function
  the step's callback calls (`assignment.solve_host`), with the penalty in the precision the
  callback receives it, so the codes are the exact optimum of the same u; the update reuses the
  costs' passes as in the step. On the CPU the runs end bit for bit where the one program ends
  them (`tests/test_codes.py`); elsewhere XLA may fuse the split programs differently.

:func:`placement` decides which, once, when the runs are set up (`runs.Program`), from every
condition that decides it; the run's ``config.json`` records the outcome.
"""
from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from disentangle import assignment
from disentangle import config as config_lib
from disentangle import methods
from disentangle.train import seeds

# The fewest runs a program overlaps in each layout. Under ``vmap`` a group of one run compiles
# plain convolutions where the program of all runs compiles grouped ones, which round
# differently; two runs a group keep the grouped ones (and the one program's numbers).
MIN_RUNS = {"unroll": 2, "vmap": 4}


def placement(config, num_runs: int, *, mesh=None, manual: bool = False,
              processes: int = 1) -> str:
  """Where the codes of ``config``'s ``num_runs`` runs are solved: ``'overlapped'`` where
  ``assignment_placement`` asks for it (its ``'auto'``: `config.BACKEND_DEFAULTS`) and every
  condition of the overlap holds, else ``'step'``. The conditions: at least :data:`MIN_RUNS`
  runs in the program's layout, one process (several each solve in their own callback), no runs
  axis over devices (``manual``: each device solves its own runs inside ``shard_map``), and a
  run whose codes are solved on the host (``method.run_solve``: the ``'scipy'`` solver, not
  per shard of ``mesh``, t_d within the run)."""
  asked = config_lib.resolve("assignment_placement", config.assignment_placement)
  solve = methods.spec(config.method).cls.run_solve(config, None if manual else mesh)
  overlaps = (asked == "overlapped" and not manual and processes == 1
              and num_runs >= MIN_RUNS[seeds.layout(config)]
              and solve is not None and solve.on_host)
  return "overlapped" if overlaps else "step"


def overlaps(config, method, phase) -> bool:
  """Whether the step of ``phase`` is :func:`overlapped`: the runs' :func:`placement` (in
  ``config``), in a phase with codes."""
  return (config.assignment_placement == "overlapped"
          and method.for_phase(phase).code_solve is not None)


def step(method) -> Callable:
  """``(state, batch) -> (state, metrics)`` of one run: costs, solve and update in one program
  where ``method.code_solve``, else the method's own ``train_step``."""
  solve = method.code_solve
  if solve is None:
    return method.train_step

  def composed(state, batch):
    costs = method.code_costs(state, batch)
    return method.train_step_given_codes(state, batch, costs, solve(costs.u))

  return composed


def runs_step(runs) -> Callable:
  """``(state, batch, values) -> (state, metrics)`` of several runs (`runs.Runs`) in one
  program: every run's costs, their solve (one host callback for all runs where the solve is
  on the host), every run's update; the runs' ``train_step`` in a phase without codes."""
  if runs.base.code_solve is None:
    return runs.each(lambda m, s, b: m.train_step(s, b))
  costs_of, update = _parts(runs)

  def composed(state, batch, values):
    costs = costs_of(state, batch, values)
    return update(state, batch, values, costs, solve_runs(runs, values, costs.u))

  return composed


def _parts(runs) -> tuple[Callable, Callable]:
  """Every run's costs and every run's update given its codes, over the runs' leading axis."""
  return (runs.each(lambda m, s, b: m.code_costs(s, b)),
          runs.each(lambda m, s, b, c, d: m.train_step_given_codes(s, b, c, d)))


def solve_runs(runs, values, u) -> jax.Array:
  """The codes int32 [R, B] of the runs' costs u [R, B, S] inside a program.

  Under ``vmap`` each run's solve, batched: the host callback receives every run's problem at
  once (``vmap_method='expand_dims'``). Unrolled: the problems stacked into one callback when
  every run's solve is on the host (each run's penalty as its own call would pass it,
  `assignment.stacked_penalties`); else each run's own solve.
  """
  if runs.how == "vmap":
    return jax.vmap(lambda v, u_i: runs.method_of(v).code_solve(u_i))(values, u)
  solves = [m.code_solve for m in runs.methods(values, u.shape[0])]
  if all(s.on_host for s in solves):
    return assignment.assign(u, assignment.stacked_penalties([s.penalty for s in solves],
                                                             u.dtype))
  return jnp.stack([solve(u[i]) for i, solve in enumerate(solves)])


def groups(num_runs: int) -> list[tuple[int, int]]:
  """The runs ``[lo, hi)`` of the two groups: the first ceil(R / 2) runs, then the rest."""
  if num_runs < 2:
    raise ValueError(f"two groups need at least 2 runs, got {num_runs}")
  half = (num_runs + 1) // 2
  return [(0, half), (half, num_runs)]


def _rows(tree, lo: int, hi: int):
  return jax.tree_util.tree_map(lambda a: a[lo:hi], tree)


def group_parts(runs, lo: int, hi: int) -> tuple[Callable, Callable]:
  """``(costs, update)`` of runs ``[lo, hi)``, before jit: ``costs(state, batch, values) ->
  Costs`` of the group from the whole stacked state; ``update(state, batch, values, costs, d)
  -> (state, the group's metrics)`` steps the group's runs and writes them into the whole state.
  """
  costs_of, update_of = _parts(runs.group(lo, hi))

  def costs(state, batch, values):
    return costs_of(*(_rows(t, lo, hi) for t in (state, batch, values)))

  def update(state, batch, values, costs, d):
    group, metrics = update_of(*(_rows(t, lo, hi) for t in (state, batch, values)), costs, d)
    return jax.tree_util.tree_map(lambda a, g: a.at[lo:hi].set(g), state, group), metrics

  return costs, update


def host_penalties(runs, values: dict, lo: int, hi: int, dtype) -> np.ndarray:
  """The penalties of runs ``[lo, hi)`` as their step's callback receives them: a constant in
  float64, a swept one (an array of the run's values) in the dtype of u."""
  group = runs.group(lo, hi)
  values = jax.tree_util.tree_map(lambda a: np.asarray(a)[lo:hi], values)
  methods = group.methods(values, hi - lo) if group.how == "unroll" else [
      group.method_of(seeds.take(values, i) if values else values) for i in range(hi - lo)]
  return np.asarray(assignment.stacked_penalties([m.code_solve.penalty for m in methods], dtype))


def concatenate(*trees):
  """The groups' metrics as one tree over every run."""
  return jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs), *trees)


def overlapped(runs, values, compile_costs: Callable, compile_update: Callable) -> "Overlapped":
  """The overlapped step of ``runs`` (`runs.Runs`, with their swept ``values``): each group's
  costs and update (:func:`group_parts`) compiled by ``compile_costs`` / ``compile_update``
  (the trainer's jit with its shardings; the update donating the state)."""
  programs = []
  for lo, hi in groups(len(runs.cfgs)):
    costs, update = group_parts(runs, lo, hi)
    programs.append((compile_costs(costs), compile_update(update), functools.cache(
        lambda dtype, lo=lo, hi=hi: host_penalties(runs, values, lo, hi, dtype))))
  return Overlapped(programs, jax.jit(concatenate))


class Overlapped:
  """``step(state, batch, *rest) -> (state, metrics)`` of the two groups, dispatched as the
  module docstring draws it. ``programs``: per group ``(costs, update, penalties)``, the first
  two compiled, ``penalties(u_dtype)`` the group's penalties on the host
  (:func:`host_penalties`); ``join``: the jitted :func:`concatenate`."""

  def __init__(self, programs, join: Callable):
    self.programs, self.join = programs, join

  def __call__(self, state, batch, *rest):
    costs = [program(state, batch, *rest) for program, _, _ in self.programs]  # dispatched
    metrics = []
    for (_, update, penalties), c in zip(self.programs, costs):
      u = np.asarray(c.u)
      state, m = update(state, batch, *rest, c, assignment.solve_host(u, penalties(u.dtype)))
      metrics.append(m)
    return state, self.join(*metrics)
