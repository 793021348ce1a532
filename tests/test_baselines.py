"""JointVAE, beta-TCVAE and AnchorVAE: estimators against closed forms and brute force, one step."""
import importlib
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disentangle import config as config_lib
from disentangle import losses
from disentangle import methods
from disentangle import viz
from disentangle.methods import anchorvae
from disentangle.methods import jointvae
from disentangle.metrics import representation
from tests import helpers


def _normal_logpdf(z, mean, logvar):
  """log N(z; mean, exp(logvar)) written out in numpy (float64), independent of the library."""
  var = np.exp(logvar)
  return -0.5 * (np.log(2 * np.pi * var) + (z - mean) ** 2 / var)


# -- Gumbel-softmax and the categorical KL ----------------------------------------------------------

def test_gumbel_softmax_argmax_frequencies_match_softmax():
  probs = np.array([0.1, 0.2, 0.3, 0.4])
  n = 40_000
  # Unnormalised logits (log probs + a constant): the sample depends on softmax(logits) only.
  logits = np.broadcast_to(np.log(probs).astype(np.float32) + np.float32(1.7), (n, 4))
  sample = jax.jit(losses.gumbel_softmax_sample)  # one program for both temperatures
  samples = np.asarray(sample(jax.random.PRNGKey(0), logits, 0.67))
  np.testing.assert_allclose(samples.sum(-1), 1.0, rtol=1e-5)
  assert np.all(samples >= 0)
  freq = np.bincount(samples.argmax(-1), minlength=4) / n
  # Gumbel-max: argmax of the relaxed sample is an exact draw of Cat(probs) at any temperature.
  np.testing.assert_allclose(freq, probs, atol=5 * np.sqrt(0.25 / n))
  # Same noise, lower temperature: the relaxation moves towards the vertices, argmax unchanged.
  cold = np.asarray(sample(jax.random.PRNGKey(0), logits, 0.05))
  np.testing.assert_array_equal(cold.argmax(-1), samples.argmax(-1))
  assert cold.max(-1).mean() > samples.max(-1).mean() + 0.1


def test_categorical_kl_to_uniform_matches_direct_formula():
  rng = np.random.default_rng(0)
  logits = rng.normal(scale=2.0, size=(6, 5))
  p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
  direct = np.sum(p * np.log(p / (1.0 / 5)), axis=-1)
  kl = jax.jit(losses.categorical_kl_uniform)
  got = np.asarray(kl(logits.astype(np.float32)))
  np.testing.assert_allclose(got, direct, rtol=1e-5, atol=1e-6)
  ends = np.asarray(kl(np.array([[0.0, 0.0, 0.0], [60.0, 0.0, 0.0]], np.float32)))
  np.testing.assert_allclose(ends, [0.0, np.log(3)], atol=1e-5)  # uniform: 0; one-hot: log K


# -- JointVAE -----------------------------------------------------------------------------------------

def _jointvae(**kw):
  overrides = {"jointvae.cont_max": 40.0, "jointvae.cont_steps": 100, "jointvae.cont_gamma": 3.0,
               "jointvae.disc_max": 5.0, "jointvae.disc_steps": 100, "jointvae.disc_gamma": 2.0}
  overrides.update(kw)
  config = helpers.tiny_config("jointvae", **overrides)
  data = helpers.TinyImages()
  method = methods.build(config, data.image_shape)
  return config, method, data


