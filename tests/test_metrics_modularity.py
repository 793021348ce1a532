"""Modularity and explicitness (Ridgeway & Zemel 2018) as disentanglement_lib computes them."""
import numpy as np
import pytest

from disentangle.metrics import registry
from disentangle.metrics import sampling
from disentangle.metrics.dlib import modularity
from tests import synthetic_factors as syn

D5 = np.diag(5.0 * np.ones(5))


@pytest.mark.parametrize("mi, expected", [
    (D5, 1.0), (np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]), 2 / 3),
    (np.zeros((10, 10)), 0.0), (np.vstack([D5, D5]), 1.0), (D5[:2, :], 1.0),
    (np.hstack([D5, D5]), 1.0 - 1.0 / 9),
])
def test_disentanglement_lib_modularity_cases(mi, expected):
  np.testing.assert_allclose(modularity.modularity(mi), expected)


def _mod(latents_fn, n=1000, seed=0, bins=10, explicit=True):
  """(modularity, explicitness) of the code ``latents_fn`` makes of ``n`` train and ``n`` test
  points; without ``explicit``, (modularity, None): its logistic fits take most of the time."""
  rng = np.random.default_rng(seed)
  y_tr, y_te = (syn.identity_observations(n, rng) for _ in range(2))
  x_tr, x_te = latents_fn(y_tr.astype(float)), latents_fn(y_te.astype(float))
  mi = modularity.mutual_information(sampling.histogram_discretize(x_tr, bins), y_tr)
  if not explicit:
    return modularity.modularity(mi), None
  n_tr, n_te = sampling.normalize(x_tr, x_te)
  return modularity.modularity(mi), modularity.explicitness(n_tr, y_tr, n_te, y_te)


def test_disentanglement_lib_metric_cases_and_explicitness():
  # modularity_explicitness_test.py: identity and duplicated in [0.9, 1], shuffled low.
  mod, (_, test_auc, _) = _mod(syn.identity)
  assert mod >= 0.9 and test_auc >= 0.9
  assert _mod(syn.duplicated, explicit=False)[0] >= 0.9
  assert _mod(syn.shuffled_per_point(), n=20000, explicit=False)[0] <= 0.2
  # Input-ignoring noise: explicitness at chance (AUC 1/2).
  assert abs(_mod(syn.noise(), n=3000)[1][1] - 0.5) < 0.05


def test_mixed_in_between_and_rescaling_invariant():
  assert 0.2 < _mod(syn.mixed, explicit=False)[0] < 0.9
  a, (_, auc_a, _) = _mod(syn.identity)
  b, (_, auc_b, _) = _mod(lambda x: syn.identity(x)[:, ::-1] * 4.0 - 2.0)
  assert a == pytest.approx(b) and auc_a == pytest.approx(auc_b, abs=1e-6)


def test_registered_explicitness_beside_modularity_and_the_code_extends():
  out = registry.run(syn.inputs(syn.code_carries_factor0), {}, names=["modularity"],
                     overrides=syn.small_settings())[0]["modularity"]
  assert out["value"] == out["modularity"] and 0.5 <= out["explicitness_test"] <= 1.0
  both = out["by_protocol"]["disentanglement_lib+discrete_codes"]
  assert both["mutual_information"].shape == (3, 3)
  assert both["explicitness_test"] > out["explicitness_test"]
  logged = registry.METRICS["modularity"].log_values(out)
  assert logged == {"modularity": out["value"], "explicitness": out["explicitness_test"]}
