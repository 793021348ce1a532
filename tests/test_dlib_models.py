"""AnnealedVAE and DIP-VAE-I/II: regularisers against closed forms and numpy, configs, runs."""
import importlib
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disentangle import config as config_lib
from disentangle import methods
from disentangle.methods import annealedvae
from disentangle.methods import base
from disentangle.methods import dipvae
from disentangle.train import runs
from disentangle.train import trainer
from tests import helpers


def _config_module(name):
  return importlib.import_module(f"experiments.configs.{name}")


def _posteriors(b=16, m=4, seed=0):
  rng = np.random.default_rng(seed)
  mix = rng.normal(size=(m, m))  # correlated means, so every off-diagonal entry is non-zero
  mean = rng.normal(size=(b, m)) @ mix + rng.normal(size=(1, m))
  logvar = rng.normal(scale=0.5, size=(b, m))
  return mean, logvar


def _kl_sum(mean, logvar):
  """sum_j mean_b KL(N(mean, exp(logvar)) || N(0, 1)) in numpy (float64)."""
  return np.sum(np.mean(0.5 * (mean ** 2 + np.exp(logvar) - logvar - 1), axis=0))


@pytest.fixture(scope="module")
def network():
  """The tiny network of the loss tests (every method here has the same), compiled once
  (`helpers.compiled_network`)."""
  return helpers.compiled_network(methods.build(helpers.tiny_config("annealedvae"),
                                                helpers.TinyImages().image_shape))


def _tiny_loss_parts(network, config, t):
  """(loss, metrics, mean, logvar) of one tiny batch at iteration t, compiled."""
  params, encode = network.params, network.encode
  data = helpers.TinyImages()
  method = methods.build(config, data.image_shape)
  batch = {"image": data.get_images(np.arange(8))}
  loss, m = jax.jit(method.loss)(params, batch, jax.random.PRNGKey(1), jnp.int32(t))
  mean, logvar = (np.asarray(a, np.float64) for a in encode(params["vae"], batch["image"]))
  return float(loss), m, mean, logvar


# -- AnnealedVAE --------------------------------------------------------------------------------

def _dlib_anneal(c_max, step, iteration_threshold):
  """disentanglement_lib's ``anneal`` at its global step (the step before the update)."""
  return min(c_max * 1.0, c_max * 1.0 * step / iteration_threshold)


