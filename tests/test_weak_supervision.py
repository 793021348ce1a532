"""Weak supervision (Locatello et al. 2020): pairs sharing all factors but k, GroupVAE / ML-VAE
aggregation and the adaptive threshold against numpy, the loss, configs and runs."""
import importlib
import json

import jax
import jax.numpy as jnp
from jax.sharding import Mesh
import numpy as np
import pytest

from disentangle import config as config_lib
from disentangle import methods
from disentangle.data.ground_truth import InMemoryGroundTruth
from disentangle.data.labels import batch_spec as batch_spec_lib
from disentangle.data.labels import pairs
from disentangle.methods import weakvae
from disentangle.train import device_data
from disentangle.train import input_pipeline
from disentangle.train import runs
from disentangle.train import trainer
from tests import helpers

SIZES = (3, 1, 4, 5, 2)  # a factor of one value, which no pair can change: K = 4 variable


def _grid_set(sizes=SIZES, size=32, copies=1):
  """Every factor vector once (or ``copies`` times), 32x32 images that show the factors."""
  factors = np.indices(sizes).reshape(len(sizes), -1).T.astype(np.int64)
  factors = np.repeat(factors, copies, axis=0)
  images = np.zeros((len(factors), size, size), np.uint8)
  for i, f in enumerate(factors):
    r, c = 2 + 6 * f[0], 2 + 5 * f[2]
    images[i, r:r + 4 + f[4] * 2, c:c + 4] = 60 + 40 * f[3]
  return InMemoryGroundTruth(factors, images, sizes, name="tiny_grid")


def _spec(k, dynamics="paper"):
  return batch_spec_lib.BatchSpec(pairs=batch_spec_lib.PairSpec(k=k, dynamics=dynamics,
                                                                field="weakvae"))


def _draw(k, dynamics, n=20_000, seed=0, sizes=SIZES):
  rng = np.random.default_rng(seed)
  factors = np.stack([rng.integers(0, s, n) for s in sizes], axis=1)
  partner, changed = pairs.draw(factors, sizes, k, np.random.default_rng(seed + 1), dynamics)
  return factors, partner, changed


# -- the pairs ----------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [1, 2, 3])
def test_paper_pairs_differ_in_exactly_k_factors(k):
  factors, partner, changed = _draw(k, "paper", n=5000)
  differ = partner != factors
  np.testing.assert_array_equal(differ, changed.astype(bool))
  assert np.all(differ.sum(1) == k)
  assert not differ[:, 1].any()  # the factor of one value never changes
  assert np.all((partner >= 0) & (partner < np.asarray(SIZES)))


def test_paper_pairs_change_uniform_factors_to_uniform_other_values():
  n = 40_000
  factors, partner, changed = _draw(1, "paper", n=n)
  variable = [0, 2, 3, 4]
  freq = changed[:, variable].mean(0)  # each variable factor is the changed one w.p. 1/4
  assert np.all(np.abs(freq - 0.25) < 4 * np.sqrt(0.25 * 0.75 / n))
  # factor 3 (5 values), when changed: the shift (new - old) mod 5 uniform on 1..4
  rows = changed[:, 3] == 1
  shift = (partner[rows, 3] - factors[rows, 3]) % 5
  counts = np.bincount(shift, minlength=5)
  assert counts[0] == 0
  m = rows.sum()
  assert np.all(np.abs(counts[1:] / m - 0.25) < 4 * np.sqrt(0.25 * 0.75 / m))


def test_drawn_k_is_uniform_on_one_to_k_minus_one():
  n = 40_000
  factors, partner, changed = _draw(-1, "paper", n=n)
  ks = (partner != factors).sum(1)
  assert ks.min() >= 1 and ks.max() <= 3  # K = 4 variable factors
  freq = np.bincount(ks, minlength=4)[1:] / n
  assert np.all(np.abs(freq - 1 / 3) < 4 * np.sqrt((1 / 3) * (2 / 3) / n)), freq


