"""Non-finite values end a run in one line, wherever they appear.

A run stops with `NonFiniteError` when a step's loss, the state it is about to save or evaluate,
or the costs of its host assignment (CascadeVAE from t_d on, `disentangle.assignment`) hold NaN
or Inf. `NonFiniteError` is an `errors.UserError`: the command lines print its line and exit
with status 2, without a traceback. The line names the first step whose loss was non-finite (or
the step by which the state or the costs were), the runs of a program of several (their
directories' names) and the last good checkpoint: nothing non-finite is saved, so that
checkpoint is intact.

`Watch` reads nothing back on the steps between: each step's loss (a device array) is kept and
read at the steps where the loop reads the device anyway (log, evaluation, checkpoint, stop), all
the kept losses in one `jax.device_get`. The host solves run under `Watch.solves`: a problem
whose costs hold NaN/Inf gets a valid placeholder instead of `assignment.assign_host`'s
ValueError (which a `jax.pure_callback` raises as a long XLA runtime error), and the watch
records it; the loop looks at that record after every step (a host attribute) and checks at
once when it is set. The placeholder gives each non-finite row the first class whose cost is
non-finite, so that the step's loss, which is the log-likelihood of the chosen class, carries
it and names the step; the other problems of the call are solved as ever. Outside
`Watch.solves`, `assignment.assign` stays strict.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Callable, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from disentangle import assignment
from disentangle import errors


class NonFiniteError(errors.UserError, FloatingPointError):
  """The loss, the state or the assignment's costs became NaN/Inf; the last good checkpoint is
  kept."""


def finite_runs(state, multi: bool) -> jax.Array:
  """Whether every floating leaf of ``state``'s parameters is finite: bool ``[runs]`` over the
  leading axis of a program's stacked runs (``multi``), else a scalar. The optimiser state is not
  read: it may hold an infinity by design (``optax.contrib.reduce_on_plateau``'s best value)."""
  leaves = [x for x in jax.tree_util.tree_leaves(getattr(state, "params", state))
            if jnp.issubdtype(x.dtype, jnp.floating)]
  if multi:
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x).reshape(x.shape[0], -1), axis=1)
                              for x in leaves]), axis=0)
  return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


class Watch:
  """The non-finite checks of one training loop (module docstring).

  Args:
    names: the runs' names (their directories) when the program has several, else None.
    last_good: returns the last good checkpoint's step (None: none yet), waiting for a save in
      flight (`checkpoint.Checkpointer.last_good_step`).
    where: the checkpoints' folder, for the message.
    replicated: the sharding the state check's result is read from.
  """

  def __init__(self, names: Sequence[str] | None, last_good: Callable[[], int | None], where,
               replicated=None):
    self.names = list(names) if names else None
    self._last_good, self._where = last_good, where
    self._losses: list[tuple[int, jax.Array]] = []
    self.costs: str | None = None  # what the first host solve with non-finite costs held
    self._finite = jax.jit(functools.partial(finite_runs, multi=self.names is not None),
                           out_shardings=replicated)

  @property
  def due(self) -> bool:
    """A host solve has met non-finite costs: the loop checks now (`check_losses`). In a run of
    several processes, whose solves may see them at different steps, only at the steps where
    every process checks."""
    return self.costs is not None and jax.process_count() == 1

  def add(self, step: int, loss: jax.Array) -> None:
    """Keeps step ``step``'s loss (not read until `check_losses`)."""
    self._losses.append((step, loss))

  def check_losses(self, step: int) -> None:
    """`NonFiniteError` for the first kept step whose loss is non-finite, else for non-finite
    costs met by step ``step``; the kept losses are dropped."""
    kept, self._losses = self._losses, []
    for (s, _), value in zip(kept, jax.device_get([loss for _, loss in kept])):
      value = np.atleast_1d(np.asarray(value))
      bad = ~np.isfinite(value)
      if bad.any():
        shown = ", ".join(sorted({str(float(v)) for v in value[bad]}))
        raise self._error(f"loss became {shown} at step {s}", bad)
    if self.costs is not None:
      raise self._error(f"the host assignment's costs became NaN/Inf ({self.costs}) by step "
                        f"{step}", None)

  def check_state(self, step: int, state, before: str) -> None:
    """`NonFiniteError` when a floating leaf of ``state`` (after step ``step``) is non-finite;
    ``before``: what the loop was about to do with it (``"saved"``, ``"evaluated"``)."""
    finite = np.atleast_1d(np.asarray(jax.device_get(self._finite(state))))
    if not finite.all():
      raise self._error(f"the state (parameters or optimiser state) became NaN/Inf by step "
                        f"{step}, not {before}", ~finite)

  def _error(self, what: str, bad_runs) -> NonFiniteError:
    runs = ""
    if self.names is not None and bad_runs is not None:
      named = [n for n, b in zip(self.names, bad_runs) if b]
      runs = (f" in run{'s' if len(named) > 1 else ''} {', '.join(named)} "
              f"({len(named)} of {len(self.names)})")
    last = self._last_good()
    kept = (f"the last good checkpoint (step {last}) in {self._where} is intact"
            if last is not None else f"no checkpoint was saved in {self._where}")
    return NonFiniteError(f"{what}{runs}; stopping: {kept}")

  @contextlib.contextmanager
  def solves(self) -> Iterator[Watch]:
    """The host solves of the block (every one, `assignment.host_solver`) get placeholders for
    problems with non-finite costs, recorded in `costs` (module docstring)."""
    inner = []
    with assignment.host_solver(lambda u, penalty: self._solve(inner[0], u, penalty)) as solver:
      inner.append(solver)
      yield self

  def _solve(self, solve, u, penalty) -> np.ndarray:
    u = np.asarray(u)
    finite = np.isfinite(u)
    bad_rows = ~finite.all(axis=-1)
    if not bad_rows.any():
      return solve(u, penalty)
    bad = bad_rows.any(axis=-1)  # the problems holding one
    if self.costs is None:
      self.costs = f"{int(bad_rows.sum())} of {bad_rows.size} rows"
    labels = np.asarray(solve(np.where(bad[..., None, None], 0, u), penalty))
    stand_in = np.where(bad_rows, np.argmin(finite, axis=-1),
                        np.argmax(np.where(finite, u, -np.inf), axis=-1))
    return np.where(bad[..., None], stand_in, labels).astype(np.int32)