@pytest.mark.slow
def test_jointvae_capacities_at_known_steps_and_loss_terms():
  config, method, data = _jointvae()
  # C_z: 0 -> 40 over 100 iterations; C_c: 0 -> 5 over 100 iterations, capped at log 3.
  for t, cz, cc in [(0, 0.0, 0.0), (10, 4.0, 0.5), (20, 8.0, 1.0), (50, 20.0, math.log(3)),
                    (100, 40.0, math.log(3)), (1000, 40.0, math.log(3))]:
    got_z, got_c = method.capacities(t)
    np.testing.assert_allclose([float(got_z), float(got_c)], [cz, cc], rtol=1e-6, atol=1e-6)
  assert jointvae.discrete_capacity_cap((10, 2)) == pytest.approx(math.log(10) + math.log(2))

  state = method.init(jax.random.PRNGKey(0))
  vae = state.params["vae"]
  batch = {"image": jnp.asarray(data.get_images(np.arange(8)))}
  t = 30
  loss, m = method.loss(state.params, batch, jax.random.PRNGKey(5), t)
  # Independent recomputation of the KLs from the encoder outputs.
  mean, logvar, logits = (np.asarray(a, np.float64) for a in method.encode(vae, batch["image"]))
  kl_z = np.sum(np.mean(0.5 * (mean ** 2 + np.exp(logvar) - logvar - 1), axis=0))
  p = np.exp(logits - logits.max(-1, keepdims=True))
  p /= p.sum(-1, keepdims=True)
  kl_c = np.mean(np.sum(p * np.log(3 * p), axis=-1))
  cz, cc = 12.0, min(1.5, math.log(3))
  np.testing.assert_allclose(float(m["capacity_loss_cont"]), 3.0 * abs(cz - kl_z), rtol=1e-4)
  np.testing.assert_allclose(float(m["capacity_loss_disc"]), 2.0 * abs(cc - kl_c), rtol=1e-4)
  np.testing.assert_allclose(
      float(loss), float(m["reconstruction"]) + 3.0 * abs(cz - kl_z) + 2.0 * abs(cc - kl_c),
      rtol=1e-5)


@pytest.mark.slow
def test_jointvae_evaluation_interface():
  _, method, data = _jointvae(**{"jointvae.discrete_sizes": (3, 2)})
  params = method.init(jax.random.PRNGKey(0)).params
  x = jnp.asarray(data.get_images(np.arange(4)))
  rep = method.represent(params, x)
  _, _, logits = method.encode(params["vae"], x)
  assert logits.shape == (4, 5) and method.num_discrete == 3
  np.testing.assert_array_equal(np.asarray(rep["discrete"]), np.asarray(logits[:, :3]).argmax(-1))
  r = representation.as_representation(jax.device_get(rep))
  assert r.discrete.shape == (4,) and r.mean.shape == (4, 3)
  # decode(z, d): one-hot of d for the first categorical, zeros for the second.
  z = rep["mean"]
  d = jnp.array([0, 2, 1, -1])
  manual = jnp.concatenate([z, jax.nn.one_hot(d, 3), jnp.zeros((4, 2))], -1)
  np.testing.assert_allclose(np.asarray(method.decode(params, z, d)),
                             np.asarray(jax.nn.sigmoid(method.decode_logits(params["vae"], manual))),
                             rtol=1e-6)
  # reconstruct: z = mean and every categorical at its argmax (Dupont's reconstruction mode).
  hard = jnp.concatenate([z, jax.nn.one_hot(logits[:, :3].argmax(-1), 3),
                          jax.nn.one_hot(logits[:, 3:].argmax(-1), 2)], -1)
  np.testing.assert_allclose(np.asarray(method.reconstruct(params, x)),
                             np.asarray(jax.nn.sigmoid(method.decode_logits(params["vae"], hard))),
                             rtol=1e-6)
  grid = viz.discrete_traversal_grid(
      lambda zz, dd: np.asarray(method.decode(params, jnp.asarray(zz), jnp.asarray(dd))),
      np.asarray(z[:2]), method.num_discrete)
  assert grid.ndim == 3


# -- beta-TCVAE ---------------------------------------------------------------------------------------

def _tiny_posteriors(b=5, m=3, seed=0):
  rng = np.random.default_rng(seed)
  mean = rng.normal(scale=0.8, size=(b, m))
  logvar = rng.normal(scale=0.3, size=(b, m)) - 0.5
  z = mean + np.exp(0.5 * logvar) * rng.normal(size=(b, m))
  return z, mean, logvar


def _brute_force(z, mean, logvar, weight):
  """log q(z|x), log q(z), log prod_j q(z_j) with explicit loops over i, k, j (float64)."""
  b, m = z.shape
  log_qzx, log_qz, log_prod = np.zeros(b), np.zeros(b), np.zeros(b)
  for i in range(b):
    log_qzx[i] = sum(_normal_logpdf(z[i, j], mean[i, j], logvar[i, j]) for j in range(m))
    joint = 0.0
    for k in range(b):
      dens = 1.0
      for j in range(m):
        dens *= np.exp(_normal_logpdf(z[i, j], mean[k, j], logvar[k, j]))
      joint += weight(i, k) * dens
    log_qz[i] = np.log(joint)
    for j in range(m):
      marg = sum(weight(i, k) * np.exp(_normal_logpdf(z[i, j], mean[k, j], logvar[k, j]))
                 for k in range(b))
      log_prod[i] += np.log(marg)
  return log_qzx, log_qz, log_prod


