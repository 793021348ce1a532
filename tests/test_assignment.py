"""Tests of `disentangle.assignment` (CascadeVAE Eq. 6's exact discrete inference).

References are independent of the solvers: brute force over all S^n labelings, a dynamic
programme over class counts (the penalty only depends on the counts), a sort-based solution for
S = 2 and a pair-by-pair loop for the objective.
"""
import functools
import itertools

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
import numpy as np
import pytest

from disentangle import assignment

DEVICE_SOLVERS = ("hungarian",)
PENALTIES = (0.0, 0.05, 0.5, 5.0, 1e3)


def _sample(dist: str, rng: np.random.Generator, shape) -> np.ndarray:
  """Random log-likelihood tables of several kinds (returned as float32-representable float64)."""
  if dist == "normal":
    u = rng.normal(size=shape)
  elif dist == "ties":  # few distinct values: many tied labelings
    u = rng.integers(0, 3, size=shape).astype(np.float64)
  elif dist == "loglik":  # Bernoulli-like: large magnitude, small differences between classes
    u = -600.0 - 50.0 * rng.random(shape[:-1] + (1,)) + 2.0 * rng.normal(size=shape)
  elif dist == "heavy":
    u = rng.standard_cauchy(size=shape)
  elif dist == "dominant":  # one class preferred by every sample: penalty decides the split
    u = rng.normal(size=shape)
    u[..., 0] += 4.0
  else:
    raise ValueError(dist)
  return u.astype(np.float32).astype(np.float64)


DISTS = ("normal", "ties", "loglik", "heavy", "dominant")


def _brute_force(u: np.ndarray, penalty: float) -> float:
  """max over all S^n labelings of sum_i u[i,d_i] - penalty * #same-class unordered pairs."""
  n, num_classes = u.shape
  labels = np.array(list(itertools.product(range(num_classes), repeat=n)), np.int64)
  unary = u[np.arange(n), labels].sum(axis=1)
  same = labels[:, :, None] == labels[:, None, :]
  pairs = np.triu(same, k=1).sum(axis=(1, 2))
  return float(np.max(unary - penalty * pairs))


def _count_dp(u: np.ndarray, penalty: float) -> float:
  """Exact optimum by a DP over the counts of classes 0..S-2 (class S-1 takes the rest).

  best[i][c] = max over labelings of the first i samples with counts c of sum u[j, d_j];
  the penalty depends on the final counts only.
  """
  n, num_classes = u.shape
  dims = num_classes - 1
  best = np.full((n + 1,) * dims, -np.inf)
  best[(0,) * dims] = 0.0
  for i in range(n):
    new = best + u[i, -1]
    for k in range(dims):
      dst = [slice(None)] * dims
      src = [slice(None)] * dims
      dst[k], src[k] = slice(1, None), slice(None, -1)
      new[tuple(dst)] = np.maximum(new[tuple(dst)], best[tuple(src)] + u[i, k])
    best = new
  counts = np.indices(best.shape)
  last = n - counts.sum(axis=0)
  pairs = (counts * (counts - 1) / 2).sum(axis=0) + last * (last - 1) / 2
  value = np.where(last >= 0, best - penalty * pairs, -np.inf)
  return float(value.max())


def _sort_two_classes(u: np.ndarray, penalty: float) -> float:
  """S = 2: for c samples in class 0 the best are the c largest u[:,0] - u[:,1]."""
  n = u.shape[0]
  gain = np.sort(u[:, 0] - u[:, 1])[::-1]
  c = np.arange(n + 1)
  unary = u[:, 1].sum() + np.concatenate([[0.0], np.cumsum(gain)])
  return float(np.max(unary - penalty * (c * (c - 1) / 2 + (n - c) * (n - c - 1) / 2)))


def _objective_by_pairs(u, labels, penalty) -> float:
  total = sum(u[i, labels[i]] for i in range(len(labels)))
  pairs = sum(labels[i] == labels[j] for i in range(len(labels)) for j in range(i + 1, len(labels)))
  return float(total - penalty * pairs)


def _close(value, reference, rtol):
  return abs(value - reference) <= rtol * max(1.0, abs(reference))


# ------------------------------------------------------------------------------------------
def test_objective_matches_pair_loop():
  rng = np.random.default_rng(0)
  u = rng.normal(size=(9, 4))
  labels = rng.integers(0, 4, size=9)
  ref = _objective_by_pairs(u, labels, 0.7)
  assert assignment.assignment_objective(u, labels, 0.7) == pytest.approx(ref, abs=1e-12)
  got = jax.jit(assignment.assignment_objective)(u.astype(np.float32), labels, 0.7)
  assert float(got) == pytest.approx(ref, rel=1e-5)


