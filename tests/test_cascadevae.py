"""CascadeVAE step: the d fed to the decoder is the exact assignment of the unary at the same eps."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disentangle import assignment
from disentangle import losses
from disentangle import methods
from tests import helpers


@functools.cache
def _initial_state():
  """The tiny network's initial state, initialised as one compiled program, once: every config
  of these tests has the same network."""
  method = methods.build(helpers.tiny_config("cascadevae"), helpers.TinyImages().image_shape)
  return jax.jit(method.init)(jax.random.PRNGKey(0))


def _setup(**kw):
  config = helpers.tiny_config("cascadevae", **kw)
  data = helpers.TinyImages()
  method = methods.build(config, data.image_shape)
  batch = {"image": data.get_images(np.arange(16))}
  return config, method, _initial_state(), batch


def _discrete_phase(config, method, state, batch):
  """The method in its discrete phase, the state at t = t_d + 1, the step's (rng, t), its costs
  and codes as the trainer's step computes them (`train.codes.step`)."""
  on = method.for_phase(True)
  state = state.replace(step=jnp.asarray(config.cascade.discrete_start, jnp.int32))
  costs = jax.jit(on.code_costs)(state, batch)
  return on, state, on.step_key(state), costs, on.code_solve(costs.u)


@pytest.mark.slow
def test_decoder_sees_assignment_of_unary_at_same_eps():
  config, method, state, batch = _setup(**{"cascade.penalty": 2.0})
  on, state, (rng, t), costs, d = _discrete_phase(config, method, state, batch)
  vae = state.params["vae"]
  loss, metrics, d_used = on.terms(vae, batch, rng, t, given=(d, costs.reuse))
  np.testing.assert_array_equal(np.asarray(d_used), np.asarray(d))
  np.testing.assert_array_equal(
      np.asarray(on.loss(state.params, batch, rng, t, given=(d, costs.reuse))[0]),
      np.asarray(loss))

  # Independent recomputation: same eps, one decoder call per class k (a Python loop).
  x = batch["image"]
  mean, logvar = method.encode(vae, x)
  eps = jax.random.normal(rng, mean.shape)
  z = mean + jnp.exp(0.5 * logvar) * eps
  u = np.stack([np.asarray(losses.bernoulli_log_likelihood(
      method.decode_logits(vae, jnp.concatenate(
          [z, jnp.tile(jax.nn.one_hot(k, 3)[None], (16, 1))], -1)), x)) for k in range(3)], 1)
  np.testing.assert_allclose(np.asarray(costs.u), u, rtol=1e-5)
  expected = assignment.assign(u, 2.0)
  np.testing.assert_array_equal(np.asarray(d), expected)
  # ... and the reconstruction term is computed with exactly that code.
  rec = -np.mean(u[np.arange(16), expected])
  np.testing.assert_allclose(float(metrics["reconstruction"]), rec, rtol=1e-5)
  # The penalty matters here: with it, the labels differ from the row-wise argmax or at least
  # satisfy the exact objective no worse than it.
  assert assignment.assignment_objective(u, expected, 2.0) >= \
      assignment.assignment_objective(u, u.argmax(1), 2.0) - 1e-6


def test_before_t_d_decoder_sees_zero_code():
  config, method, state, batch = _setup()
  vae = state.params["vae"]
  rng = jax.random.PRNGKey(1)
  t = config.cascade.discrete_start
  _, metrics, d = jax.jit(method.terms)(vae, batch, rng, t)  # t = t_d
  assert np.all(np.asarray(d) == -1)
  x = batch["image"]

  @jax.jit
  def reconstruction_at_zero_code(vae, x):
    mean, logvar = method.encode(vae, x)
    z = mean + jnp.exp(0.5 * logvar) * jax.random.normal(rng, mean.shape)
    zero = jnp.concatenate([z, jnp.zeros((16, 3))], -1)
    return -jnp.mean(losses.bernoulli_log_likelihood(method.decode_logits(vae, zero), x))
  rec = reconstruction_at_zero_code(vae, x)
  np.testing.assert_allclose(float(metrics["reconstruction"]), float(rec), rtol=1e-5)