def test_dlib_pairs_redraw_one_or_k_factors_from_all_values():
  """simple_dynamics: choice([1, k]) factors redrawn, each uniform over all its values."""
  n = 40_000
  factors, partner, changed = _draw(-1, "dlib", n=n)
  ks = changed.sum(1)
  # k_observed uniform on 1..3, then 1 or k_observed with equal odds.
  want = np.array([0.5 + 0.5 / 3, 0.5 / 3, 0.5 / 3])
  freq = np.bincount(ks, minlength=4)[1:] / n
  assert np.all(np.abs(freq - want) < 4 * np.sqrt(want * (1 - want) / n)), freq
  assert np.all(partner[changed == 0] == factors[changed == 0])
  # a redrawn factor keeps its value w.p. 1 / size (shape: 1/3, pos: 1/5)
  for j, size in ((0, 3), (3, 5)):
    rows = changed[:, j] == 1
    kept = np.mean(partner[rows, j] == factors[rows, j])
    assert abs(kept - 1 / size) < 4 * np.sqrt((1 / size) * (1 - 1 / size) / rows.sum())


def test_dlib_fixed_k_redraws_one_or_k():
  _, _, changed = _draw(3, "dlib", n=10_000)
  ks = changed.sum(1)
  assert set(np.unique(ks)) == {1, 3}
  assert abs(np.mean(ks == 1) - 0.5) < 4 * np.sqrt(0.25 / 10_000)


def test_pair_source_is_a_function_of_seed_and_step_and_keeps_todays_images():
  data = _grid_set(copies=2)
  src = input_pipeline.make_source(data, _spec(2), global_batch=16, seed=3)
  again = input_pipeline.make_source(data, _spec(2), global_batch=16, seed=3)
  other = input_pipeline.make_source(data, _spec(2), global_batch=16, seed=4)
  plain = input_pipeline.make_source(data, global_batch=16, seed=3)
  assert isinstance(src, input_pipeline.PairSource)
  for step in (0, 1, 7, 30):  # 30: past the first epochs
    a, b = src.local_batch(step), again.local_batch(step)
    assert set(a) == {"image", "image_pair", "changed"}
    for key in a:
      np.testing.assert_array_equal(a[key], b[key])
    np.testing.assert_array_equal(a["image"], plain.local_batch(step)["image"])
    rows = src.local_rows(step)
    f1, f2 = data.factors_of(rows["index"]), data.factors_of(rows["pair_index"])
    np.testing.assert_array_equal((f1 != f2).astype(np.int32), rows["changed"])
    assert np.all(rows["changed"].sum(1) == 2)
    np.testing.assert_array_equal(a["image_pair"], data.get_images(rows["pair_index"]))
  assert not np.array_equal(src.local_rows(5)["pair_index"], other.local_rows(5)["pair_index"])
  assert not np.array_equal(src.local_rows(5)["pair_index"], src.local_rows(6)["pair_index"])


def test_pair_source_shares_do_not_depend_on_the_process_split():
  data = _grid_set()
  whole = input_pipeline.make_source(data, _spec(-1), global_batch=12, seed=1)
  for count in (2, 3):
    shares = [input_pipeline.make_source(data, _spec(-1), global_batch=12, seed=1,
                                         process_index=p, process_count=count)
              for p in range(count)]
    for step in (0, 4):
      want = whole.local_rows(step)
      got = [s.local_rows(step) for s in shares]
      for key in want:
        np.testing.assert_array_equal(np.concatenate([g[key] for g in got]), want[key])


def test_pairs_gathered_on_the_device_are_the_host_batch():
  data = _grid_set()
  spec = _spec(1)
  src = input_pipeline.make_source(data, spec, global_batch=8, seed=0)
  mesh = Mesh(np.array(jax.devices()[:1]), ("data",))
  placed = device_data.place(data, data.compact_images(), spec, mesh)
  assert placed.layout.pairs
  rows = src.local_rows(2)
  got = jax.jit(lambda p, r: device_data.gather(p, r, placed.layout))(placed.placed, rows)
  want = src.local_batch(2)
  assert set(got) == set(want)
  for key in want:
    np.testing.assert_array_equal(np.asarray(got[key]), want[key])


class _NoFactors(helpers.TinyImages):
  name = "MNIST"