@pytest.mark.parametrize("c_max,threshold", [(25.0, 100_000), (5.0, 7), (0.0, 10)])
def test_annealed_capacity_is_dlibs_anneal_one_step_behind_t(c_max, threshold):
  steps = [0, 1, threshold // 2, threshold - 1, threshold, threshold + 1, 3 * threshold]
  got = [float(annealedvae.capacity(s + 1, c_max=c_max, iteration_threshold=threshold))
         for s in steps]
  np.testing.assert_allclose(got, [_dlib_anneal(c_max, s, threshold) for s in steps], rtol=1e-6)
  assert got[0] == 0.0 and got[4] == got[-1] == c_max  # 0 at the first update, c_max from thr on
  if threshold % 2 == 0:
    assert got[2] == pytest.approx(c_max / 2)


def test_annealed_capacity_with_traced_settings_of_a_sweep():
  """A sweep carries c_max and iteration_threshold as arrays (``runs.traced_config``)."""
  c_max = jnp.asarray([5.0, 50.0])
  threshold = jnp.asarray([4, 8], jnp.int32)
  got = jax.jit(jax.vmap(lambda c, n: annealedvae.capacity(3, c_max=c, iteration_threshold=n)))(
      c_max, threshold)
  np.testing.assert_allclose(np.asarray(got), [5.0 * 2 / 4, 50.0 * 2 / 8], rtol=1e-6)


@pytest.mark.parametrize("t", [1, 3, 50])
def test_annealed_loss_is_reconstruction_plus_gamma_abs_kl_minus_capacity(network, t):
  config = helpers.tiny_config("annealedvae", **{"annealedvae.gamma": 7.0,
                                                 "annealedvae.c_max": 60.0,
                                                 "annealedvae.iteration_threshold": 4})
  loss, m, mean, logvar = _tiny_loss_parts(network, config, t)
  c = _dlib_anneal(60.0, t - 1, 4)
  kl = _kl_sum(mean, logvar)
  np.testing.assert_allclose(float(m["capacity"]), c, rtol=1e-6)
  np.testing.assert_allclose(float(m["kl"]), kl, rtol=1e-4)
  np.testing.assert_allclose(loss, float(m["reconstruction"]) + 7.0 * abs(kl - c), rtol=1e-4)


# -- DIP-VAE ------------------------------------------------------------------------------------

def test_covariance_of_means_is_the_biased_covariance():
  mean, _ = _posteriors()
  got = np.asarray(jax.jit(dipvae.covariance_of_means)(mean.astype(np.float32)))
  np.testing.assert_allclose(got, np.cov(mean, rowvar=False, ddof=0), rtol=1e-4, atol=1e-4)
  # disentanglement_lib's formula, E[mu mu^T] - E[mu] E[mu]^T, is the same estimate.
  dlib = (mean[:, :, None] * mean[:, None, :]).mean(0) - np.outer(mean.mean(0), mean.mean(0))
  np.testing.assert_allclose(got, dlib, rtol=1e-4, atol=1e-4)


def test_aggregate_covariance_adds_the_mean_posterior_variance_to_the_diagonal():
  mean, logvar = _posteriors(seed=1)
  got = np.asarray(jax.jit(dipvae.aggregate_covariance)(mean.astype(np.float32),
                                                        logvar.astype(np.float32)))
  want = np.cov(mean, rowvar=False, ddof=0) + np.diag(np.exp(logvar).mean(0))
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_dip_penalty_and_its_gradient_in_closed_form():
  rng = np.random.default_rng(2)
  a = rng.normal(size=(5, 5))
  cov = a @ a.T / 5
  off = np.sum(cov ** 2) - np.sum(np.diag(cov) ** 2)
  diag = np.sum((np.diag(cov) - 1.0) ** 2)
  penalty = jax.jit(dipvae.dip_penalty)  # one program per shape, not one per operation
  term, got_off, got_diag = penalty(cov.astype(np.float32), 3.0, 30.0)
  np.testing.assert_allclose([float(got_off), float(got_diag)], [off, diag], rtol=1e-5)
  np.testing.assert_allclose(float(term), 3.0 * off + 30.0 * diag, rtol=1e-5)
  grad = np.asarray(jax.jit(jax.grad(lambda c: dipvae.dip_penalty(c, 3.0, 30.0)[0]))(
      jnp.asarray(cov, jnp.float32)))
  want = 2 * 3.0 * (cov - np.diag(np.diag(cov))) + np.diag(2 * 30.0 * (np.diag(cov) - 1.0))
  np.testing.assert_allclose(grad, want, rtol=1e-4, atol=1e-5)
  zero = penalty(np.eye(4, dtype=np.float32), 3.0, 30.0)  # the identity: the minimum
  assert [float(v) for v in zero] == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("dip_type,factor", [("i", 10.0), ("ii", 1.0)])
def test_dip_loss_is_the_elbo_plus_the_penalty(network, dip_type, factor):
  config = helpers.tiny_config("dipvae", **{"dipvae.dip_type": dip_type,
                                            "dipvae.lambda_od": 2.0,
                                            "dipvae.lambda_d_factor": factor})
  loss, m, mean, logvar = _tiny_loss_parts(network, config, 1)
  cov = np.cov(mean, rowvar=False, ddof=0)
  if dip_type == "ii":
    cov = cov + np.diag(np.exp(logvar).mean(0))
  off = np.sum(cov ** 2) - np.sum(np.diag(cov) ** 2)
  diag = np.sum((np.diag(cov) - 1.0) ** 2)
  np.testing.assert_allclose([float(m["dip_off_diagonal"]), float(m["dip_diagonal"])],
                             [off, diag], rtol=1e-3, atol=1e-6)
  want = float(m["reconstruction"]) + _kl_sum(mean, logvar) + 2.0 * off + 2.0 * factor * diag
  np.testing.assert_allclose(loss, want, rtol=1e-4)


@pytest.mark.parametrize("name,overrides", [
    ("annealedvae", {"annealedvae.iteration_threshold": 4}),
    ("dipvae", {"dipvae.dip_type": "i"}),
    ("dipvae", {"dipvae.dip_type": "ii", "dipvae.lambda_d_factor": 1.0}),
])
def test_gradients_are_finite_and_reach_the_encoder(network, name, overrides):
  config = helpers.tiny_config(name, **overrides)
  data = helpers.TinyImages()
  method = methods.build(config, data.image_shape)
  params = network.params
  batch = {"image": data.get_images(np.arange(8))}
  grads = jax.jit(jax.grad(lambda p: method.loss(p, batch, jax.random.PRNGKey(1), 3)[0]))(params)
  leaves = jax.tree_util.tree_leaves(grads)
  assert all(np.all(np.isfinite(np.asarray(g))) for g in leaves)
  assert any(np.any(np.asarray(g) != 0) for g in jax.tree_util.tree_leaves(grads["vae"]["encoder"]))


def test_dip_regulariser_gradient_is_finite_with_a_constant_dimension():
  """A collapsed dimension (every mean equal) gives zero covariance entries, not NaNs."""
  mean, logvar = _posteriors(b=8, m=3, seed=3)
  mean[:, 1] = 0.7
  outputs = base.ElboOutputs({}, jnp.asarray(mean, jnp.float32), jnp.asarray(logvar, jnp.float32),
                             None, jnp.zeros(3))
  for dip_type in ("i", "ii"):
    method = methods.build(helpers.tiny_config("dipvae", **{"dipvae.dip_type": dip_type}),
                           (32, 32, 1))

    def term(mu, lv):
      return method.latent_regularizer(None, outputs._replace(mean=mu, logvar=lv), None, 1)[0]
    grads = jax.jit(jax.grad(term, argnums=(0, 1)))(outputs.mean, outputs.logvar)
    assert all(np.all(np.isfinite(np.asarray(g))) for g in grads)


# -- bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize("method,field,value,what", [
    ("annealedvae", "annealedvae.c_max", -1.0, ">= 0"),
    ("annealedvae", "annealedvae.gamma", -0.5, ">= 0"),
    ("annealedvae", "annealedvae.iteration_threshold", 0, "> 0"),
    ("annealedvae", "annealedvae.iteration_threshold", -100, "> 0"),
    ("dipvae", "dipvae.lambda_od", -2.0, ">= 0"),
    ("dipvae", "dipvae.lambda_d_factor", -1.0, ">= 0"),
    ("dipvae", "dipvae.dip_type", "iii", "one of ['i', 'ii']"),
])
def test_impossible_values_are_one_line_naming_the_field(method, field, value, what):
  config = _config_module(f"dsprites_{method}").get_config("smoke")
  helpers.assert_field_rule_refuses(config, field, value, what)