@pytest.mark.parametrize("num_classes", [2, 3])
def test_scipy_matches_brute_force(num_classes):
  rng = np.random.default_rng(num_classes)
  for n in range(1, 8):
    for dist in DISTS:
      u = _sample(dist, rng, (n, num_classes))
      for penalty in PENALTIES:
        labels = assignment.assign(u, penalty)
        assert isinstance(labels, np.ndarray) and labels.dtype == np.int32
        assert labels.shape == (n,) and labels.min() >= 0 and labels.max() < num_classes
        got = assignment.assignment_objective(u, labels, penalty)
        ref = _brute_force(u, penalty)
        assert _close(got, ref, 1e-12), (n, dist, penalty, got, ref)


@pytest.mark.parametrize("solver", DEVICE_SOLVERS)
@pytest.mark.parametrize("n,num_classes", [(7, 2), (6, 3)])
def test_device_solvers_match_brute_force(solver, n, num_classes):
  rng = np.random.default_rng(10 * n + num_classes)
  u, lam = [], []
  for dist in DISTS:
    for penalty in PENALTIES:
      for _ in range(2):
        u.append(_sample(dist, rng, (n, num_classes)))
        lam.append(penalty)
  u, lam = np.stack(u), np.array(lam)
  solve = jax.jit(functools.partial(assignment.assign, solver=solver))
  labels = np.asarray(solve(u.astype(np.float32), lam.astype(np.float32)))
  assert labels.shape == (len(lam), n) and labels.min() >= 0 and labels.max() < num_classes
  for b in range(len(lam)):
    got = assignment.assignment_objective(u[b], labels[b], lam[b])
    ref = _brute_force(u[b], lam[b])
    assert _close(got, ref, 1e-6), (b, lam[b], got, ref)


@pytest.mark.parametrize("n,num_classes", [(64, 2), (64, 3), (32, 4)])
def test_against_count_dp(n, num_classes):
  rng = np.random.default_rng(64 + num_classes)
  cases = [(dist, penalty) for dist in ("normal", "ties", "loglik", "dominant")
           for penalty in (0.0, 0.01, 0.3, 3.0, 100.0)]
  u = np.stack([_sample(dist, rng, (n, num_classes)) for dist, _ in cases])
  lam = np.array([p for _, p in cases])
  solve = jax.jit(functools.partial(assignment.assign, solver="hungarian"))
  device_labels = np.asarray(solve(u.astype(np.float32), lam.astype(np.float32)))
  truncated = 0
  for b in range(len(cases)):
    ref = _count_dp(u[b], lam[b])
    if num_classes == 2:
      assert _close(_sort_two_classes(u[b], lam[b]), ref, 1e-12)
    truncated += assignment.slots_per_class(u[b], lam[b]) < n
    got = assignment.assignment_objective(u[b], assignment.assign(u[b], lam[b]), lam[b])
    assert _close(got, ref, 1e-12), (cases[b], got, ref)
    got = assignment.assignment_objective(u[b], device_labels[b], lam[b])
    assert _close(got, ref, 1e-6), (cases[b], got, ref)
  assert truncated > 0  # the slot truncation was exercised (and stayed exact)


def test_hungarian_n64_against_count_dp():
  rng = np.random.default_rng(7)
  u = np.stack([_sample(d, rng, (64, 3)) for d in ("normal", "loglik", "dominant")])
  lam = np.array([0.3, 3.0, 1.0])
  labels = np.asarray(jax.jit(functools.partial(assignment.assign, solver="hungarian"))(
      u.astype(np.float32), lam.astype(np.float32)))
  for b in range(3):
    got = assignment.assignment_objective(u[b], labels[b], lam[b])
    assert _close(got, _count_dp(u[b], lam[b]), 1e-6)


def test_removed_optax_solver_is_refused():
  with pytest.raises(ValueError, match="solver must be one of"):
    assignment.assign(np.zeros((4, 2)), 0.1, solver="optax")


def test_large_penalty_balances_counts():
  rng = np.random.default_rng(3)
  u = _sample("dominant", rng, (50, 3))
  for solver in ("scipy", "hungarian"):
    counts = np.bincount(np.asarray(assignment.assign(u, 1e4, solver=solver)), minlength=3)
    assert counts.max() - counts.min() <= 1, (solver, counts)