# Compiled as the step compiles it: one program per call, not one per operation.
_log_densities = jax.jit(losses.minibatch_log_densities,
                         static_argnames=("dataset_size", "stratified"))


@pytest.mark.slow
def test_mws_estimator_matches_brute_force():
  z, mean, logvar = _tiny_posteriors()
  n, b = 1000, z.shape[0]
  got = _log_densities(*(np.float32(a) for a in (z, mean, logvar)), dataset_size=n)
  want = _brute_force(z, mean, logvar, lambda i, k: 1.0 / (n * b))
  for g, w in zip(got, want):
    np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-4)


@pytest.mark.slow
def test_mss_estimator_matches_brute_force_and_weights_sum_to_one():
  z, mean, logvar = _tiny_posteriors(b=6, seed=1)
  n, b = 500, z.shape[0]
  mm = b - 1

  def weight(i, k):
    if k == i:
      return 1.0 / n
    if k == (i + 1) % b:
      return (n - mm) / (n * mm)
    return 1.0 / mm

  w = np.exp(np.asarray(losses.stratified_log_weights(b, n), np.float64))
  np.testing.assert_allclose(w.sum(1), 1.0, rtol=1e-6)
  np.testing.assert_allclose(w, [[weight(i, k) for k in range(b)] for i in range(b)], rtol=1e-6)
  got = _log_densities(*(np.float32(a) for a in (z, mean, logvar)), dataset_size=n,
                       stratified=True)
  want = _brute_force(z, mean, logvar, weight)
  for g, wv in zip(got, want):
    np.testing.assert_allclose(np.asarray(g), wv, rtol=1e-5, atol=1e-4)


def test_mws_is_the_mixture_density_minus_log_batch_when_the_batch_is_the_dataset():
  z, mean, logvar = _tiny_posteriors(b=4, seed=2)
  # q(z) = 1/N sum_n q(z|x_n) exactly when the batch holds all N points; MWS weighs 1/(N B).
  dens = np.exp(_normal_logpdf(z[:, None, :], mean[None], logvar[None]).sum(-1))
  exact = np.log(dens.mean(1))
  _, log_qz, _ = _log_densities(*(np.float32(a) for a in (z, mean, logvar)), dataset_size=4)
  np.testing.assert_allclose(np.asarray(log_qz), exact - np.log(4), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_betatcvae_with_unit_weights_is_the_sampled_elbo():
  config = helpers.tiny_config("betatcvae", **{"betatcvae.beta": 1.0})
  data = helpers.TinyImages()
  method = methods.build(config, data.image_shape)
  params = method.init(jax.random.PRNGKey(0)).params
  vae = params["vae"]
  batch = {"image": jnp.asarray(data.get_images(np.arange(8)))}
  rng = jax.random.PRNGKey(3)
  loss, m = method.loss(params, batch, rng, 1)
  mean, logvar = method.encode(vae, batch["image"])
  z = np.asarray(mean + jnp.exp(0.5 * logvar) * jax.random.normal(rng, mean.shape), np.float64)
  mean, logvar = np.asarray(mean, np.float64), np.asarray(logvar, np.float64)
  mc_kl = np.mean(np.sum(_normal_logpdf(z, mean, logvar) - _normal_logpdf(z, 0.0, 0.0), -1))
  # alpha = beta = gamma = 1: MI + TC + dim-wise KL telescopes to log q(z|x) - log p(z).
  np.testing.assert_allclose(float(loss), float(m["reconstruction"]) + mc_kl, rtol=1e-4)


# -- AnchorVAE ----------------------------------------------------------------------------------------

def test_anchorvae_betas_and_loss():
  np.testing.assert_array_equal(np.asarray(anchorvae.anchor_betas(20, 5, 7.0, 10.0)),
                                [7.0] * 5 + [10.0] * 15)
  np.testing.assert_array_equal(np.asarray(anchorvae.anchor_betas(5, 5, 10.0, 3.0)), [10.0] * 5)
  config = helpers.tiny_config("anchorvae", **{"anchorvae.num_anchor": 2,
                                               "anchorvae.beta_low": 0.5,
                                               "anchorvae.beta_high": 8.0})
  data = helpers.TinyImages()
  method = methods.build(config, data.image_shape)
  params = jax.jit(method.init)(jax.random.PRNGKey(0)).params
  vae = params["vae"]
  batch = {"image": data.get_images(np.arange(8))}
  loss, m = jax.jit(method.loss, static_argnums=3)(params, batch, jax.random.PRNGKey(1), 1)
  mean, logvar = (np.asarray(a, np.float64) for a in jax.jit(method.encode)(vae, batch["image"]))
  kl = np.mean(0.5 * (mean ** 2 + np.exp(logvar) - logvar - 1), axis=0)
  np.testing.assert_allclose(float(loss), float(m["reconstruction"]) + 0.5 * kl[:2].sum()
                             + 8.0 * kl[2:].sum(), rtol=1e-5)
  with config.unlocked():
    config.anchorvae.num_anchor = 4
  with pytest.raises(config_lib.ConfigError, match="anchorvae.num_anchor"):
    methods.build(config, data.image_shape)


# -- one step of each method ----------------------------------------------------------------------------

TINY = {
    "jointvae": {"jointvae.cont_steps": 10, "jointvae.disc_steps": 10},
    "betatcvae": {},
    "anchorvae": {"anchorvae.num_anchor": 1},
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TINY))
def test_train_step_lowers_loss_and_compiles_once(name):
  chex.clear_trace_counter()  # the parametrised cases share the nested function's hash
  config = helpers.tiny_config(name, **TINY[name])
  data = helpers.TinyImages()
  method = methods.build(config, data.image_shape)

  def loss_fn(params, batch, rng):
    return method.loss(params, batch, rng, 1)[0]  # t = 1: the first iteration's capacities
  step = helpers.step_traced_once(method)

  state = method.init(jax.random.PRNGKey(0))
  batch = {"image": jnp.asarray(data.get_images(np.arange(8)))}
  rng = jax.random.PRNGKey(7)
  before = float(loss_fn(state.params, batch, rng))
  state, metrics = step(state, batch)
  assert np.isfinite(float(metrics["loss"]))
  after = float(loss_fn(state.params, batch, rng))
  assert after < before
  for i in (1, 2):
    state, _ = step(state, {"image": jnp.asarray(data.get_images(np.arange(8 * i, 8 * i + 8)))})
  assert int(state.step) == 3


