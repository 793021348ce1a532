"""disentanglement_lib's unsupervised scores: Gaussian TC, Wasserstein correlation, mean MI."""
import numpy as np
import pytest
import scipy.linalg

from disentangle.metrics import registry
from disentangle.metrics import sampling
from disentangle.metrics.dlib import unsupervised
from tests import synthetic_factors as syn


def test_disentanglement_lib_cases():
  # unsupervised_metrics_test.py: zero for the identity covariance; equal to the closed forms.
  eye = np.eye(5)
  assert abs(unsupervised.gaussian_total_correlation(eye)) < 1e-12
  assert abs(unsupervised.gaussian_wasserstein_correlation(eye)) < 1e-12
  cov = np.array([[1.0, 0.9], [0.9, 1.0]])
  diag = np.diag(np.diag(cov))
  kl = 0.5 * (np.trace(np.linalg.inv(diag) @ cov) - 2
              + np.log(np.linalg.det(diag) / np.linalg.det(cov)))
  assert unsupervised.gaussian_total_correlation(cov) == pytest.approx(kl)
  w = np.trace(cov + diag - 2 * scipy.linalg.sqrtm(cov @ diag))
  assert unsupervised.gaussian_wasserstein_correlation(cov) == pytest.approx(np.real(w))


def test_independent_code_near_zero_correlated_code_positive():
  rng = np.random.default_rng(0)
  z = rng.normal(size=(5000, 3)) * [1.0, 2.0, 0.5]
  free = unsupervised.scores(z, sampling.histogram_discretize(z, 20))
  assert abs(free["gaussian_total_correlation"]) < 0.01
  assert free["mutual_info_score"] < 0.05
  mixed = np.stack([z[:, 0], z[:, 0] + 0.1 * z[:, 1], z[:, 2]], axis=1)
  tied = unsupervised.scores(mixed, sampling.histogram_discretize(mixed, 20))
  assert tied["gaussian_total_correlation"] > 1.0 and tied["mutual_info_score"] > 0.3
  # Rescaling a dimension changes neither the TC nor the discretised MI (bins per dimension);
  # the Wasserstein correlation, a covariance in the latents' units, moves.
  for tc_of, mixed_of in ((free, z), (tied, mixed)):
    wide = mixed_of * [5.0, 1.0, 1.0]
    scaled = unsupervised.scores(wide, sampling.histogram_discretize(wide, 20))
    assert scaled["gaussian_total_correlation"] == pytest.approx(
        tc_of["gaussian_total_correlation"], rel=1e-9, abs=1e-12)
    assert scaled["mutual_info_score"] == pytest.approx(tc_of["mutual_info_score"], rel=1e-12)
  assert abs(scaled["gaussian_wasserstein_correlation"]
             - tied["gaussian_wasserstein_correlation"]) > 0.1


def test_registered_with_and_without_ground_truth():
  out = registry.run(syn.inputs(syn.code_carries_factor0), {}, names=["unsupervised"],
                     overrides=syn.small_settings())[0]["unsupervised"]
  assert out["points"] == "sampled from the ground truth" and out["num_points"] == 400
  assert set(out["by_protocol"]) == {"disentanglement_lib", "disentanglement_lib+discrete_codes"}
  rep = syn.inputs(syn.identity)
  rep = registry.Inputs("run", np.random.default_rng(0),
                        rep=syn.as_rep(np.random.default_rng(1).normal(size=(50, 3))))
  out = registry.run(rep, {}, names=["unsupervised"])[0]["unsupervised"]
  assert out["points"] == "the eval points" and out["num_points"] == 50
