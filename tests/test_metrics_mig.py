"""MIG: disentanglement_lib's histogram estimator and Chen et al.'s sampled one."""
import numpy as np
import pytest

from disentangle.data.ground_truth import InMemoryGroundTruth
from disentangle.metrics import Representation
from disentangle.metrics import mig
from disentangle.metrics import plugin_mutual_information
from disentangle.metrics.mig import DSPRITES_FACTORS
from disentangle.metrics.mig import factor_set_of
from disentangle.metrics.mig import histogram_discretize
from disentangle.metrics.mig import mig_from_matrix
from disentangle.metrics.sampling import MetricInputError

SIZES = (3, 4, 5, 6)


def grid_dataset():
  factors = np.indices(SIZES).reshape(len(SIZES), -1).T
  return InMemoryGroundTruth(factors, factors.astype(np.float32))


def gaussian(mean, std=0.01):
  return Representation(mean=mean, logvar=np.full(mean.shape, 2 * np.log(std)))


def test_plugin_mutual_information_by_hand():
  assert plugin_mutual_information([0, 0, 1, 1], [5, 5, 7, 7]) == pytest.approx(np.log(2))
  assert plugin_mutual_information([0, 1, 0, 1], [0, 0, 1, 1]) == pytest.approx(0.0)
  # a = (b mod 2) on 4 equiprobable values of b: I = H(a) = log 2.
  assert plugin_mutual_information([0, 1, 0, 1], [0, 1, 2, 3]) == pytest.approx(np.log(2))


def test_histogram_discretize_equal_width_bins():
  x = np.linspace(0.0, 1.0, 11)[:, None]  # 11 points, 5 equal bins of width 0.2
  got = histogram_discretize(x, 5)[:, 0]
  # np.digitize against the left edges [0, .2, .4, .6, .8]: right edge values go to the bin above.
  np.testing.assert_array_equal(got, [1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 5])


def test_mig_from_matrix_by_hand():
  mi = np.array([[1.0, 0.1], [0.4, 0.3], [0.0, 0.9]])
  score, gaps = mig_from_matrix(mi, np.array([2.0, 1.0]))
  np.testing.assert_allclose(gaps, [(1.0 - 0.4) / 2.0, (0.9 - 0.3) / 1.0])
  assert score == pytest.approx(np.mean(gaps))


@pytest.mark.parametrize("estimator", ["histogram", "sampled"])
def test_identity_scores_one(estimator):
  out = mig(grid_dataset(), lambda x: gaussian(x / np.array(SIZES)), np.random.default_rng(0),
            num_points=2000, num_samples=500, estimator=estimator)
  assert out["estimator"] == estimator
  assert out["score"] > 0.95
  assert out["factors_used"] == [0, 1, 2, 3]
  if estimator == "sampled":  # Chen et al. normalise by log(factor size)
    np.testing.assert_allclose(out["factor_entropy"], np.log(SIZES))


@pytest.mark.slow
@pytest.mark.parametrize("estimator", ["histogram", "sampled"])
def test_duplicated_latent_has_no_gap(estimator):
  def rep(x):
    return gaussian(np.concatenate([x, x[:, :1]], axis=1) / np.array(SIZES + (3,)))
  out = mig(grid_dataset(), rep, np.random.default_rng(1), num_points=2000, num_samples=None,
            estimator=estimator)
  # Histogram: identical codes, identical MI. Sampled: the copies get independent z samples, but
  # with every point's sample in both H(z_j) and H(z_j | v_0) the Monte-Carlo noise cancels in
  # I = H(z_j) - H(z_j | v_0) = log 3 for either copy.
  assert out["per_factor"][0] == pytest.approx(0.0, abs=0.02 if estimator == "sampled" else 1e-9)
  assert np.all(out["per_factor"][1:] > 0.9)


def test_discrete_code_enters_as_a_dimension():
  def rep(x):
    return Representation(mean=x[:, 1:], discrete=x[:, 0].astype(np.int64))
  out = mig(grid_dataset(), rep, np.random.default_rng(2), num_points=2000, use_discrete=True)
  assert out["discrete_dim"] == 3 and out["use_discrete"]
  assert out["protocol"] == "disentanglement_lib+discrete_codes"
  assert out["mutual_information"].shape == (4, 4)
  assert out["per_factor"][0] > 0.95


# -- the factor set (eval.mig_factors) ---------------------------------------------------------

DSPRITES_LIKE = (3, 2, 4, 3, 2)  # a small grid named as dSprites' factors


def dsprites_named():
  factors = np.indices(DSPRITES_LIKE).reshape(5, -1).T
  return InMemoryGroundTruth(np.tile(factors, (4, 1)), np.tile(factors, (4, 1)).astype(np.float32),
                             factor_names=DSPRITES_FACTORS)


def test_dsprites_factor_names_are_the_datasets():
  from disentangle.data.datasets import dsprites
  assert DSPRITES_FACTORS == dsprites.FACTOR_NAMES


