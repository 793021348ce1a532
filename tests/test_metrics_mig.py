"""MIG: disentanglement_lib's histogram estimator and Chen et al.'s sampled one."""
import numpy as np
import pytest

from disentangle.data.ground_truth import InMemoryGroundTruth
from disentangle.metrics import Representation, mig, plugin_mutual_information
from disentangle.metrics.mig import histogram_discretize, mig_from_matrix

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