@pytest.mark.parametrize("solver", ("scipy",) + DEVICE_SOLVERS)
def test_zero_penalty_is_argmax(solver):
  rng = np.random.default_rng(5)
  u = _sample("ties", rng, (3, 10, 3)).astype(np.float32)  # ties: argmax = first maximum
  expected = np.argmax(u, axis=-1)
  np.testing.assert_array_equal(assignment.assign(u, 0.0, solver=solver), expected)
  jitted = jax.jit(lambda v, lam: assignment.assign(v, lam, solver=solver))
  np.testing.assert_array_equal(np.asarray(jitted(u, 0.0)), expected)


def test_jit_matches_numpy_and_batch_dims():
  rng = np.random.default_rng(11)
  u = _sample("normal", rng, (2, 3, 16, 3)).astype(np.float32)
  lam = np.array([[0.3], [2.0]], np.float32)  # broadcast over the batch axes [2, 3]
  host = assignment.assign(u, lam)
  assert host.shape == (2, 3, 16)
  for b, c in itertools.product(range(2), range(3)):
    np.testing.assert_array_equal(host[b, c], assignment.assign(u[b, c], float(lam[b, 0])))
  jitted = jax.jit(assignment.assign)(u, lam)
  np.testing.assert_array_equal(np.asarray(jitted), host)
  device = np.asarray(jax.jit(functools.partial(assignment.assign, solver="hungarian"))(
      u, lam))
  obj_host = assignment.assignment_objective(u, host, lam)
  obj_device = assignment.assignment_objective(u, device, lam)
  np.testing.assert_allclose(obj_device, obj_host, rtol=1e-6)


def test_vmap_host_receives_whole_batch():
  rng = np.random.default_rng(12)
  u = _sample("normal", rng, (5, 12, 3)).astype(np.float32)
  expected = np.stack([assignment.assign(x, 0.5) for x in u])
  calls = []

  def recording(u_, penalty):
    calls.append((u_.shape, np.shape(penalty)))
    return assignment.assign_host(u_, penalty)

  # vmap over u (penalty fixed), e.g. a multi-seed training step.
  with assignment.host_solver(recording):
    got = jax.block_until_ready(
        jax.jit(jax.vmap(lambda x: assignment.assign(x, 0.5)))(u))
  np.testing.assert_array_equal(np.asarray(got), expected)
  assert calls == [((5, 12, 3), ())]  # one host call, the host loops over the batch
  # vmap over the penalty as well, and nested vmap.
  lam = np.array([0.0, 0.1, 1.0, 10.0, 100.0], np.float32)
  got = jax.vmap(assignment.assign)(u, lam)
  expected = np.stack([assignment.assign(x, float(p)) for x, p in zip(u, lam)])
  np.testing.assert_array_equal(np.asarray(got), expected)
  got = jax.vmap(jax.vmap(assignment.assign, in_axes=(None, 0)), in_axes=(0, None))(
      u, lam)
  expected = np.stack([[assignment.assign(x, float(p)) for p in lam] for x in u])
  np.testing.assert_array_equal(np.asarray(got), expected)


def test_stacked_problems_solve_in_one_host_call_as_each_alone():
  """Separate problems (the runs of one program) stacked into one callback with
  ``stacked_penalties`` get the labels each own call gives it: Python-float penalties (float64),
  traced ones, and numpy ones standing for the traced (the host's overlapped solve)."""
  rng = np.random.default_rng(14)
  us = [_sample(d, rng, (12, 3)).astype(np.float32) for d in ("normal", "ties", "normal")]
  floats = [0.0, 1e-3, 0.7]
  calls = []

  def recording(u_, penalty):
    calls.append(np.shape(u_))
    return assignment.assign_host(u_, penalty)

  def stacked(*u):
    return assignment.assign(jnp.stack(u), assignment.stacked_penalties(floats, jnp.float32))

  alone = [jax.jit(lambda x, p=p: assignment.assign(x, p))(u) for u, p in zip(us, floats)]
  with assignment.host_solver(recording):
    got = jax.block_until_ready(jax.jit(stacked)(*us))
  assert calls == [(3, 12, 3)]
  np.testing.assert_array_equal(np.asarray(got), np.stack(alone))
  lam = np.asarray(floats, np.float32)
  alone = np.stack([jax.jit(assignment.assign)(u, lam[i]) for i, u in enumerate(us)])
  got = jax.jit(lambda u, p: assignment.assign(u, assignment.stacked_penalties(
      list(p), u.dtype)))(np.stack(us), lam)
  np.testing.assert_array_equal(np.asarray(got), alone)
  on_host = assignment.stacked_penalties(list(lam), np.float32)
  assert on_host.dtype == np.float32
  np.testing.assert_array_equal(assignment.solve_host(np.stack(us), on_host), alone)
  assert assignment.stacked_penalties(floats, np.float32).dtype == np.float64


