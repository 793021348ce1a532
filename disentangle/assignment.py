"""Exact discrete inference of CascadeVAE (Jeong & Song, ICML 2019, Section 4.1, Eq. 6).

Given u[i, k] = log p(x_i | z_i, e_k) for a minibatch of n samples and S classes, the inner
maximisation of Eq. 6 chooses one class d_i per sample:

  maximise_d  sum_i u[i, d_i]  -  penalty * #{unordered pairs i < j : d_i = d_j}
            = sum_i u[i, d_i]  -  penalty * sum_k c_k (c_k - 1) / 2,     c_k = #{i : d_i = k}.

The factor of two. Eq. 6 writes the penalty as lambda' * sum_{i != j} d_i^T d_j, a sum over
*ordered* pairs, i.e. 2 * lambda' per unordered same-class pair. The authors' code (a min-cost flow
whose class k has n parallel unit arcs of cost 0, lambda', 2 lambda', ...) charges lambda' per
*unordered* pair, and the published values (Appendix B: dSprites 0.001, MNIST 0.1, FashionMNIST
0.1, Chairs 0.01) were run with that code. ``penalty`` here is the per-unordered-pair coefficient:
pass the published lambda' unchanged to reproduce the paper; Eq. 6 read literally with a coefficient
lambda'_eq6 corresponds to ``penalty = 2 * lambda'_eq6``.

Exactness. Because the penalty is convex in each count (the m-th sample placed in class k costs
penalty * m extra, m = 0, 1, ...), the problem is exactly the linear assignment of n rows to S * n
"slots", slot m of class k costing -u[i, k] + penalty * m (Jeong & Song 2018, Theorem 1). Solvers:

- ``'scipy'``: :func:`scipy.optimize.linear_sum_assignment` on that matrix, in float64 on the host.
  The number of slots per class is truncated to a bound every optimum satisfies (see
  :func:`slots_per_class`), which keeps it exact. The solve itself is :func:`assign_host`.
  Inside ``jax.jit`` it runs through ``jax.pure_callback`` (``vmap_method='expand_dims'``: under
  ``jax.vmap`` the host receives the whole batch, e.g. every run's problem, and solves them in
  parallel threads (``HOST_THREADS``; scipy's ``linear_sum_assignment`` releases the GIL);
  separate problems, e.g. of unrolled runs, stack into one such call with
  :func:`stacked_penalties`; inside ``jax.shard_map`` each device solves its own shard). A Python-float penalty is bound into the
  callback in float64, so jit and numpy calls agree exactly. Every host solve goes through
  :func:`solve_host`, which calls :func:`assign_host` unless :func:`host_solver` has put another
  function in its place (to time the solve, count its calls, or replace it by a stand-in).
- ``'hungarian'``: on device, jit- and vmap-able. The Hungarian method's row-by-row shortest
  augmenting paths (successive shortest paths) on the slot matrix with the n identical slots of each
  class merged into one node: each new sample is inserted along a shortest path through the S class
  nodes (Bellman-Ford; moving sample j from class k to l costs u[j, k] - u[j, l]) ending in the
  cheapest free slot (penalty * c_k). O(n^2 S + n S^3) work in n sequential steps, exact up to float
  rounding of the input dtype.

No gradient flows through the labels (the costs are wrapped in ``jax.lax.stop_gradient``).

On the step's path. The host solve sits between the step's first part (the costs u, from the
parameters of this step) and its rest (the update with the chosen codes), so a run's solve
cannot overlap its own step, nor run ahead (u of the next step needs this step's update); on a
GPU the callback also occupies the program's stream. The runs of one program can overlap one
another's solves: ``assignment_placement = 'overlapped'`` dispatches them as two groups of
programs, one group's solve on the host while the device works on the other's
(`disentangle.train.codes`, the same codes and, on the CPU, the same numbers bit for bit). What the solve costs the step and
what the overlap hides: ``benchmarks/assignment_wait.py``; ``'hungarian'`` against the host
solver: ``benchmarks/assignment_solvers.py`` (figures in ``benchmarks/HISTORY.md``).
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import os
from typing import Any, Callable, Iterator, Literal, NamedTuple, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np
from scipy import optimize

from disentangle import sharding

Solver = Literal["scipy", "hungarian"]
ArrayLike = Union[np.ndarray, jax.Array, float]
SOLVERS = ("scipy", "hungarian")
_MAX_REPORTED = 10  # non-finite rows listed in an error message


# ------------------------------------------------------------------------------------------
# Objective and validation.
# ------------------------------------------------------------------------------------------
def assignment_objective(log_likelihoods: ArrayLike, labels: ArrayLike,
                         penalty: ArrayLike) -> Any:
  """The objective L_LB of Eq. 6 (per-unordered-pair form): sum_i u[i,d_i] - penalty * #pairs.

  Args:
    log_likelihoods: u, float [..., n, S].
    labels: int [..., n] in [0, S).
    penalty: lambda' >= 0 per unordered same-class pair; scalar or broadcastable to ``[...]``.

  Returns:
    Float [...]: numpy float64 when every input is numpy / Python, otherwise a jax array
    (usable inside jit, e.g. as a training metric).
  """
  if any(isinstance(a, jax.Array) for a in (log_likelihoods, labels, penalty)):
    xp, u = jnp, jnp.asarray(log_likelihoods)
  else:
    xp, u = np, np.asarray(log_likelihoods, np.float64)
  labels = xp.asarray(labels)
  num_classes = u.shape[-1]
  one_hot = labels[..., None] == xp.arange(num_classes)
  unary = xp.sum(xp.where(one_hot, u, 0), axis=(-2, -1))
  counts = xp.sum(one_hot, axis=-2).astype(u.dtype)
  return unary - xp.asarray(penalty, u.dtype) * xp.sum(counts * (counts - 1) / 2, axis=-1)


def _check_inputs(u: np.ndarray, penalty: np.ndarray) -> None:
  """Raises ValueError for non-finite log-likelihoods or a negative / non-finite penalty."""
  bad = ~np.all(np.isfinite(u), axis=-1)
  if np.any(bad):
    where = np.argwhere(bad)
    rows = [int(r[0]) if len(r) == 1 else tuple(int(v) for v in r) for r in where[:_MAX_REPORTED]]
    more = f" (and {len(where) - _MAX_REPORTED} more)" if len(where) > _MAX_REPORTED else ""
    raise ValueError(f"log_likelihoods contains NaN/Inf at rows {rows}{more} "
                     f"(row index over the leading [..., n] axes of shape {u.shape})")
  if not np.all(np.isfinite(penalty)) or np.any(penalty < 0):
    raise ValueError(f"penalty must be finite and >= 0, got {penalty}")


def _check_shape(shape: tuple[int, ...]) -> None:
  if len(shape) < 2 or shape[-1] < 1:
    raise ValueError(f"log_likelihoods must be [..., n, S] with S >= 1, got shape {shape}")


# ------------------------------------------------------------------------------------------
# Host solver (scipy).
# ------------------------------------------------------------------------------------------
def slots_per_class(u: np.ndarray, penalty: float) -> int:
  """Slots per class the host solver keeps in the assignment matrix of one problem; no optimum
  needs more.

  Args:
    u: float [n, S], one problem's log-likelihoods (the solver passes them in float64).
    penalty: lambda' >= 0 per unordered same-class pair.

  Returns:
    The number of slots m = 0, 1, ... of each class in the [n, S * slots] cost matrix.

  At an optimum no single sample i gains by moving from its class k to a class l:
  u[i,l] - penalty * c_l <= u[i,k] - penalty * (c_k - 1), so with
  G = max_i (max_k u[i,k] - min_k u[i,k]) and a = 1 + G / penalty every class has
  c_l >= c_max - a. Summing, n >= c_max + (S - 1) (c_max - a), i.e.
  c_max <= (n + (S - 1) a) / S. Truncating every class to that many slots (plus one spare
  for rounding) removes no optimum, so the truncated assignment is still exact. At most n
  (``n`` itself when ``penalty <= 0``).
  """
  n, num_classes = u.shape
  if penalty <= 0 or n == 0:
    return n
  a = 1.0 + float(np.max(u.max(axis=1) - u.min(axis=1))) / penalty
  if a >= n:
    return n
  return int(min(n, (n + (num_classes - 1) * a) // num_classes + 1))


def _solve_scipy_single(u: np.ndarray, penalty: float) -> np.ndarray:
  """Exact labels of one [n, S] problem by linear_sum_assignment on the slot matrix."""
  n, num_classes = u.shape
  if penalty == 0 or num_classes == 1:
    return np.argmax(u, axis=1).astype(np.int32)
  slots = slots_per_class(u, penalty)
  # cost[i, k * slots + m] = -u[i, k] + penalty * m
  cost = (-u[:, :, None] + penalty * np.arange(slots, dtype=np.float64)).reshape(n, -1)
  rows, cols = optimize.linear_sum_assignment(cost)
  labels = np.empty(n, np.int32)
  labels[rows] = cols // slots
  return labels


def assign_host(u: np.ndarray, penalty: np.ndarray) -> np.ndarray:
  """The exact host solver (``solver='scipy'``): int32 labels [..., n] of u [..., n, S].

  Each problem is solved in float64 by scipy's ``linear_sum_assignment`` on its slot matrix
  (module docstring), the problems of a batch in :data:`HOST_THREADS` threads. This is the
  solver :func:`solve_host` (and so ``assign``, inside ``jax.jit`` or not) calls by default;
  call it directly for the real solve whatever :func:`host_solver` has put in its place.

  Args:
    u: float [..., n, S] log-likelihoods (converted to float64).
    penalty: lambda' >= 0 per unordered same-class pair, broadcastable to ``[...]``.

  Raises:
    ValueError: non-finite log-likelihoods, a negative / non-finite penalty, or u not
      [..., n, S] with S >= 1.
  """
  u = np.asarray(u, np.float64)
  penalty = np.asarray(penalty, np.float64)
  _check_shape(u.shape)
  batch = np.broadcast_shapes(u.shape[:-2], penalty.shape)
  u = np.broadcast_to(u, batch + u.shape[-2:])
  penalty = np.broadcast_to(penalty, batch)
  _check_inputs(u, penalty)
  if u.size == 0:
    return np.zeros(u.shape[:-1], np.int32)
  flat_u = u.reshape((-1,) + u.shape[-2:])
  flat_p = penalty.reshape(-1)
  out = np.empty(flat_u.shape[:-1], np.int32)

  def solve(b):
    out[b] = _solve_scipy_single(flat_u[b], float(flat_p[b]))

  if flat_u.shape[0] == 1 or HOST_THREADS < 2:
    for b in range(flat_u.shape[0]):
      solve(b)
  else:  # the problems of the (vmapped) runs side by side: linear_sum_assignment drops the GIL
    list(_pool().map(solve, range(flat_u.shape[0])))
  return out.reshape(u.shape[:-1])


def solve_host(u: np.ndarray, penalty: np.ndarray) -> np.ndarray:
  """The host solve: the ``jax.pure_callback`` body of ``assign(..., solver='scipy')`` and its
  numpy path, also called outside a program (the overlapped runs of
  `disentangle.train.codes`): int32 labels [..., n] of u [..., n, S] and penalties [...].

  Calls the current host solver, looked up at each call: :func:`assign_host`, or the function
  installed by :func:`host_solver`.
  """
  return _host_solver(u, penalty)


HostSolver = Callable[[np.ndarray, np.ndarray], np.ndarray]
_host_solver: HostSolver = assign_host


@contextlib.contextmanager
def host_solver(fn: HostSolver) -> Iterator[HostSolver]:
  """Puts ``fn`` in the place of the host solver while the context is active.

  Every host solve calls the current solver at the time it runs (:func:`solve_host`): the
  ``jax.pure_callback`` of ``assign(..., solver='scipy')`` inside ``jax.jit`` (programs compiled
  before the context included: nothing is captured at trace time), ``assign`` on numpy input,
  and the overlapped step's solves. ``fn(u, penalty)`` gets
  the arguments :func:`solve_host` gets (inside a program: u numpy [..., n, S] in the traced
  dtype, penalty a numpy array broadcastable to ``[...]``, float64 where it was a Python float)
  and must return int32 labels [..., n]; an exception it raises reaches the caller as the real
  solver's would (inside jit, as JAX's runtime error). Used to time the solve or count its calls
  (wrapping the solver it replaced) and to replace it by a zero-cost stand-in of the same
  shapes::

    with assignment.host_solver(lambda u, p: np.zeros(u.shape[:-1], np.int32)):
      ...  # every step's assignment gives class 0

  The replacement is process-wide, not per thread (the callbacks run on XLA's threads), and a
  callback calls the solver in place when the program runs it: wait for the programs dispatched
  inside the context (``jax.block_until_ready``) before leaving it. Contexts nest; each puts back
  the solver it replaced when it exits, also on an exception.

  Yields:
    The solver ``fn`` replaces (:func:`assign_host` outside any other such context), for
    ``fn`` to wrap.
  """
  global _host_solver
  previous, _host_solver = _host_solver, fn
  try:
    yield previous
  finally:
    _host_solver = previous


# Threads solving the problems of one host call: half the cores (the other half feed the device),
# one below 4 cores, where the hand-off costs more than a solve (benchmarks/HISTORY.md,
# "Runs and sweeps in one program").
HOST_THREADS = (os.cpu_count() or 1) // 2 if (os.cpu_count() or 1) >= 4 else 1


@functools.lru_cache(maxsize=None)
def _pool() -> concurrent.futures.ThreadPoolExecutor:
  return concurrent.futures.ThreadPoolExecutor(max_workers=HOST_THREADS,
                                               thread_name_prefix="assignment")


# ------------------------------------------------------------------------------------------
# On-device solvers.
# ------------------------------------------------------------------------------------------
def _minus_ones_like(x: jax.Array) -> jax.Array:
  """int32 -1s shaped like finite ``x``, computed from ``x`` for use as an initial loop carry.

  Inside ``jax.shard_map`` a loop carry must keep its type, and a constant is device-invariant
  while the updated carry varies with the per-shard input; deriving it from ``x`` makes it vary
  over the same mesh axes as ``x`` (and is a no-op elsewhere).
  """
  return jnp.where(jnp.isnan(x), 0, -1).astype(jnp.int32)


def _ssp_single(u: jax.Array, penalty: jax.Array) -> jax.Array:
  """Successive shortest paths on the class graph for one [n, S] problem (module docstring).

  Invariant: after inserting samples 0..i-1 the labels are an optimal assignment of those
  samples (the Hungarian method's row-by-row augmentation on the slot matrix). Inserting sample i
  along a shortest path keeps it. Paths are simple in the class graph, so Bellman-Ford with S - 1
  rounds finds them (the residual graph of an optimum has no negative cycle).
  """
  n, num_classes = u.shape
  u = u - jnp.max(u, axis=1, keepdims=True)  # per-row shift: same optimum, smaller magnitude
  classes = jnp.arange(num_classes)
  rows = jnp.arange(n)
  inf = jnp.asarray(jnp.inf, u.dtype)

  def insert(i, labels):
    seg = jnp.where(labels >= 0, labels, num_classes)              # unplaced rows: dropped
    counts = jnp.sum(labels[:, None] == classes, axis=0).astype(u.dtype)
    own = jnp.take_along_axis(u, jnp.minimum(seg, num_classes - 1)[:, None], axis=1)
    move = own - u                                                 # [j, l]: j moves to l
    w = jax.ops.segment_min(move, seg, num_segments=num_classes)   # [k, l] cheapest k -> l move
    w = jnp.where(counts[:, None] > 0, w, inf)                     # empty class: no move
    hit = move == w[jnp.minimum(seg, num_classes - 1)]
    w_arg = jax.ops.segment_min(jnp.where(hit, rows[:, None], n), seg,
                                num_segments=num_classes)          # sample making that move

    def relax(_, carry):
      dist, pred = carry
      cand = dist[:, None] + w
      best, best_k = jnp.min(cand, axis=0), jnp.argmin(cand, axis=0)
      better = best < dist
      return jnp.where(better, best, dist), jnp.where(better, best_k, pred)

    dist, pred = jax.lax.fori_loop(0, num_classes - 1, relax,
                                   (-u[i], _minus_ones_like(u[i])))
    end = jnp.argmin(dist + penalty * counts)                      # cheapest free slot

    def backtrack(_, carry):
      labels, cur, done = carry
      k = pred[cur]
      root = k < 0
      j = jnp.where(root, i, w_arg[jnp.maximum(k, 0), cur])
      labels = jnp.where(done, labels, labels.at[j].set(cur.astype(jnp.int32)))
      return labels, jnp.where(root, cur, k), done | root

    done = _minus_ones_like(u[i, 0]) >= 0  # False
    labels, _, _ = jax.lax.fori_loop(0, num_classes, backtrack, (labels, end, done))
    return labels

  labels = jax.lax.fori_loop(0, n, insert, _minus_ones_like(u[:, 0]))
  # Guard (never hit in exact arithmetic): an unplaced sample takes its argmax.
  return jnp.where(labels < 0, jnp.argmax(u, axis=1).astype(jnp.int32), labels)


@functools.partial(jax.jit, static_argnames="solver")
def _assign_device(u: jax.Array, penalty: jax.Array, solver: str) -> jax.Array:
  """On-device path for u [..., n, S]. Problems with non-finite input or a negative penalty
  get all labels -1 (device code cannot raise; eager calls are validated before)."""
  del solver  # 'hungarian', the one on-device solver
  single = _ssp_single
  batch = jnp.broadcast_shapes(u.shape[:-2], penalty.shape)
  u = jnp.broadcast_to(u, batch + u.shape[-2:])
  penalty = jnp.broadcast_to(penalty, batch).astype(u.dtype)
  if u.size == 0:
    return jnp.zeros(u.shape[:-1], jnp.int32)
  flat_u = u.reshape((-1,) + u.shape[-2:])
  flat_p = penalty.reshape(-1)
  valid = jnp.all(jnp.isfinite(flat_u), axis=(-2, -1)) & jnp.isfinite(flat_p) & (flat_p >= 0)
  safe_u = jnp.where(valid[:, None, None], flat_u, 0)
  safe_p = jnp.where(valid, flat_p, 0)
  labels = jax.vmap(single)(safe_u, safe_p)
  labels = jnp.where(safe_p[:, None] == 0, jnp.argmax(safe_u, axis=-1).astype(jnp.int32), labels)
  labels = jnp.where(valid[:, None], labels, -1)
  return labels.reshape(u.shape[:-1])


# ------------------------------------------------------------------------------------------
# Public entry point.
# ------------------------------------------------------------------------------------------
def assign(log_likelihoods: ArrayLike, penalty: ArrayLike, *,
           solver: Solver = "scipy") -> Any:
  """Exact maximiser of Eq. 6's inner problem: sum_i u[i,d_i] - penalty * #same-class pairs.

  Args:
    log_likelihoods: u, float [..., n, S]: u[i, k] = log p(x_i | z_i, e_k) (Eq. 6's u_theta^(i));
      leading batch axes are independent problems.
    penalty: lambda' >= 0 *per unordered same-class pair* (the authors' code; the published
      lambda' values were run in this form; Eq. 6's ordered-pair sum is 2 * lambda' per pair, see
      the module docstring). Python float or array broadcastable to the batch axes ``[...]``.
    solver: ``'scipy'`` (host, float64; via ``jax.pure_callback`` on jax input),
      or ``'hungarian'`` (on device, class-graph successive shortest paths).

  Returns:
    int32 labels [..., n] in [0, S): numpy when ``log_likelihoods`` is numpy (and ``penalty`` is
    not traced), otherwise a jax array. penalty == 0 gives exactly the row-wise argmax (first
    index on ties). Ties between optimal labelings are broken arbitrarily (solver-dependent).

  Raises:
    ValueError: non-finite log-likelihoods or a negative / non-finite penalty, on numpy or concrete
      jax input. Inside ``jax.jit`` with ``solver='scipy'`` the host callback raises the same
      ValueError and JAX re-raises it (as a runtime error carrying the message). Inside jit with an
      on-device solver nothing can raise: such problems get all labels -1.
  """
  if solver not in SOLVERS:
    raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
  is_jax = isinstance(log_likelihoods, jax.Array) or isinstance(penalty, jax.core.Tracer)
  if not is_jax and solver == "scipy":
    return solve_host(log_likelihoods, penalty)

  u = jax.lax.stop_gradient(jnp.asarray(log_likelihoods))
  if not jnp.issubdtype(u.dtype, jnp.floating):
    u = u.astype(jnp.float32)
  _check_shape(u.shape)
  if isinstance(penalty, jax.Array):  # traced or on device: an operand
    lam = jax.lax.stop_gradient(jnp.asarray(penalty, u.dtype))
    host_lam = None if isinstance(lam, jax.core.Tracer) else np.asarray(lam)
  else:  # Python / numpy: kept in float64 and bound into the callback
    host_lam = lam = np.asarray(penalty, np.float64)
    _check_inputs(np.zeros((1, 1)), lam)  # a bad penalty raises at trace time
  if host_lam is not None and not isinstance(u, jax.core.Tracer):
    _check_inputs(np.asarray(u), host_lam)  # eager call: a plain ValueError
  batch = jnp.broadcast_shapes(u.shape[:-2], np.shape(lam))
  out_shape = jax.ShapeDtypeStruct(batch + u.shape[-2:-1], jnp.int32)
  if solver == "scipy" and isinstance(lam, jax.Array):
    labels = jax.pure_callback(solve_host, out_shape, u, jnp.broadcast_to(lam, batch),
                               vmap_method="expand_dims")
  elif solver == "scipy":
    labels = jax.pure_callback(functools.partial(solve_host, penalty=lam), out_shape, u,
                               vmap_method="expand_dims")
  else:
    labels = _assign_device(u, jnp.asarray(lam, u.dtype), solver)
  return labels if is_jax else np.asarray(labels)


class Solve(NamedTuple):
  """How a step's codes are solved: :func:`assign` with ``penalty`` and ``solver``, over the
  global batch or per shard of ``mesh`` (``scope``, `disentangle.sharding.local_or_global`).

  ``Solve(...)(u)`` is the solve inside a program; :attr:`on_host` says whether it is one
  host problem per run (the ``'scipy'`` solver over the global batch, or on one device), which a
  program of several runs solves in one callback and the overlapped placement outside the
  program (`disentangle.train.codes`).
  """
  penalty: ArrayLike
  solver: Solver = "scipy"
  scope: str = "global"
  mesh: Any = None

  def __call__(self, u: jax.Array) -> jax.Array:
    solve = lambda v: assign(v, self.penalty, solver=self.solver)
    return sharding.local_or_global(solve, self.mesh, self.scope)(u)

  @property
  def on_host(self) -> bool:
    return self.solver == "scipy" and not (self.scope == "local"
                                           and sharding.is_sharded(self.mesh))


def stacked_penalties(penalties: Sequence[ArrayLike], dtype) -> Any:
  """Several problems' penalties as one callback receives them: Python floats in float64
  (numpy), any array (traced, on the device, or numpy) making all of them an array of
  ``dtype``, as :func:`assign` passes an array penalty in the dtype of u."""
  if any(isinstance(p, jax.Array) for p in penalties):
    return jnp.stack([jnp.asarray(p, dtype) for p in penalties])
  if any(isinstance(p, (np.ndarray, np.generic)) for p in penalties):
    return np.asarray([np.asarray(p, dtype) for p in penalties])
  return np.asarray(penalties, np.float64)