# -- configs --------------------------------------------------------------------------------------------

def test_paper_settings_of_baseline_configs():
  d = importlib.import_module("experiments.configs.dsprites_jointvae").get_config("m4")
  j = d.jointvae
  assert (d.model.latent_dim, tuple(j.discrete_sizes), j.temperature, d.optimizer.learning_rate,
          d.batch_size) == (4, (3,), 0.67, 5e-4, 64)
  assert (j.cont_min, j.cont_max, j.cont_steps, j.cont_gamma) == (0.0, 40.0, 300_000, 150.0)
  assert (j.disc_min, j.disc_max, j.disc_steps, j.disc_gamma) == (0.0, 1.1, 300_000, 150.0)
  mn = importlib.import_module("experiments.configs.mnist_jointvae").get_config("")
  j = mn.jointvae
  assert (mn.model.latent_dim, tuple(j.discrete_sizes), mn.optimizer.learning_rate) == (
      10, (10,), 5e-4)
  assert (j.cont_max, j.cont_steps, j.cont_gamma, j.disc_max, j.disc_steps, j.disc_gamma) == (
      5.0, 25_000, 30.0, 5.0, 25_000, 30.0)
  a = importlib.import_module("experiments.configs.dsprites_anchorvae").get_config("anchor5_m20")
  assert (a.model.latent_dim, a.anchorvae.num_anchor, a.anchorvae.beta_low) == (20, 5, 7.0)
  a5 = importlib.import_module("experiments.configs.dsprites_anchorvae").get_config("")
  assert (a5.model.latent_dim, a5.anchorvae.num_anchor, a5.anchorvae.beta_low) == (5, 5, 10.0)
  t = importlib.import_module("experiments.configs.dsprites_betatcvae").get_config("mss")
  b = t.betatcvae
  assert (b.alpha, b.beta, b.gamma, b.dataset_size, b.estimator, t.batch_size) == (
      1.0, 6.0, 1.0, 737_280, "mss", 2048)


