"""Loss terms against Monte-Carlo estimates and direct formulas."""
import jax
import jax.numpy as jnp
import numpy as np

from disentangle import losses


def test_gaussian_kl_matches_monte_carlo():
  rng = np.random.default_rng(0)
  mean = rng.normal(size=5).astype(np.float32) * 1.5
  logvar = rng.normal(size=5).astype(np.float32)
  kl = np.asarray(losses.gaussian_kl_per_dim(jnp.asarray(mean), jnp.asarray(logvar)))
  # E_q[log q(z) - log p(z)] per dimension, 400k samples.
  z = mean + np.exp(0.5 * logvar) * rng.normal(size=(400_000, 5))
  log_q = -0.5 * (np.log(2 * np.pi) + logvar + (z - mean) ** 2 / np.exp(logvar))
  log_p = -0.5 * (np.log(2 * np.pi) + z ** 2)
  mc = np.mean(log_q - log_p, axis=0)
  np.testing.assert_allclose(kl, mc, atol=0.02, rtol=0.02)
  assert np.all(kl >= 0)


def test_gaussian_kl_zero_at_prior():
  kl = losses.gaussian_kl_per_dim(jnp.zeros(3), jnp.zeros(3))
  np.testing.assert_allclose(np.asarray(kl), 0.0, atol=1e-7)


def test_bernoulli_log_likelihood_direct_formula():
  rng = np.random.default_rng(1)
  logits = rng.normal(size=(4, 8, 8, 1)).astype(np.float32) * 3
  x = rng.uniform(size=(4, 8, 8, 1)).astype(np.float32)  # non-binary targets too
  p = 1 / (1 + np.exp(-logits.astype(np.float64)))
  direct = np.sum(x * np.log(p) + (1 - x) * np.log(1 - p), axis=(1, 2, 3))
  got = np.asarray(losses.bernoulli_log_likelihood(jnp.asarray(logits), jnp.asarray(x)))
  np.testing.assert_allclose(got, direct, rtol=1e-5)


def test_bernoulli_log_likelihood_stable_for_large_logits():
  logits = jnp.array([[[[80.0]], [[-80.0]]]])  # [1, 2, 1, 1]
  x = jnp.array([[[[1.0]], [[0.0]]]])
  val = losses.bernoulli_log_likelihood(logits, x)
  assert np.isfinite(np.asarray(val)).all()
  np.testing.assert_allclose(np.asarray(val), 0.0, atol=1e-6)


def test_l2_penalty_only_counts_kernels():
  params = {"dense": {"kernel": jnp.ones((2, 3)), "bias": jnp.ones(3) * 10}}
  np.testing.assert_allclose(float(losses.l2_kernel_penalty(params, 0.1)), 0.1 * 6 / 2)


def test_reparameterize_statistics():
  z = losses.reparameterize(jax.random.PRNGKey(0), jnp.full((200_000,), 2.0),
                            jnp.full((200_000,), np.log(0.25)))
  assert abs(float(z.mean()) - 2.0) < 0.01
  assert abs(float(z.std()) - 0.5) < 0.01


def test_l1_log_likelihood_and_the_dispatch():
  rng = np.random.default_rng(2)
  logits = rng.normal(size=(3, 4, 4, 3)).astype(np.float32) * 2
  x = rng.random((3, 4, 4, 3)).astype(np.float32)
  means = 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))
  direct = -np.abs(x - means).reshape(3, -1).sum(1)
  np.testing.assert_allclose(np.asarray(losses.l1_log_likelihood(jnp.asarray(logits), x)), direct,
                             rtol=1e-5)
  np.testing.assert_allclose(np.asarray(losses.log_likelihood(logits, x, "l1")), direct, rtol=1e-5)
  np.testing.assert_array_equal(np.asarray(losses.log_likelihood(logits, x, "bernoulli")),
                                np.asarray(losses.bernoulli_log_likelihood(logits, x)))