def _class_two(u, penalty):
  """A stand-in host solver: class 2 for every sample."""
  del penalty
  return np.full(np.shape(u)[:-1], 2, np.int32)


def test_host_solver_replaces_every_host_solve_while_active():
  """Inside ``host_solver(fn)`` the callback of a program compiled before the context, of one
  compiled inside it, ``assign`` on numpy input and ``solve_host`` all call ``fn``; after it
  the same compiled programs call the real solver again."""
  rng = np.random.default_rng(15)
  u = _sample("normal", rng, (2, 12, 3)).astype(np.float32)
  real = assignment.assign_host(u, 0.5)
  stand_in = np.full((2, 12), 2)
  assert np.any(real != stand_in)
  before = jax.jit(lambda v: assignment.assign(v, 0.5))  # a Python-float penalty
  traced = jax.jit(assignment.assign)  # a traced penalty
  np.testing.assert_array_equal(np.asarray(before(u)), real)  # compiled here
  calls = []

  def recording(u_, penalty):
    calls.append(np.shape(u_))
    return _class_two(u_, penalty)

  with assignment.host_solver(recording) as replaced:
    assert replaced is assignment.assign_host
    inside = jax.jit(lambda v: assignment.assign(v, 0.5))
    outs = [before(u), inside(u), traced(u, 0.5),
            assignment.assign(u, 0.5), assignment.solve_host(u, 0.5)]
    for got in outs:
      np.testing.assert_array_equal(np.asarray(got), stand_in)
  assert calls == [(2, 12, 3)] * 5
  outs = [before(u), inside(u), traced(u, 0.5),
          assignment.assign(u, 0.5), assignment.solve_host(u, 0.5)]
  for got in outs:
    np.testing.assert_array_equal(np.asarray(got), real)
  assert len(calls) == 5


def test_host_solver_restores_the_solver_on_an_exception():
  rng = np.random.default_rng(16)
  u = _sample("normal", rng, (12, 3)).astype(np.float32)
  real = assignment.assign_host(u, 0.5)
  solve = jax.jit(lambda v: assignment.assign(v, 0.5))

  def failing(u_, penalty):
    raise ValueError("the stand-in failed")

  with pytest.raises(Exception, match="the stand-in failed"):  # JAX re-raises the callback's
    with assignment.host_solver(failing):
      jax.block_until_ready(solve(u))
  np.testing.assert_array_equal(np.asarray(solve(u)), real)
  with pytest.raises(KeyError):
    with assignment.host_solver(_class_two):
      raise KeyError("in the body")
  np.testing.assert_array_equal(np.asarray(solve(u)), real)
  np.testing.assert_array_equal(assignment.assign(u, 0.5), real)


def test_host_solver_contexts_nest_and_wrap_the_solver_they_replace():
  rng = np.random.default_rng(17)
  u = _sample("normal", rng, (12, 3))
  real = assignment.assign_host(u, 0.5)
  seen, wrapped = [], {}

  def outer(u_, penalty):
    seen.append("outer")
    return assignment.assign_host(u_, penalty)

  def inner(u_, penalty):
    seen.append("inner")
    return wrapped["solver"](u_, penalty)

  with assignment.host_solver(outer) as first:
    with assignment.host_solver(inner) as second:
      wrapped["solver"] = second
      assert first is assignment.assign_host and second is outer
      np.testing.assert_array_equal(assignment.assign(u, 0.5), real)
    assert seen == ["inner", "outer"]
    np.testing.assert_array_equal(assignment.assign(u, 0.5), real)
    assert seen == ["inner", "outer", "outer"]
  np.testing.assert_array_equal(assignment.assign(u, 0.5), real)
  assert seen == ["inner", "outer", "outer"]


def test_threaded_host_batch_is_optimal_for_every_problem(monkeypatch):
  """The host solves a batch of problems (the runs of a program) in threads; each label set is
  optimal for its own problem (brute force), with its own penalty, for every distribution."""
  monkeypatch.setattr(assignment, "HOST_THREADS", 4)
  rng = np.random.default_rng(11)
  u = np.stack([_sample(d, rng, (6, 3)) for d in DISTS for _ in range(2)])
  penalty = np.linspace(0.0, 3.0, len(u))
  labels = assignment.assign(u, penalty)
  for b in range(len(u)):
    assert assignment.assignment_objective(u[b], labels[b], penalty[b]) == pytest.approx(
        _brute_force(u[b], penalty[b]), abs=1e-9)