# -- the shared discriminator pieces ------------------------------------------------------------------

def _former_permute_dims(rng, z):
  """FactorVAE's permutation before the redesign (Kim & Mnih, Alg. 2), kept as the reference."""
  keys = jax.random.split(rng, z.shape[1])
  return jnp.stack([jax.random.permutation(k, z[:, j]) for j, k in enumerate(keys)], axis=1)


def test_permute_groups_with_singletons_draws_the_former_permutations():
  from disentangle.methods import discriminator as disc_lib  # pylint: disable=g-import-not-at-top
  z = np.random.default_rng(0).normal(size=(32, 5)).astype(np.float32)
  both = jax.jit(lambda rng: (disc_lib.permute_groups(rng, z, disc_lib.singleton_groups(5)),
                              _former_permute_dims(rng, z)))
  for seed in range(3):
    new, former = both(jax.random.PRNGKey(seed))
    np.testing.assert_array_equal(np.asarray(new), np.asarray(former))


def test_permute_groups_moves_blocks_together_and_decouples_groups():
  from disentangle.methods import discriminator as disc_lib  # pylint: disable=g-import-not-at-top
  b, groups = 64, ((0, 1, 2), (3,), (4,))  # FFVAE: z as one block, each b_j alone
  z = (100.0 * np.arange(b)[:, None] + np.arange(5)[None, :]).astype(np.float32)  # row i, col j
  permute = jax.jit(disc_lib.permute_groups, static_argnums=2)
  out = np.asarray(permute(jax.random.PRNGKey(1), z, groups))
  rows = (out // 100).astype(int)
  np.testing.assert_array_equal(out % 100, np.tile(np.arange(5), (b, 1)))  # columns stay put
  assert np.all(rows[:, 0] == rows[:, 1]) and np.all(rows[:, 1] == rows[:, 2])  # z rows whole
  for j in range(5):  # every column a permutation of itself
    assert sorted(rows[:, j]) == list(range(b))
  assert np.mean(rows[:, 0] == rows[:, 3]) < 0.2 and np.mean(rows[:, 3] == rows[:, 4]) < 0.2
  with pytest.raises(ValueError, match="partition"):
    permute(jax.random.PRNGKey(0), z, ((0, 1), (3,), (4,)))


@pytest.mark.slow
def test_factorvae_step_applies_both_gradients_at_the_same_parameters():
  """The VAE update does not see the discriminator's update and vice versa (one step by hand)."""
  import optax  # pylint: disable=g-import-not-at-top
  config = helpers.tiny_config("factorvae")
  data = helpers.TinyImages()
  method = methods.build(config, data.image_shape)
  state = method.init(jax.random.PRNGKey(0))
  batch = {"image": jnp.asarray(data.get_images(np.arange(8)))}
  new, metrics = jax.jit(method.train_step)(state, batch)
  k_vae, k_perm = jax.random.split(jax.random.fold_in(state.rng, 0))
  g_vae, (_, z) = jax.jit(jax.grad(method.vae_terms, has_aux=True))(state.params, batch, k_vae)
  g_disc, _ = jax.jit(jax.grad(method.disc_loss, has_aux=True))(state.params, z, k_perm)
  assert all(float(jnp.abs(g).max()) == 0.0 for g in jax.tree_util.tree_leaves(g_disc["vae"]))
  for name, g, lr, b1, b2 in (("vae", g_vae, 1e-3, 0.9, 0.999), ("discriminator", g_disc, 1e-4,
                                                                  0.5, 0.9)):
    tx = optax.adam(lr, b1=b1, b2=b2)
    upd, _ = tx.update(g[name], tx.init(state.params[name]), state.params[name])
    want = optax.apply_updates(state.params[name], upd)
    # Adam's first step is ~lr * sign(g): where g ~ 0, two compiled programs' rounding may
    # flip it.
    for a, b in zip(jax.tree_util.tree_leaves(want), jax.tree_util.tree_leaves(new.params[name])):
      a, b = np.asarray(a), np.asarray(b)
      assert np.isclose(b, a, rtol=1e-5, atol=1e-7).mean() >= 0.999 and np.abs(a - b).max() <= 2 * lr
  assert int(new.step) == 1 and "disc_loss" in metrics and "tc_estimate" in metrics
