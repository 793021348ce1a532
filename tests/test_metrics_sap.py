"""SAP score (Kumar et al. 2018) as disentanglement_lib computes it."""
import numpy as np
import pytest

from disentangle.metrics import registry
from disentangle.metrics.dlib import sap
from tests import synthetic_factors as syn


def _sap(latents_fn, continuous, n=600, seed=0):
  rng = np.random.default_rng(seed)
  y_tr, y_te = (syn.identity_observations(n, rng) for _ in range(2))
  x_tr, x_te = latents_fn(y_tr.astype(float)), latents_fn(y_te.astype(float))
  return sap.avg_diff_top_two(sap.score_matrix(x_tr, y_tr, x_te, y_te,
                                               continuous_factors=continuous))


def test_disentanglement_lib_cases_continuous_factors():
  # sap_score_test.py: identity in [0.9, 1]; zeros in [0, 0.2]; duplicated in [0, 0.2].
  assert 0.9 <= _sap(syn.identity, True) <= 1.0
  assert 0.0 <= _sap(syn.zeros, True) <= 0.2
  assert 0.0 <= _sap(syn.duplicated, True) <= 0.2


def test_discrete_factors_identity_highest_noise_and_duplicate_near_zero():
  # A linear classifier on one latent separates the middle values of a 5-valued factor poorly
  # (about 0.6 accuracy against about 0.2 for the others): the identity's SAP is about 0.4.
  identity = _sap(syn.identity, False)
  assert 0.3 <= identity <= 1.0
  assert _sap(syn.noise(), False) <= 0.05
  assert _sap(syn.duplicated, False) <= 0.05
  assert 0.05 < _sap(syn.mixed, False) < identity


def test_score_matrix_closed_form_and_top_two():
  m = np.array([[0.9, 0.1], [0.2, 0.5], [0.3, 0.45]])
  assert sap.avg_diff_top_two(m) == np.mean([0.9 - 0.3, 0.5 - 0.45])
  x = np.arange(10.0)[:, None]
  y = (2 * np.arange(10) + 1)[:, None]
  assert sap.score_matrix(x, y, x, y, continuous_factors=True)[0, 0] == 1.0


def test_continuous_form_invariant_to_rescaling():
  assert _sap(syn.permuted_rescaled, True) == pytest.approx(_sap(syn.identity, True))


def test_registered_permutation_invariant_and_with_the_code():
  over = syn.small_settings()
  a = registry.run(syn.inputs(syn.identity), {}, names=["sap"], overrides=over)[0]["sap"]
  b = registry.run(syn.inputs(lambda x: syn.identity(x)[:, ::-1]), {}, names=["sap"],
                   overrides=over)[0]["sap"]
  assert a["protocol"] == "disentanglement_lib" and a["factors_used"] == [0, 1, 2]
  assert a["value"] > 0.3 and a["value"] == pytest.approx(b["value"])
  np.testing.assert_allclose(a["score_matrix"], b["score_matrix"][::-1])
  c = registry.run(syn.inputs(syn.code_carries_factor0), {"use_discrete": "include"},
                   names=["sap"], overrides=over)[0]["sap"]
  means = c["by_protocol"]["disentanglement_lib"]
  assert c["protocol"] == "disentanglement_lib+discrete_codes"
  assert c["score_matrix"].shape == (3, 3) and means["score_matrix"].shape == (2, 3)
  assert c["score_matrix"][2, 0] > 0.9 and c["value"] > means["value"]