def test_vmap_device_solver():
  rng = np.random.default_rng(13)
  u = _sample("normal", rng, (4, 12, 3)).astype(np.float32)
  got = np.asarray(jax.jit(jax.vmap(
      lambda x: assignment.assign(x, 0.5, solver="hungarian")))(u))
  for b in range(4):
    np.testing.assert_allclose(assignment.assignment_objective(u[b], got[b], 0.5),
                               _count_dp(u[b].astype(np.float64), 0.5), rtol=1e-6)


@pytest.mark.parametrize("solver", ["scipy", "hungarian"])
def test_shard_map_solves_each_shard(solver):
  if jax.device_count() < 8:
    pytest.skip("needs 8 devices (tests/conftest.py forces 8 CPU devices)")
  mesh = jax.make_mesh((8,), ("batch",))
  rng = np.random.default_rng(14)
  u = _sample("normal", rng, (8 * 10, 3)).astype(np.float32)
  f = jax.jit(jax.shard_map(lambda x: assignment.assign(x, 0.4, solver=solver), mesh=mesh,
                            in_specs=P("batch"), out_specs=P("batch")))
  sharded = jax.device_put(u, jax.sharding.NamedSharding(mesh, P("batch")))
  got = np.asarray(f(sharded)).reshape(8, 10)
  for shard in range(8):
    local32 = u[10 * shard:10 * (shard + 1)]
    local = local32.astype(np.float64)
    np.testing.assert_allclose(assignment.assignment_objective(local, got[shard], 0.4),
                               _count_dp(local, 0.4), rtol=1e-6)
    if solver == "scipy":
      np.testing.assert_array_equal(got[shard], assignment.assign(local32, 0.4))


def test_non_finite_numpy_raises():
  u = np.zeros((6, 3))
  u[1, 2], u[4, 0] = np.nan, -np.inf
  with pytest.raises(ValueError, match=r"log_likelihoods contains NaN/Inf at rows \[1, 4\]"):
    assignment.assign(u, 0.1)
  with pytest.raises(ValueError, match=r"NaN/Inf at rows \[\(1, 2\)\]"):
    batched = np.zeros((2, 4, 3))
    batched[1, 2, 0] = np.inf
    assignment.assign(batched, 0.1)
  with pytest.raises(ValueError, match="penalty must be finite and >= 0"):
    assignment.assign(np.zeros((4, 3)), -1.0)
  with pytest.raises(ValueError, match="penalty must be finite and >= 0"):  # at trace time
    jax.jit(lambda x: assignment.assign(x, float("nan")))(jnp.zeros((4, 3)))
  with pytest.raises(ValueError, match="NaN/Inf at rows"):  # eager jax input, any solver
    assignment.assign(jnp.asarray(u, jnp.float32), 0.1, solver="hungarian")


def test_non_finite_inside_jit():
  u = np.zeros((6, 3), np.float32)
  u[3, 1] = np.nan
  f = jax.jit(lambda x: assignment.assign(x, 0.1))
  with pytest.raises(Exception, match=r"log_likelihoods contains NaN/Inf at rows \[3\]"):
    jax.block_until_ready(f(u))
  traced_penalty = jax.jit(assignment.assign)
  with pytest.raises(Exception, match="penalty must be finite and >= 0"):
    jax.block_until_ready(traced_penalty(jnp.zeros((4, 3)), jnp.float32(-1.0)))
  g = jax.jit(lambda x: assignment.assign(x, 0.1, solver="hungarian"))
  out = np.asarray(g(np.stack([u, np.zeros_like(u)])))
  np.testing.assert_array_equal(out[0], -1)  # device code cannot raise: a -1 sentinel
  assert out[1].min() >= 0


@pytest.mark.parametrize("solver", ["scipy", "hungarian"])
def test_no_gradient_through_labels(solver):
  rng = np.random.default_rng(15)
  n, num_classes = 12, 3
  u = jax.device_put(_sample("normal", rng, (n, num_classes)).astype(np.float32))  # eager input

  def picked(v):
    return v[jnp.arange(n), assignment.assign(v, 0.5, solver=solver)].sum()

  labels = np.asarray(assignment.assign(u, 0.5, solver=solver))
  assert len(np.unique(labels)) > 1  # the one-hot below is not a constant column
  expected = np.eye(num_classes, dtype=np.float32)[labels]
  np.testing.assert_array_equal(np.asarray(jax.jit(jax.grad(picked))(u)), expected)
  np.testing.assert_array_equal(np.asarray(jax.grad(picked)(u)), expected)