def test_a_sweep_value_outside_its_rule_names_the_field():
  config = _config_module("dsprites_dipvae").get_config("smoke,sweep=dipvae.lambda_od=1|-2")
  with pytest.raises(config_lib.ConfigError, match=r"'dipvae\.lambda_od' must be >= 0, got -2"):
    runs.run_configs(config)


# -- configs ------------------------------------------------------------------------------------

def test_configs_hold_the_studys_grids():
  """unsupervised_study_v1's sweep: AnnealedVAE gamma 1000, threshold 1e5, six c_max; DIP-VAE
  six lambda_od, lambda_d = 10 lambda_od (I) or lambda_od (II); batch 64, Adam 1e-4, 3e5 steps."""
  a_mod, d_mod = _config_module("dsprites_annealedvae"), _config_module("dsprites_dipvae")
  assert a_mod.C_MAX_GRID == (5.0, 10.0, 25.0, 50.0, 75.0, 100.0)
  assert d_mod.LAMBDA_OD_GRID == (1.0, 2.0, 5.0, 10.0, 20.0, 50.0)
  for c_max in a_mod.C_MAX_GRID:
    c = a_mod.get_config(f"c{int(c_max)}")
    assert (c.annealedvae.c_max, c.annealedvae.gamma, c.annealedvae.iteration_threshold) == (
        c_max, 1000.0, 100_000)
  for dip_type, factor in (("i", 10.0), ("ii", 1.0)):
    for lod in d_mod.LAMBDA_OD_GRID:
      d = d_mod.get_config(f"{dip_type},lod{int(lod)}").dipvae
      assert (d.dip_type, d.lambda_od, d.lambda_d_factor) == (dip_type, lod, factor)
  for c in (a_mod.get_config(), d_mod.get_config()):
    assert (c.batch_size, c.optimizer.learning_rate, c.num_steps, c.model.latent_dim,
            c.model.likelihood, c.dataset.name) == (64, 1e-4, 300_000, 10, "bernoulli",
                                                   "dsprites")
  assert a_mod.get_config().annealedvae.c_max == 25.0
  assert (d_mod.get_config().dipvae.dip_type, d_mod.get_config().dipvae.lambda_od) == ("i", 10.0)


