"""FFVAE (Creager et al. 2019): grouping of the fake samples, density ratio, loss terms against
numpy, the two updates kept apart, training, seeds, evaluation on balanced dSprites, bad input."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from disentangle import config as config_lib
from disentangle import methods
from disentangle.data.datasets import dsprites
from disentangle.data.datasets import dsprites_unfair as du
from disentangle.data.datasets import synthetic
from disentangle.data.labels import supervision
from disentangle.methods import discriminator as disc_lib
from disentangle.methods import ffvae
from disentangle.train import trainer
from tests import helpers

NAMES = ("right", "low")


def _batch(data, start=0, n=8):
  idx = np.arange(start, start + n)
  return {"image": data.get_images(idx), "attributes": data.attributes_of(idx, NAMES)}


def _leaves(tree):
  return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


# -- the grouping of the fake samples -----------------------------------------------------------

def test_permute_groups_moves_z_rows_together_and_each_b_alone():
  b, m = 64, 6
  groups = ffvae.latent_groups(m, 3)
  assert groups == ((0, 1, 2), (3,), (4,), (5,))
  codes = (1000.0 * np.arange(b)[:, None] + np.arange(m)[None, :]).astype(np.float32)
  permute = jax.jit(disc_lib.permute_groups, static_argnums=2)
  fake = np.asarray(permute(jax.random.PRNGKey(3), codes, groups))
  rows = (fake // 1000).astype(int)
  np.testing.assert_array_equal(fake % 1000, np.tile(np.arange(m), (b, 1)))  # columns stay
  assert np.all(rows[:, 0] == rows[:, 1]) and np.all(rows[:, 1] == rows[:, 2])  # z as a block
  for j in range(m):  # every column's multiset is exact: a permutation of itself
    assert sorted(rows[:, j]) == list(range(b))
  # the pairing between groups changes (z's row vs each b_j's row), and the b_j differ
  for j in (3, 4, 5):
    assert np.mean(rows[:, 0] == rows[:, j]) < 0.2
  assert np.mean(rows[:, 3] == rows[:, 4]) < 0.2


# -- density ratio (small discriminator; the shared module and losses) --------------------------

def _trained_ratio(sample_fn, groups, steps=1500, batch=256, seed=0):
  """mean(l_real - l_fake) over fresh real samples after training D on real vs permuted."""
  disc = disc_lib.Discriminator(hidden=64, layers=2)
  key = jax.random.PRNGKey(seed)
  params = disc.init(key, jnp.zeros((1, 3)))["params"]
  tx = optax.adam(3e-3)
  opt = tx.init(params)

  def loss_fn(p, real, fake):
    return disc_lib.discriminator_loss(disc.apply({"params": p},
                                                  jnp.concatenate([real, fake])))[0]

  def step(carry, k):
    p, o = carry
    k_s, k_p = jax.random.split(k)
    real = sample_fn(k_s, batch)
    fake = disc_lib.permute_groups(k_p, real, groups)
    g = jax.grad(loss_fn)(p, real, fake)
    u, o = tx.update(g, o, p)
    return (optax.apply_updates(p, u), o), None

  (params, _), _ = jax.jit(lambda c, ks: jax.lax.scan(step, c, ks))(
      (params, opt), jax.random.split(jax.random.PRNGKey(seed + 1), steps))
  real = sample_fn(jax.random.PRNGKey(seed + 2), 20000)
  return float(jnp.mean(disc_lib.density_ratio(disc.apply({"params": params}, real))))


def _gaussian(cov):
  chol = jnp.linalg.cholesky(jnp.asarray(cov, jnp.float32))
  return lambda k, n: jax.random.normal(k, (n, 3)) @ chol.T


def _mi(rho):
  return -0.5 * np.log(1 - rho ** 2)


@pytest.mark.slow
@pytest.mark.parametrize("rho,tol", [(0.8, 0.1), (0.0, 0.05)])
def test_density_ratio_estimates_the_correlation_of_z_and_b(rho, tol):
  """[z, b] with z 2-d (independent parts) and b correlated with z_0 by rho: TC = -1/2 log(1-rho^2)."""
  cov = [[1, 0, rho], [0, 1, 0], [rho, 0, 1]]
  estimate = _trained_ratio(_gaussian(cov), ffvae.latent_groups(3, 1))
  print(f"\nrho {rho}: estimate {estimate:.3f}, truth {_mi(rho):.3f}")
  assert abs(estimate - _mi(rho)) < tol


@pytest.mark.slow
def test_ffvae_grouping_ignores_correlation_inside_z():
  """z_0, z_1 correlated (rho = 0.8), b independent: FFVAE's grouping sees no dependence, per-
  dimension permutation (FactorVAE) sees the z-internal total correlation."""
  cov = [[1, 0.8, 0], [0.8, 1, 0], [0, 0, 1]]
  grouped = _trained_ratio(_gaussian(cov), ffvae.latent_groups(3, 1))
  singles = _trained_ratio(_gaussian(cov), disc_lib.singleton_groups(3))
  print(f"\nFFVAE grouping {grouped:.3f}, per dimension {singles:.3f}, truth {_mi(0.8):.3f}")
  assert abs(grouped) < 0.05
  assert abs(singles - _mi(0.8)) < 0.1


# -- loss terms against numpy --------------------------------------------------------------------

def _np_softplus(x):
  return np.logaddexp(0.0, x)


@pytest.fixture(scope="module")
def network():
  """The tiny network of the loss tests (``helpers.tiny_config('ffvae')``) compiled once
  (`helpers.compiled_network`), its discriminator too."""
  method = methods.build(helpers.tiny_config("ffvae"), helpers.TinyAttributeImages().image_shape)
  net = helpers.compiled_network(method)
  net.discriminate = jax.jit(method.discriminator.apply)
  return net


def _terms_by_hand(network, method, params, batch, rng, b_kl=True, predictor_input="sample"):
  """The loss assembled with numpy from the network outputs (module docstring of ffvae)."""
  nz = method.latent_dim - len(NAMES)
  mean, logvar = (np.asarray(a, np.float64) for a in network.encode(params["vae"],
                                                                    batch["image"]))
  eps = np.asarray(jax.random.normal(rng, mean.shape), np.float64)
  code = mean + np.exp(0.5 * logvar) * eps
  if not b_kl:
    code[:, nz:] = mean[:, nz:]
  logits = np.asarray(network.decode(params["vae"], code.astype(np.float32)), np.float64)
  x = np.asarray(batch["image"], np.float64)
  rec = -np.mean(np.sum(x * logits - _np_softplus(logits), axis=(1, 2, 3)))
  kl = 0.5 * (mean ** 2 + np.exp(logvar) - logvar - 1)
  if not b_kl:
    kl[:, nz:] = 0.0
  kl = kl.sum(1).mean()
  a = np.asarray(batch["attributes"], np.float64)
  b = code[:, nz:] if predictor_input == "sample" else mean[:, nz:]
  log_p_a = np.mean(np.sum(a * b - _np_softplus(b), axis=1))
  d = np.asarray(network.discriminate({"params": params["discriminator"]},
                                     code.astype(np.float32)), np.float64)
  tc = np.mean(d[:, 0] - d[:, 1])
  return rec, kl, log_p_a, tc


@pytest.mark.parametrize("b_kl,predictor_input", [(True, "sample"), (False, "sample"),
                                                  (True, "mean")])
def test_loss_equals_numpy_assembly(network, b_kl, predictor_input):
  config = helpers.tiny_config("ffvae", **{"ffvae.b_kl": b_kl,
                                           "ffvae.predictor_input": predictor_input})
  data = helpers.TinyAttributeImages()
  method = methods.build(config, data.image_shape)
  params = network.params
  batch, rng = _batch(data), jax.random.PRNGKey(4)
  loss, (metrics, _) = method.vae_terms(params, batch, rng)
  rec, kl, log_p_a, tc = _terms_by_hand(network, method, params, batch, rng, b_kl,
                                        predictor_input)
  f = config.ffvae
  np.testing.assert_allclose(float(metrics["predictor_log_lik"]), log_p_a, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(float(metrics["kl"]), kl, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(float(metrics["tc_estimate"]), tc, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(float(loss), rec + kl - f.alpha * log_p_a + f.gamma * tc,
                             rtol=1e-5)
  if not b_kl:
    assert np.all(np.asarray(metrics["kl_per_dim"])[-2:] == 0)


def test_tc_term_sign_and_alpha_gamma_zero_is_the_vae_loss(network):
  data = helpers.TinyAttributeImages()
  batch, rng = _batch(data), jax.random.PRNGKey(4)
  params = network.params
  # a discriminator sure that every sample is real: logit_real - logit_fake = +5 everywhere
  disc = jax.tree_util.tree_map(np.zeros_like, params["discriminator"])
  disc["logits"]["bias"] = np.float32([5.0, 0.0])
  out = {}
  for alpha, gamma in ((0.0, 0.0), (0.0, 1.0), (1.0, 0.0)):
    config = helpers.tiny_config("ffvae", **{"ffvae.alpha": alpha, "ffvae.gamma": gamma})
    method = methods.build(config, data.image_shape)
    out[alpha, gamma] = float(method.vae_terms(dict(params, discriminator=disc), batch,
                                               rng)[0])
  rec, kl, log_p_a, _ = _terms_by_hand(network, method, params, batch, rng)
  np.testing.assert_allclose(out[0.0, 0.0], rec + kl, rtol=1e-5)  # the beta = 1 VAE
  np.testing.assert_allclose(out[0.0, 1.0] - out[0.0, 0.0], 5.0, rtol=1e-4)  # + gamma * TC
  np.testing.assert_allclose(out[1.0, 0.0] - out[0.0, 0.0], -log_p_a, rtol=1e-4)
  assert log_p_a < 0


# -- the two updates ------------------------------------------------------------------------------

@pytest.mark.slow
def test_updates_leave_the_other_group_bitwise_unchanged_and_share_parameters():
  config = helpers.tiny_config("ffvae")
  data = helpers.TinyAttributeImages()
  method = methods.build(config, data.image_shape)
  state = method.init(jax.random.PRNGKey(0))
  state, _ = jax.jit(method.train_step)(state, _batch(data))  # non-trivial optimiser states
  batch = _batch(data, 8)
  rng, _ = method.step_key(state)
  k_vae, k_perm = jax.random.split(rng)
  gradients = jax.jit(method.gradients, static_argnums=0)
  apply_update = jax.jit(method.apply_update, static_argnums=1)
  (_, (_, code)), g_vae = gradients(method.vae_terms, state.params, batch, k_vae)
  _, g_disc = gradients(method.disc_loss, state.params, code, k_perm)
  only_vae = apply_update(state, "vae", g_vae["vae"])
  only_disc = apply_update(state, "discriminator", g_disc["discriminator"])
  for a, b in ((only_vae.params["discriminator"], state.params["discriminator"]),
               (only_vae.opt_state["discriminator"], state.opt_state["discriminator"]),
               (only_disc.params["vae"], state.params["vae"]),
               (only_disc.opt_state["vae"], state.opt_state["vae"])):
    for x, y in zip(_leaves(a), _leaves(b)):
      assert x.tobytes() == y.tobytes()
  full, _ = jax.jit(method.train_step)(state, batch)  # both gradients at the same parameters
  for a, b in ((full.params["vae"], only_vae.params["vae"]),
               (full.params["discriminator"], only_disc.params["discriminator"])):
    for x, y in zip(_leaves(a), _leaves(b)):
      np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)

  def disc_loss_of_vae(vae_params):
    mean, logvar = method.encode(vae_params, batch["image"])
    code = mean + jnp.exp(0.5 * logvar)
    return method.disc_loss(dict(state.params, vae=vae_params), code, k_perm)[0]

  grads = jax.jit(jax.grad(disc_loss_of_vae))(state.params["vae"])
  assert all(np.all(g == 0) for g in _leaves(grads))


@pytest.mark.slow
def test_train_step_lowers_the_loss_and_compiles_once():
  config = helpers.tiny_config("ffvae")
  data = helpers.TinyAttributeImages()
  method = methods.build(config, data.image_shape)
  step = helpers.step_traced_once(method)

  state = method.init(jax.random.PRNGKey(0))
  batch, rng = _batch(data), jax.random.PRNGKey(7)
  before = float(method.loss(state.params, batch, rng, 1)[0])
  for _ in range(3):
    state, _ = step(state, batch)
  assert float(method.loss(state.params, batch, rng, 1)[0]) < before
  assert int(state.step) == 3


def test_represent_is_mean_and_logvar_of_all_dims_and_sensitive_dims(network):
  config = helpers.tiny_config("ffvae")  # 3 latent dimensions: z_0, then b_right and b_low
  data = helpers.TinyAttributeImages()
  method = methods.build(config, data.image_shape)
  assert method.sensitive_dims == {"right": 1, "low": 2}
  rep = jax.jit(method.represent)(network.params, _batch(data)["image"])
  assert set(rep) == {"mean", "logvar"} and rep["mean"].shape == (8, 3)


# -- evaluation on balanced dSprites ---------------------------------------------------------------

@pytest.mark.slow
def test_evaluate_run_of_an_unfair_run_evaluates_on_dsprites(tmp_path, monkeypatch):
  from disentangle.evaluation import evaluate_run
  from disentangle.evaluation import evaluator as evaluator_lib
  with pytest.warns(dsprites.ProceduralDataWarning):
    base = dsprites.DSprites(source="render")
  train_data = du.DSpritesUnfair(base, num_examples=64, seed=0)
  config = helpers.tiny_config("ffvae", **{
      "dataset.name": "dsprites_unfair", "dataset.eval_name": "dsprites",
      "dataset.source": "file", "ffvae.sensitive": ("shape", "pos_x"),
      "ffvae.fair.subgroup": ("shape",), "ffvae.fair.target": "pos_x",
      "num_steps": 2, "checkpoint_every": 2, "eval.mig_estimator": "both",
      "mesh.num_devices": 1, "model.hidden_units": 16})
  trainer.train(config, tmp_path / "run", dataset=train_data)
  balanced = dsprites.DSprites(path=synthetic.write_dsprites_subset(tmp_path / "d",
                                                                    num_images=200))
  asked = []

  def fake_load(name, **kwargs):
    asked.append(name)
    return balanced

  monkeypatch.setattr(evaluator_lib.data_lib, "load_dataset", fake_load)
  result = evaluate_run.evaluate_run(tmp_path / "run", mig_points=200, factor_score_votes=2,
                                     vote_batch=5)
  assert asked == ["dsprites"]
  saved = json.loads((tmp_path / "run" / "results.json").read_text())
  d = saved["dataset"]
  assert (d["trained_on"], d["evaluated_on"], d["override"]) == ("dsprites_unfair", "dsprites",
                                                                 False)
  assert d["comparable_with_published"] is True  # as a dSprites run read from the file
  mig = result["metrics"]["mig"]
  assert set(mig["by_estimator"]) == {"histogram", "sampled"}
  assert mig["by_estimator"]["sampled"]["protocol"] == "chen_et_al_2018"
  assert mig["value"] == mig["by_estimator"]["histogram"]["value"]


# -- bad input ------------------------------------------------------------------------------------

@pytest.mark.parametrize("field,value,match", [
    ("ffvae.sensitive", (), "ffvae.sensitive"),
    ("ffvae.sensitive", ("right", "right"), "ffvae.sensitive"),
    ("ffvae.sensitive", ("color",), "ffvae.sensitive.*color"),
    ("ffvae.alpha", -1.0, "ffvae.alpha"),
    ("ffvae.gamma", -1.0, "ffvae.gamma"),
    ("ffvae.permute_scope", "shard", "ffvae.permute_scope"),
    ("ffvae.predictor_input", "mode", "ffvae.predictor_input"),
    ("ffvae.fair.remove", "zero", "ffvae.fair.remove"),
    ("eval.mig_estimator", "kde", "eval.mig_estimator"),
    ("dataset.unfair_q_shape", -0.5, "dataset.unfair_q_shape"),
    ("dataset.unfair_q_x", -0.5, "dataset.unfair_q_x"),
    ("dataset.unfair_index_base", 2, "dataset.unfair_index_base"),
    ("dataset.unfair_size", 0, "dataset.unfair_size"),
])
def test_bad_fields_are_config_errors(field, value, match):
  config = helpers.tiny_config("ffvae", **{field: value})
  with pytest.raises(config_lib.ConfigError, match=match):
    methods.validate(config)


@pytest.mark.parametrize("overrides,match", [
    ({"model.latent_dim": 2}, "ffvae.sensitive.*latent_dim - 1"),
    ({"batch_size": 1}, "batch_size"),
    ({"ffvae.fair.target": "right"}, "ffvae.fair.target"),
    ({"ffvae.fair.subgroup": ("big",)}, "ffvae.fair.subgroup"),
])
def test_cross_field_errors_before_anything_compiles(overrides, match):
  config = helpers.tiny_config("ffvae", **overrides)
  with pytest.raises(config_lib.ConfigError, match=match):
    methods.validate(config)
  with pytest.raises(config_lib.ConfigError, match=match):
    methods.build(config, (32, 32, 1))


def test_local_scope_needs_two_rows_per_shard():
  from disentangle.train import mesh as mesh_lib
  config = helpers.tiny_config("ffvae", **{"ffvae.permute_scope": "local", "batch_size": 8})
  with pytest.raises(config_lib.ConfigError, match="batch_size"):
    methods.build(config, (32, 32, 1), mesh=mesh_lib.make_mesh(8))


@pytest.mark.parametrize("names,match", [
    (("right", "tall"), r"'ffvae.sensitive'.*'tall'.*\['right', 'low'\]"),
])
def test_unknown_or_missing_attributes_are_config_errors(tmp_path, names, match):
  config = helpers.tiny_config("ffvae", **{"ffvae.sensitive": names,
                                           "ffvae.fair.subgroup": ("right",)})
  with pytest.raises(config_lib.ConfigError, match=match):
    trainer.train(config, tmp_path / "a", dataset=helpers.TinyAttributeImages())
  with pytest.raises(config_lib.ConfigError, match="'ffvae.sensitive'.*has no attributes"):
    trainer.train(helpers.tiny_config("ffvae"), tmp_path / "b", dataset=helpers.TinyImages())
  assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_remove_modes_agree_with_the_audit():
  from disentangle.evaluation import fair_classification
  assert ffvae.REMOVE_MODES == fair_classification.REMOVE_MODES


def test_dsprites_unfair_is_registered_and_color_is_no_attribute():
  from disentangle import data
  assert "dsprites_unfair" in data.DATASETS and data.SPLITS["dsprites_unfair"]
  with pytest.warns(dsprites.ProceduralDataWarning):
    loaded = data.load_dataset("dsprites_unfair", data_dir=None, source="render",
                               unfair={"num_examples": 100, "seed": 3, "index_base": 0})
  assert isinstance(loaded, du.DSpritesUnfair) and loaded.num_examples == 100
  assert loaded.index_base == 0 and loaded.source == "render"
  with pytest.raises(config_lib.ConfigError, match="ffvae.sensitive.*'color'"):
    supervision.check_names(loaded, ("shape", "color"), "attributes", "ffvae.sensitive")


# -- configs ----------------------------------------------------------------------------------------

def _config_module(name):
  import importlib
  return importlib.import_module(f"experiments.configs.{name}")


def test_dsprites_unfair_config_holds_the_appendix_settings():
  mod = _config_module("dsprites_unfair_ffvae")
  c = mod.get_config("ffvae")
  assert (c.method, c.dataset.name, c.dataset.eval_name) == ("ffvae", "dsprites_unfair",
                                                            "dsprites")
  assert (c.dataset.unfair_q_shape, c.dataset.unfair_q_x) == (1.0, 3.0)
  assert c.model.hidden_units == 128 and c.model.latent_dim == 10  # App. C
  assert (c.ffvae.disc_layers, c.ffvae.disc_hidden) == (5, 1000)
  assert c.optimizer.learning_rate == c.ffvae.disc_learning_rate == 1e-3  # App. D, both
  assert (c.optimizer.b1, c.optimizer.b2, c.ffvae.disc_b1, c.ffvae.disc_b2) == (
      0.9, 0.999, 0.9, 0.999)
  assert c.batch_size == 64 and c.num_steps == 300_000
  assert not c.eval.factor_score and c.eval.mig and c.eval.mig_estimator == "both"
  assert (c.ffvae.alpha, c.ffvae.gamma) == (300.0, 40.0)
  assert abs(np.log(c.ffvae.gamma / c.ffvae.alpha) - (-2.0)) < 0.02
  assert mod.get_config("factorvae").ffvae.alpha == 0.0
  cpu = mod.get_config("cpu")
  assert cpu.num_steps == 10_000 and mod.CPU_FRACTION * 300_000 == 10_000  # 1/30 of 3e5
  assert (cpu.eval_every, cpu.checkpoint_every) == (1667, 333)
  assert mod.PUBLISHED == {}
  gammas = (10, 20, 30, 40, 50, 70, 100)
  assert mod.SWEEPS["fig6a"] == {"alpha": (0, 50, 100, 150, 200, 300, 400, 1000),
                                 "gamma": gammas}
  assert mod.SWEEPS["fig6b"]["alpha"] == (300, 400, 1000)
  assert mod.SWEEPS["fig7a"]["alpha"] == (0, 50, 100, 150, 200)
  over = mod.get_config(mod.sweep_overrides("fig6b")[0])
  assert (over.ffvae.alpha, over.ffvae.gamma) == (300.0, 10.0)
  for variant in ("", "ffvae", "factorvae", "cpu", "smoke", "factorvae,smoke", "ffvae,cpu"):
    methods.validate(mod.get_config(variant))
  with pytest.raises(config_lib.ConfigError):
    mod.get_config("ffvae,factorvae")


def test_celeba_config_validates_and_names_the_attributes():
  mod = _config_module("celeba_ffvae")
  c = mod.get_config()
  assert c.ffvae.sensitive == ("Chubby", "Eyeglasses", "Male")
  assert c.ffvae.fair.target == "Heavy_Makeup"
  s = mod.get_config("smoke")
  assert s.ffvae.sensitive == ("Male", "Eyeglasses") and s.ffvae.fair.target == "Smiling"
  for variant in ("", "cpu", "smoke"):
    methods.validate(mod.get_config(variant))


@pytest.mark.slow
def test_smoke_config_runs_one_step(tmp_path):
  mod = _config_module("dsprites_unfair_ffvae")
  c = mod.get_config("smoke")
  c.num_steps, c.batch_size, c.dataset.unfair_size = 1, 8, 64
  c.ffvae.disc_hidden, c.mesh.num_devices, c.progress_bar = 32, 1, False
  state = trainer.train(c, tmp_path / "smoke")  # no evaluator: one step only
  assert int(state.step) == 1