def test_factor_sets_resolve_per_estimator_and_data():
  sizes = (3, 6, 40, 32, 32)
  # Chen et al.'s code conditions on scale, orientation, pos x, pos y of dSprites: not shape.
  assert factor_set_of("chen_et_al", "histogram", DSPRITES_FACTORS, sizes) == (
      "chen_et_al", [1, 2, 3, 4])
  assert factor_set_of("protocol", "sampled", DSPRITES_FACTORS, sizes) == (
      "chen_et_al", [1, 2, 3, 4])
  assert factor_set_of("protocol", "histogram", DSPRITES_FACTORS, sizes) == (
      "all", [0, 1, 2, 3, 4])
  assert factor_set_of("all", "sampled", DSPRITES_FACTORS, sizes) == ("all", [0, 1, 2, 3, 4])
  # A factor with one value is never scored.
  assert factor_set_of("all", "sampled", DSPRITES_FACTORS, (1, 6, 40, 32, 32))[1] == [1, 2, 3, 4]
  # Data Chen et al. did not score: the protocol falls back to every factor, recorded as such;
  # asking for their set explicitly is refused, naming the field.
  other = ("shape", "row", "col")
  assert factor_set_of("protocol", "sampled", other, (4, 4, 4)) == ("all", [0, 1, 2])
  with pytest.raises(MetricInputError, match="eval.mig_factors"):
    factor_set_of("chen_et_al", "sampled", other, (4, 4, 4))


def test_chen_et_al_set_is_the_all_set_without_shape():
  # Histogram estimator, same stream: the points (and so every I(z_j; v_k)) are the same, and
  # Chen et al.'s set is the gaps of scale..pos_y alone. The code carries every factor but
  # shape (gap ~0), so leaving shape out raises MIG from ~4/5 to ~1.
  def rep(x):
    return gaussian(x[:, 1:].astype(np.float64))
  data = dsprites_named()
  every = mig(data, rep, np.random.default_rng(5), num_points=1500, factor_set="all")
  chen = mig(data, rep, np.random.default_rng(5), num_points=1500, factor_set="chen_et_al")
  assert every["factor_set"] == "all" and every["factor_names"] == list(DSPRITES_FACTORS)
  assert chen["factor_set"] == "chen_et_al" and chen["factors_used"] == [1, 2, 3, 4]
  assert chen["factor_names"] == ["scale", "orientation", "pos_x", "pos_y"]
  np.testing.assert_array_equal(chen["mutual_information"], every["mutual_information"][:, 1:])
  np.testing.assert_allclose(chen["per_factor"], every["per_factor"][1:], rtol=1e-12)
  assert chen["score"] == pytest.approx(np.mean(every["per_factor"][1:]), rel=1e-12)
  assert chen["score"] > 0.95 and every["score"] < 0.81
  # The default ('protocol'): Chen et al.'s set for their estimator, every factor for the other.
  sampled = mig(data, rep, np.random.default_rng(5), num_points=600, num_samples=300,
                estimator="sampled")
  assert sampled["factor_set"] == "chen_et_al" and sampled["factors_used"] == [1, 2, 3, 4]
  assert mig(data, rep, np.random.default_rng(5), num_points=600)["factor_set"] == "all"
  # Explicit indices are recorded as such.
  assert mig(data, rep, np.random.default_rng(5), num_points=600,
             factor_indices=[2])["factor_set"] == "explicit"


def test_registered_mig_reads_eval_mig_factors_and_refuses_a_bad_value():
  from disentangle import config as config_lib
  from disentangle.metrics import registry
  data = dsprites_named()
  rep = lambda x: gaussian(x.astype(np.float64) + 0.0)
  inputs = registry.Inputs("run", np.random.default_rng(0), ground_truth=data, represent=rep,
                           factor_names=DSPRITES_FACTORS)
  overrides = {"mig": {"num_points": 500}}
  both, _ = registry.run(inputs, {"mig_estimator": "both"}, names=["mig"], overrides=overrides)
  by = both["mig"]["by_estimator"]
  assert by["histogram"]["factor_set"] == "all" and by["sampled"]["factor_set"] == "chen_et_al"
  assert "factors chen_et_al: scale, orientation, pos_x, pos_y" in registry.METRICS[
      "mig"].describe(both["mig"])
  forced, _ = registry.run(inputs, {"mig_estimator": "sampled", "mig_factors": "all"},
                           names=["mig"], overrides=overrides)
  assert forced["mig"]["factor_set"] == "all" and forced["mig"]["factors_used"] == [0, 1, 2, 3, 4]
  # 'chen_et_al' on data without a published set: not computed, one line naming the field.
  other = registry.Inputs("run", np.random.default_rng(0), ground_truth=grid_dataset(),
                          represent=lambda x: gaussian(x.astype(np.float64)),
                          factor_names=("a", "b", "c", "d"))
  errors = {}
  out, _ = registry.run(other, {"mig_factors": "chen_et_al"}, names=["mig"],
                        overrides=overrides, errors=errors)
  assert "mig" not in out and "eval.mig_factors" in errors["mig"]
  bad = config_lib.base_config()
  bad.eval.mig_factors = "no_shape"
  with pytest.raises(config_lib.ConfigError, match="eval.mig_factors"):
    config_lib.validate(bad, config_lib.base_config())
