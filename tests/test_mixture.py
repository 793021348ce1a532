"""PartedVAE's mixture-prior terms against numerical integration and direct float64 numpy."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate

from disentangle import mixture

SIZES = (4, 3, 2)  # K = 3 variables of sizes L_i

# Each term compiled as the training step compiles it: one program per call's shapes, not one per
# operation.
_bc = jax.jit(mixture.bhattacharyya_coefficient)
_aggregate_log_posterior = jax.jit(mixture.aggregate_log_posterior)
_aggregate_categorical_kl = jax.jit(mixture.aggregate_categorical_kl)
_categorical_entropy = jax.jit(mixture.categorical_entropy)
_expected_gaussian_kl = jax.jit(mixture.expected_gaussian_kl)


def _pdf(x, mean, var):
  return np.exp(-0.5 * (x - mean) ** 2 / var) / np.sqrt(2 * np.pi * var)


@pytest.mark.parametrize("m1,v1,m2,v2", [(0.0, 1.0, 1.5, 1.0), (-0.3, 0.2, 0.8, 2.5),
                                         (2.0, 0.05, 2.1, 0.3)])
def test_bc_1d_equals_numerical_integral_of_sqrt_p1_p2(m1, v1, m2, v2):
  want, _ = integrate.quad(lambda x: np.sqrt(_pdf(x, m1, v1) * _pdf(x, m2, v2)), -30, 30,
                           epsabs=1e-12, limit=400)
  got = _bc(np.float32([m1]), np.log(np.float32([v1])), np.float32([m2]),
            np.log(np.float32([v2])))
  np.testing.assert_allclose(float(got), want, rtol=1e-4)


def test_bc_2d_with_different_variances_equals_grid_integral():
  m1, v1 = np.array([0.2, -0.5]), np.array([0.4, 1.7])
  m2, v2 = np.array([1.0, 0.3]), np.array([1.1, 0.3])
  grid = np.linspace(-12, 12, 2401)
  x, y = np.meshgrid(grid, grid, indexing="ij")
  p1 = _pdf(x, m1[0], v1[0]) * _pdf(y, m1[1], v1[1])
  p2 = _pdf(x, m2[0], v2[0]) * _pdf(y, m2[1], v2[1])
  want = integrate.simpson(integrate.simpson(np.sqrt(p1 * p2), x=grid, axis=1), x=grid)
  got = _bc(np.float32(m1), np.log(np.float32(v1)), np.float32(m2), np.log(np.float32(v2)))
  np.testing.assert_allclose(float(got), want, rtol=1e-4)


def test_bc_is_one_for_equal_gaussians_and_symmetric():
  rng = np.random.default_rng(0)
  m, lv, m2, lv2 = rng.normal(size=(4, 3)).astype(np.float32)
  np.testing.assert_allclose(float(_bc(m, lv, m, lv)), 1.0, rtol=1e-6)
  np.testing.assert_allclose(float(_bc(m, lv, m2, lv2)), float(_bc(m2, lv2, m, lv)), rtol=1e-6)
  assert 0 < float(_bc(m, lv, m2, lv2)) < 1


def _hand_penalty(means, logvars, delta):
  """Pairs k < l counted by hand with the 1-D closed form per dimension (independent path)."""
  total = 0.0
  for k in range(len(means)):
    for l in range(k + 1, len(means)):
      vk, vl = np.exp(logvars[k]), np.exp(logvars[l])
      vbar = (vk + vl) / 2
      db = np.sum((means[k] - means[l]) ** 2 / vbar) / 8 + 0.5 * np.sum(
          np.log(vbar / np.sqrt(vk * vl)))
      total += max(np.exp(-db) - delta, 0.0)
  return total


@pytest.mark.slow
def test_penalty_sums_pairs_inside_each_variable_and_the_printed_form_adds_a_constant():
  rng = np.random.default_rng(1)
  delta, gamma = 0.15, 30.0
  variables = [(rng.normal(size=(L, 2)) * 0.7, rng.normal(size=(L, 2)) * 0.5) for L in (3, 2)]
  want = sum(_hand_penalty(m, lv, delta) for m, lv in variables)
  got = sum(float(mixture.bhattacharyya_penalty(jnp.asarray(m), jnp.asarray(lv), delta))
            for m, lv in variables)
  np.testing.assert_allclose(got, want, rtol=1e-5)

  def total(params, include_diagonal):
    return gamma * sum(mixture.bhattacharyya_penalty(m, lv, delta,
                                                     include_diagonal=include_diagonal)
                       for m, lv in params)

  params = [(jnp.asarray(m), jnp.asarray(lv)) for m, lv in variables]
  value = jax.jit(total, static_argnums=1)
  ours, printed = value(params, False), value(params, True)
  np.testing.assert_allclose(float(printed - ours), gamma * (3 + 2) * (1 - delta), rtol=1e-5)
  grad = jax.jit(jax.grad(total), static_argnums=1)
  g1, g2 = grad(params, False), grad(params, True)
  for a, b in zip(jax.tree_util.tree_leaves(g1), jax.tree_util.tree_leaves(g2)):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
  assert any(np.abs(np.asarray(a)).max() > 0 for a in jax.tree_util.tree_leaves(g1))


def _softmax64(l):
  e = np.exp(l - l.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("size", SIZES)
def test_aggregate_posterior_kl_and_entropy_equal_direct_numpy(size):
  rng = np.random.default_rng(size)
  logits = rng.normal(size=(7, size)) * 2
  prior = rng.dirichlet(np.ones(size))
  q = _softmax64(logits)
  qhat = q.mean(0)
  logits32, prior32 = logits.astype(np.float32), prior.astype(np.float32)
  np.testing.assert_allclose(np.exp(np.asarray(_aggregate_log_posterior(logits32))), qhat,
                             rtol=1e-5)
  np.testing.assert_allclose(float(_aggregate_categorical_kl(logits32, prior32)),
                             np.sum(qhat * np.log(qhat / prior)), rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(float(_categorical_entropy(logits32)),
                             np.mean(-np.sum(q * np.log(q), -1)), rtol=1e-5)


@pytest.mark.parametrize("size", SIZES)
def test_expected_mixture_kl_equals_direct_numpy(size):
  rng = np.random.default_rng(10 + size)
  b, d = 5, 3
  q_c = _softmax64(rng.normal(size=(b, size)))
  mq, lq = rng.normal(size=(b, size, d)), rng.normal(size=(b, size, d)) * 0.5
  mp, lp = rng.normal(size=(size, d)), rng.normal(size=(size, d)) * 0.5
  want = 0.0
  for i in range(b):
    for k in range(size):
      kl = 0.5 * np.sum(lp[k] - lq[i, k] + (np.exp(lq[i, k]) + (mq[i, k] - mp[k]) ** 2)
                        / np.exp(lp[k]) - 1)
      want += q_c[i, k] * kl / b
  f32 = lambda a: np.asarray(a, np.float32)
  got = _expected_gaussian_kl(f32(q_c), f32(mq), f32(lq), f32(mp), f32(lp))
  np.testing.assert_allclose(float(got), want, rtol=1e-5)
  # The 'sampled' form ([B, d]: one posterior for every k) equals the expected form whose
  # per-class posteriors are all that one posterior.
  same = _expected_gaussian_kl(f32(q_c), f32(mq[:, 0]), f32(lq[:, 0]), f32(mp), f32(lp))
  tiled = _expected_gaussian_kl(f32(q_c), f32(np.repeat(mq[:, :1], size, 1)),
                                f32(np.repeat(lq[:, :1], size, 1)), f32(mp), f32(lp))
  np.testing.assert_allclose(float(same), float(tiled), rtol=1e-6)


def test_gaussian_kl_against_standard_normal_is_the_shared_kl():
  from disentangle import losses
  rng = np.random.default_rng(3)
  m, lv = jnp.asarray(rng.normal(size=6)), jnp.asarray(rng.normal(size=6))
  np.testing.assert_allclose(np.asarray(mixture.gaussian_kl(m, lv, 0.0, 0.0)),
                             np.asarray(losses.gaussian_kl_per_dim(m, lv)), rtol=1e-6)