@pytest.mark.slow
def test_no_gradient_through_assignment_and_betas_follow_schedule():
  config, method, state, batch = _setup()
  t = 5  # r = 2: two dimensions relieved... of three: floor(5/2) = 2
  np.testing.assert_array_equal(np.asarray(method.betas(t)), [1.0, 1.0, 10.0])
  on, state, (rng, _), costs, d = _discrete_phase(config, method, state, batch)
  grads = jax.jit(jax.grad(lambda p: on.loss(p, batch, rng, t, given=(d, costs.reuse))[0]))(
      state.params)
  assert all(np.isfinite(np.asarray(g)).all() for g in jax.tree_util.tree_leaves(grads))


def test_cascade_d_uses_one_constant_beta():
  _, method, _, _ = _setup(**{"cascade.cascade": False, "cascade.beta_low": 7.0})
  np.testing.assert_array_equal(np.asarray(method.betas(1)), [7.0] * 3)
  np.testing.assert_array_equal(np.asarray(method.betas(10_000)), [7.0] * 3)


def test_inference_discrete_code_is_argmax_at_the_mean():
  _, method, state, batch = _setup()
  rep = jax.jit(method.represent)(state.params, batch["image"])
  u = np.asarray(jax.jit(method.unary)(state.params["vae"], rep["mean"], batch["image"]))
  np.testing.assert_array_equal(np.asarray(rep["discrete"]), u.argmax(1))


def test_unary_batchings_agree_with_one_decoder_call_per_row():
  """'per_class' and 'stacked' give the same u, and u[i, k] is log p(x_i | z_i, e_k) row by row."""
  _, per_class, state, batch = _setup()
  _, stacked, _, _ = _setup(**{"cascade.unary_batching": "stacked"})
  vae, x = state.params["vae"], batch["image"]
  z = jax.random.normal(jax.random.PRNGKey(1), (x.shape[0], per_class.latent_dim))
  u_class = np.asarray(jax.jit(per_class.unary)(vae, z, x))
  u_stack = np.asarray(jax.jit(stacked.unary)(vae, z, x))
  np.testing.assert_allclose(u_class, u_stack, rtol=1e-5)
  i, k = 5, 2

  @jax.jit
  def log_likelihood_of_class_k(vae, z, x):  # one decoder call, for one row
    logits = per_class.decode_logits(vae, per_class.decoder_input(z, jnp.array([k])))
    return losses.bernoulli_log_likelihood(logits, x)[0]
  direct = float(log_likelihood_of_class_k(vae, z[i:i + 1], x[i:i + 1]))
  np.testing.assert_allclose(u_class[i, k], direct, rtol=1e-5)
  assert u_class.shape == (x.shape[0], per_class.num_discrete)


@pytest.mark.parametrize("discrete_start", [0, 3])
def test_phases_are_declared_by_the_step_number(discrete_start):
  config = helpers.tiny_config("cascadevae", **{"cascade.discrete_start": discrete_start})
  method = methods.build(config, helpers.TinyImages().image_shape)
  # t = step + 1 runs the discrete branch from t > t_d on.
  assert [method.phase(s) for s in range(5)] == [s + 1 > discrete_start for s in range(5)]
  assert method.for_phase(None) is method
  fixed = method.for_phase(True)
  assert fixed is not method and fixed.discrete_phase is True and not method.discrete_phase
  assert method.code_solve is None and fixed.code_solve.penalty == config.cascade.penalty


def test_a_method_of_one_phase_declares_none():
  method = methods.build(helpers.tiny_config("betavae"), helpers.TinyImages().image_shape)
  assert {method.phase(s) for s in (0, 1, 10**6)} == {None}
  assert method.for_phase(None) is method