@pytest.mark.parametrize("name,arg,field,grid", [
    ("dsprites_annealedvae", "grid", "annealedvae.c_max", "C_MAX_GRID"),
    ("dsprites_dipvae", "ii,grid", "dipvae.lambda_od", "LAMBDA_OD_GRID"),
])
def test_grid_variant_is_one_sweep_over_the_studys_values(name, arg, field, grid):
  mod = _config_module(name)
  c = mod.get_config(arg)
  cfgs = runs.run_configs(c)
  assert runs.swept_values(c, cfgs) == {field: list(getattr(mod, grid))}
  if name == "dsprites_dipvae":
    assert {(x.dipvae.dip_type, x.dipvae.lambda_d_factor) for x in cfgs} == {("ii", 1.0)}
  with pytest.raises(config_lib.ConfigError, match="grid"):
    mod.get_config(arg + (",c5" if name == "dsprites_annealedvae" else ",lod5"))


def test_rows_and_types_are_chosen_once():
  with pytest.raises(config_lib.ConfigError, match="choose one"):
    _config_module("dsprites_annealedvae").get_config("c5,c10")
  with pytest.raises(config_lib.ConfigError, match="choose one"):
    _config_module("dsprites_dipvae").get_config("i,ii")


def test_cpu_variant_keeps_the_capacity_curve():
  mod = _config_module("dsprites_annealedvae")
  paper, cpu = mod.get_config("c50"), mod.get_config("c50,cpu")
  assert cpu.num_steps * 5 == paper.num_steps
  assert cpu.annealedvae.iteration_threshold * 5 == paper.annealedvae.iteration_threshold
  t = np.arange(1, cpu.num_steps + 1, 97)

  def curve(c, steps):
    a = c.annealedvae
    return np.asarray(annealedvae.capacity(steps, c_max=a.c_max,
                                           iteration_threshold=a.iteration_threshold))
  np.testing.assert_allclose(curve(cpu, t), curve(paper, 5 * (t - 1) + 1), rtol=1e-6)


# -- runs through the trainer -------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name,overrides,keys", [
    ("annealedvae", {"annealedvae.iteration_threshold": 2}, {"capacity"}),
    ("dipvae", {"dipvae.dip_type": "ii", "dipvae.lambda_d_factor": 1.0},
     {"dip_off_diagonal", "dip_diagonal"}),
])
def test_two_steps_through_the_trainer(tmp_path, name, overrides, keys):
  config = helpers.tiny_config(name, num_steps=2, log_every=1, checkpoint_every=2,
                               **{"mesh.num_devices": 1}, **overrides)
  state = trainer.train(config, tmp_path, dataset=helpers.TinyImages())
  assert int(state.step) == 2
  lines = [json.loads(l) for l in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert len(lines) == 2 and all(np.isfinite(l["loss"]) for l in lines)
  assert keys | {"loss", "reconstruction", "kl"} <= set(lines[-1])
  if name == "annealedvae":
    assert [l["capacity"] for l in lines] == [0.0, 25.0 / 2]  # C(t - 1), c_max 25 over 2


@pytest.mark.slow
def test_a_swept_grid_trains_vmapped(tmp_path):
  """c_max and iteration_threshold carried as traced values of one vmapped program (a sweep)."""
  config = helpers.tiny_config(
      "annealedvae", num_steps=2, log_every=1, checkpoint_every=2, seed_layout="vmap",
      sweep="annealedvae.c_max=5|50;annealedvae.iteration_threshold=2|4",
      **{"mesh.num_devices": 1})
  trainer.train(config, tmp_path, dataset=helpers.TinyImages())
  got = {}
  for c_max, threshold in ((5, 2), (5, 4), (50, 2), (50, 4)):
    run = tmp_path / f"annealedvae.c_max={c_max}_annealedvae.iteration_threshold={threshold}_seed_0"
    lines = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
    got[c_max, threshold] = [l["capacity"] for l in lines]
  assert got == {(5, 2): [0.0, 2.5], (5, 4): [0.0, 1.25], (50, 2): [0.0, 25.0],
                 (50, 4): [0.0, 12.5]}


@pytest.mark.parametrize("entry,override,expect", [
    ("dsprites_annealedvae", "--config.annealedvae.c_max=-5",
     "config field 'annealedvae.c_max' must be >= 0, got -5.0"),
    ("dsprites_dipvae", "--config.dipvae.dip_type=iii",
     "config field 'dipvae.dip_type' must be one of ['i', 'ii'], got 'iii'"),
])
def test_bad_command_line_is_one_line_and_creates_nothing(tmp_path, entry, override, expect):
  workdir = tmp_path / "run"
  r = helpers.run_in_process(f"experiments.{entry}",
                             f"--config=experiments/configs/{entry}.py:smoke", override,
                             f"--workdir={workdir}")
  assert r.returncode == 2, r.stderr
  lines = r.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0] == f"error: {expect}", r.stderr
  assert not workdir.exists()