@pytest.mark.parametrize("data,spec,match", [
    (_NoFactors(), _spec(1), r"^config field 'dataset\.name' must be a ground-truth dataset .*"
                             r"'weakvae\.k', got MNIST$"),
    (_grid_set(), _spec(4), r"^config field 'weakvae\.k' must be -1 \(drawn per pair\) or in "
                            r"\[1, 3\] for the 4 factors of tiny_grid, got 4$"),
    (_grid_set(), _spec(0), r"^config field 'weakvae\.k' must be -1 .* got 0$"),
    (_grid_set(), _spec(1, "other"), r"^config field 'weakvae\.dynamics' must be one of"),
    (InMemoryGroundTruth(np.indices(SIZES).reshape(5, -1).T[:-1],
                         np.zeros((119, 32, 32), np.uint8), SIZES, name="holes"), _spec(1),
     r"^config field 'dataset\.name' must store every factor vector .* holes with 119 of 120$"),
])
def test_impossible_pairs_are_one_line_naming_the_field(data, spec, match):
  with pytest.raises(config_lib.ConfigError, match=match) as err:
    input_pipeline.make_source(data, spec, global_batch=8, seed=0)
  assert "\n" not in str(err.value)


@pytest.mark.parametrize("field,value,what", [
    ("weakvae.beta", -1.0, ">= 0"),
    ("weakvae.k", 0, "-1 (drawn per pair) or >= 1"),
    ("weakvae.k", -2, "-1 (drawn per pair) or >= 1"),
    ("weakvae.aggregation", "mean", "one of ['gvae', 'mlvae']"),
    ("weakvae.shared", "all", "one of ['adaptive', 'labels']"),
])
def test_impossible_values_are_one_line_naming_the_field(field, value, what):
  helpers.assert_field_rule_refuses(_config_module().get_config("smoke"), field, value, what)


def test_labels_need_a_latent_dimension_per_factor():
  config = helpers.tiny_config("weakvae", **{"weakvae.shared": "labels"})  # latent_dim 3 < 5
  with pytest.raises(config_lib.ConfigError, match=r"^config field 'model\.latent_dim' must be "
                                                   r">= the 5 factors"):
    weakvae.WeakVAE.check_data(config, _grid_set())


# -- aggregation and the adaptive threshold against numpy ----------------------------------------

def _posteriors(b=6, m=5, seed=0):
  rng = np.random.default_rng(seed)
  return (rng.normal(size=(b, m)), rng.normal(scale=0.7, size=(b, m)),
          rng.normal(size=(b, m)), rng.normal(scale=0.7, size=(b, m)))


def _f32(*arrays):
  return [np.asarray(a, np.float32) for a in arrays]


def test_gvae_aggregate_is_the_mean_of_means_and_of_variances():
  m1, lv1, m2, lv2 = _posteriors()
  mean, logvar = jax.jit(weakvae.gvae_aggregate)(*_f32(m1, lv1, m2, lv2))
  np.testing.assert_allclose(np.asarray(mean), (m1 + m2) / 2, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(np.exp(np.asarray(logvar)), (np.exp(lv1) + np.exp(lv2)) / 2,
                             rtol=1e-5)


def test_mlvae_aggregate_is_the_precision_weighted_mean_with_dlibs_variance():
  m1, lv1, m2, lv2 = _posteriors(seed=1)
  v1, v2 = np.exp(lv1), np.exp(lv2)
  prec = 1 / v1 + 1 / v2  # the product of the two Gaussians: N(mu_p, 1 / prec)
  mu_p = (m1 / v1 + m2 / v2) / prec
  mean, logvar = jax.jit(weakvae.mlvae_aggregate)(*_f32(m1, lv1, m2, lv2))
  np.testing.assert_allclose(np.asarray(mean), mu_p, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(np.exp(np.asarray(logvar)), 2 / prec, rtol=1e-5)  # twice 1 / prec


def test_pairwise_kl_is_the_gaussian_kl_per_dimension():
  m1, lv1, m2, lv2 = _posteriors(seed=2)
  v1, v2 = np.exp(lv1), np.exp(lv2)
  want = np.log(np.sqrt(v2) / np.sqrt(v1)) + (v1 + (m1 - m2) ** 2) / (2 * v2) - 0.5
  got = jax.jit(weakvae.pairwise_kl)(*_f32(m1, lv1, m2, lv2))
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)


def _np_adaptive(delta):
  """Dimensions below the midpoint of [min, max] are shared; equal deltas: all (a loop)."""
  out = np.zeros(delta.shape, bool)
  for b, row in enumerate(delta):
    lo, hi = row.min(), row.max()
    for j, d in enumerate(row):
      out[b, j] = True if hi == lo else d < lo + (hi - lo) / 2
  return out


def test_adaptive_threshold_against_numpy():
  rng = np.random.default_rng(3)
  delta = rng.exponential(size=(50, 10))
  delta[0] = 0.25                                # every delta equal: all shared
  delta[1] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 10]     # the midpoint 5 itself is not shared
  got = np.asarray(jax.jit(weakvae.adaptive_shared)(delta.astype(np.float32)))
  np.testing.assert_array_equal(got, _np_adaptive(delta.astype(np.float32)))
  assert got[0].all() and got[1].tolist() == [True] * 5 + [False] * 5


