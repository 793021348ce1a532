"""IRS (Suter et al. 2019) as disentanglement_lib computes it."""
import numpy as np

from disentangle.metrics import registry
from disentangle.metrics import sampling
from disentangle.metrics.dlib import irs
from tests import synthetic_factors as syn


def _irs(latents_fn, n=2000, seed=0):
  y = syn.identity_observations(n, np.random.default_rng(seed))
  z = latents_fn(y.astype(float))
  return irs.irs(sampling.histogram_discretize(y.astype(float), 10), z)["score"]


def test_disentanglement_lib_cases():
  # irs_test.py: identity in [0.9, 1]; zeros in [0, 0.1].
  assert 0.9 <= _irs(syn.identity) <= 1.0
  assert _irs(syn.zeros) == 0.0
  # A constant latent beside informative ones is dropped, not scored.
  out = irs.irs(np.array([[0], [0], [1], [1]]), np.array([[0.0, 5.0], [0.2, 5.0], [1.0, 5.0],
                                                          [1.2, 5.0]]))
  assert out["active_dims"] == [0] and out["score"] == irs.irs_scores(
      np.array([[0], [0], [1], [1]]), np.array([[0.0], [0.2], [1.0], [1.2]]))["score"]
  # No latent varies: 0, from the library (disentanglement_lib's rule), not from a test helper.
  assert irs.irs(np.array([[0], [1]]), np.ones((2, 3))) == {
      "score": 0.0, "num_active_dims": 0, "active_dims": []}


def test_noise_low_mixed_in_between_rescaling_invariant():
  # Gaussian noise: the 99th percentile of |z| over a max deviation of about 3.5 sd: ~0.27.
  noise = _irs(syn.noise())
  assert noise < 0.35
  assert noise + 0.1 < _irs(syn.mixed) < 0.9
  assert _irs(syn.duplicated) == _irs(syn.identity)
  assert _irs(lambda x: syn.identity(x)[:, ::-1] * 3.0 + 1.0) == _irs(syn.identity)


def test_closed_form_two_points_per_value():
  factors = np.array([[0], [0], [1], [1]])
  z = np.array([[0.0], [0.2], [1.0], [1.2]])
  # E|z - E z| max = 0.6; per value the 99th percentile of |z - mean| is 0.1: 1 - 0.1 / 0.6.
  out = irs.irs_scores(factors, z)
  np.testing.assert_allclose(out["score"], 1 - 0.1 / 0.6)


def test_registered_on_the_means_alone():
  out = registry.run(syn.inputs(syn.code_carries_factor0), {"use_discrete": "include"},
                     names=["irs"], overrides=syn.small_settings())[0]["irs"]
  assert out["protocol"] == "disentanglement_lib" and out["num_active_dims"] == 2
  assert 0.0 < out["value"] <= 1.0 and "by_protocol" not in out