def test_labels_unshare_the_changed_factors_dimensions():
  changed = np.array([[0, 1, 0], [1, 0, 1], [0, 0, 0]], np.int32)
  got = np.asarray(jax.jit(weakvae.labelled_shared, static_argnums=1)(changed, 5))
  want = np.ones((3, 5), bool)
  want[:, :3] = changed == 0
  np.testing.assert_array_equal(got, want)


def test_aggregated_posteriors_replace_only_the_shared_dimensions():
  m1, lv1, m2, lv2 = _posteriors(seed=4)
  shared = np.random.default_rng(5).random(m1.shape) < 0.5
  (a1, b1), (a2, b2) = jax.jit(weakvae.aggregated_posteriors, static_argnums=5)(
      *_f32(m1, lv1, m2, lv2), shared, "gvae")
  mean, var = (m1 + m2) / 2, (np.exp(lv1) + np.exp(lv2)) / 2
  np.testing.assert_allclose(np.asarray(a1), np.where(shared, mean, m1), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(np.asarray(a2), np.where(shared, mean, m2), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(np.exp(np.asarray(b1)), np.where(shared, var, np.exp(lv1)),
                             rtol=1e-5)
  np.testing.assert_allclose(np.exp(np.asarray(b2)), np.where(shared, var, np.exp(lv2)),
                             rtol=1e-5)


# -- the loss -----------------------------------------------------------------------------------

def _np_bernoulli(logits, x):
  return np.sum(x * logits - np.logaddexp(0.0, logits), axis=(1, 2, 3))


@pytest.fixture(scope="module")
def network():
  """The network of the tests below (6 latent dimensions, one per factor and one more),
  compiled once (`helpers.compiled_network`)."""
  config = helpers.tiny_config("weakvae", **{"model.latent_dim": 6})
  return helpers.compiled_network(methods.build(config, _grid_set().image_shape))


@pytest.mark.parametrize("aggregation,shared", [("gvae", "adaptive"), ("mlvae", "adaptive"),
                                                ("gvae", "labels"), ("mlvae", "labels")])
def test_loss_against_numpy(network, aggregation, shared):
  """Both observations encoded, aggregated on the shared dimensions, sampled, decoded: the mean
  over the pair of the Bernoulli reconstruction and beta KL(q~ || N(0, I)), in numpy."""
  beta = 3.0
  data = _grid_set()
  config = helpers.tiny_config("weakvae", **{"model.latent_dim": 6, "weakvae.beta": beta,
                                             "weakvae.aggregation": aggregation,
                                             "weakvae.shared": shared, "weakvae.k": 2})
  method = methods.build(config, data.image_shape)
  params, encode, decode = network.params, network.encode, network.decode
  batch = input_pipeline.make_source(data, method.batch_spec(config), global_batch=8,
                                     seed=0).local_batch(0)
  rng = jax.random.PRNGKey(7)
  loss, metrics = jax.jit(method.loss)(params, batch, rng, jnp.int32(1))

  f64 = lambda a: np.asarray(a, np.float64)
  m1, lv1 = map(f64, encode(params["vae"], batch["image"]))
  m2, lv2 = map(f64, encode(params["vae"], batch["image_pair"]))
  v1, v2 = np.exp(lv1), np.exp(lv2)
  if shared == "labels":
    mask = np.ones_like(m1, bool)
    mask[:, :5] = batch["changed"] == 0
  else:
    delta = 0.5 * (v1 / v2 + (m2 - m1) ** 2 / v2 - 1 + lv2 - lv1)
    mask = _np_adaptive(delta)
  if aggregation == "gvae":
    mean, var = (m1 + m2) / 2, (v1 + v2) / 2
  else:
    var = 2 * v1 * v2 / (v1 + v2)
    mean = (m1 / v1 + m2 / v2) * var / 2
  total_rec, total_kl = 0.0, 0.0
  keys = jax.random.split(rng)
  for x, m, v, key in ((batch["image"], m1, v1, keys[0]), (batch["image_pair"], m2, v2, keys[1])):
    mu, s2 = np.where(mask, mean, m), np.where(mask, var, v)
    eps = f64(jax.random.normal(key, m.shape))
    z = mu + np.sqrt(s2) * eps
    logits = f64(decode(params["vae"], z.astype(np.float32)))
    total_rec += -np.mean(_np_bernoulli(logits, f64(x))) / 2
    total_kl += np.sum(np.mean(0.5 * (mu ** 2 + s2 - np.log(s2) - 1), axis=0)) / 2
  np.testing.assert_allclose(float(metrics["reconstruction"]), total_rec, rtol=1e-4)
  np.testing.assert_allclose(float(metrics["kl"]), total_kl, rtol=1e-4)
  np.testing.assert_allclose(float(loss), total_rec + beta * total_kl, rtol=1e-4)
  np.testing.assert_allclose(float(metrics["shared_dims"]), mask.sum(1).mean(), rtol=1e-6)


def test_represent_is_the_encoder_of_one_image(network):
  params, encode = network.params, network.encode
  config = helpers.tiny_config("weakvae", **{"model.latent_dim": 6})
  data = _grid_set()
  method = methods.build(config, data.image_shape)
  x = data.get_images(np.arange(8))
  rep = jax.jit(method.represent)(params, x)
  mean, logvar = encode(params["vae"], x)
  np.testing.assert_array_equal(np.asarray(rep["mean"]), np.asarray(mean))
  np.testing.assert_array_equal(np.asarray(rep["logvar"]), np.asarray(logvar))


# -- configs and runs ---------------------------------------------------------------------------

def _config_module():
  return importlib.import_module("experiments.configs.dsprites_weak")


def test_config_variants():
  mod = _config_module()
  c = mod.get_config()
  assert (c.batch_size, c.optimizer.learning_rate, c.num_steps, c.model.latent_dim,
          c.model.likelihood, c.dataset.name) == (64, 1e-4, 300_000, 10, "bernoulli", "dsprites")
  w = c.weakvae
  assert (w.aggregation, w.shared, w.k, w.dynamics, w.beta) == ("gvae", "adaptive", -1, "dlib", 1.0)
  w = mod.get_config("mlvae,k1,paper_pairs,beta4").weakvae
  assert (w.aggregation, w.shared, w.k, w.dynamics, w.beta) == ("mlvae", "labels", 1, "paper",
                                                               4.0)
  grid = mod.get_config("ada_mlvae,grid")
  assert runs.swept_values(grid, runs.run_configs(grid)) == {"weakvae.beta": list(mod.BETA_GRID)}
  with pytest.raises(config_lib.ConfigError, match="choose one"):
    mod.get_config("gvae,mlvae")


@pytest.mark.slow
def test_a_few_steps_through_the_trainer_host_and_device_alike(tmp_path):
  """The smoke settings on a tiny grid: finite losses, and the pairs gathered on the device
  train bit for bit like the host's."""
  got = {}
  for placement in ("host", "device"):
    config = helpers.tiny_config("weakvae", num_steps=3, log_every=1, checkpoint_every=3,
                                 **{"mesh.num_devices": 1, "model.latent_dim": 5,
                                    "weakvae.shared": "labels", "weakvae.k": -1,
                                    "weakvae.dynamics": "dlib",
                                    "dataset.placement": placement})
    state = trainer.train(config, tmp_path / placement, dataset=_grid_set())
    assert int(state.step) == 3
    lines = [json.loads(l)
             for l in (tmp_path / placement / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == 3 and all(np.isfinite(l["loss"]) for l in lines)
    assert {"loss", "reconstruction", "kl", "shared_dims"} <= set(lines[-1])
    got[placement] = [l["loss"] for l in lines]
  assert got["host"] == got["device"]
