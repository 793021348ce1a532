"""DCI (Eastwood & Williams 2018) as disentanglement_lib computes it."""
import numpy as np
import pytest

from disentangle.metrics import boosted_trees
from disentangle.metrics import registry
from disentangle.metrics.dlib import dci
from disentangle.metrics.dlib import downstream
from tests import synthetic_factors as syn

D5 = np.diag(5.0 * np.ones(5))


@pytest.mark.parametrize("matrix, d, c", [
    (D5, 1.0, 1.0),
    (np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]), 1.0, 1.0),
    (np.zeros((10, 10)), 0.0, 0.0),
    (np.vstack([D5, D5]), 1.0, 1.0 - np.log(2) / np.log(10)),
    (D5[:2, :], 1.0, 1.0),
    (np.hstack([D5, D5]), 1.0 - np.log(2) / np.log(10), 1.0),
])
def test_disentanglement_lib_importance_cases(matrix, d, c):
  # dci_test.py's DisentanglementTest and CompletenessTest, same matrices, same answers.
  np.testing.assert_allclose(dci.disentanglement(matrix), d, atol=1e-7)
  np.testing.assert_allclose(dci.completeness(matrix), c, atol=1e-7)


def _dci(latents_fn, n=300, seed=0):
  rng = np.random.default_rng(seed)
  y_tr, y_te = (syn.identity_observations(n, rng, 3, 4) for _ in range(2))
  r, _, test_acc = dci.importance_matrix(latents_fn(y_tr.astype(float)), y_tr,
                                         latents_fn(y_te.astype(float)), y_te)
  return dci.disentanglement(r), dci.completeness(r), test_acc


@pytest.mark.slow
def test_disentanglement_lib_metric_cases():
  # dci_test.py: identity in [0.9, 1]; factors shuffled within each point in [0, 0.2]; duplicated:
  # disentanglement in [0.9, 1], completeness near 1 - log 2 / log(#codes).
  d, c, acc = _dci(syn.identity)
  assert d >= 0.9 and c >= 0.9 and acc >= 0.95
  d, c, _ = _dci(syn.shuffled_per_point())
  assert d <= 0.2 and c <= 0.2
  d, c, _ = _dci(syn.duplicated)
  assert d >= 0.9 and abs(c - (1 - np.log(2) / np.log(6))) < 0.1


def test_mixed_factors_in_between():
  d, _, _ = _dci(syn.mixed)
  assert 0.3 < d < 0.9


@pytest.mark.slow
def test_registered_with_the_discrete_code_as_one_latent():
  out = registry.run(syn.inputs(syn.code_carries_factor0), {}, names=["dci"],
                     overrides=syn.small_settings())[0]["dci"]
  assert out["protocol"] == "disentanglement_lib" and out["use_discrete"] is False
  both = out["by_protocol"]["disentanglement_lib+discrete_codes"]
  assert out["importance_matrix"].shape == (2, 3) and both["importance_matrix"].shape == (3, 3)
  assert both["informativeness_test"] > out["informativeness_test"]
  assert out["value"] == out["disentanglement"]


@pytest.mark.slow
def test_threads_do_not_change_the_numbers():
  rng = np.random.default_rng(3)
  y = syn.identity_observations(200, rng, 3, 4)
  x = y + 0.3 * rng.normal(size=y.shape)
  one = dci.importance_matrix(x, y, x, y, n_jobs=1, trees="sklearn")
  two = dci.importance_matrix(x, y, x, y, n_jobs=2, trees="sklearn")
  np.testing.assert_array_equal(one[0], two[0])
  assert one[1:] == two[1:]


@pytest.mark.slow
def test_trees_grown_together_give_sklearns_dci_within_its_own_spread():
  # The same estimator fitted two ways; ties between features go to a random one in both, so
  # the numbers agree as closely as scikit-learn's own with two seeds.
  rng = np.random.default_rng(4)
  y_tr, y_te = (syn.identity_observations(400, rng, 3, 4) for _ in range(2))
  mix = np.array([[1.0, 0.3, 0.0], [0.0, 1.0, 0.5], [0.2, 0.0, 1.0], [0.0, 0.0, 0.1]]).T
  x_tr, x_te = (y @ mix + 0.4 * rng.normal(size=(len(y), 4)) for y in (y_tr, y_te))
  runs = {name: dci.importance_matrix(x_tr, y_tr, x_te, y_te, random_state=seed, trees=trees)
          for name, trees, seed in (("a", "sklearn", 0), ("b", "sklearn", 1),
                                     ("ours", "together", 0))}
  spread = np.abs(runs["a"][0] - runs["b"][0]).max()
  assert np.abs(runs["ours"][0] - runs["a"][0]).max() <= 3 * spread + 0.01
  for fn in (dci.disentanglement, dci.completeness):
    assert abs(fn(runs["ours"][0]) - fn(runs["a"][0])) <= 0.02
  assert abs(runs["ours"][2] - runs["a"][2]) <= 0.03


def test_unknown_trees_is_one_line():
  with pytest.raises(ValueError, match="trees must be"):
    dci.importance_matrix(np.zeros((4, 1)), np.zeros((4, 1)), np.zeros((4, 1)),
                          np.zeros((4, 1)), trees="xgboost")


@pytest.mark.slow  # boosted trees fitted three times: several seconds
def test_study2019_trees_are_scikit_learn_020s_fit():
  # eval.estimators='study2019' reaches the trees of DCI, the downstream task and the reduced
  # task: each equals `boosted_trees` fitted the 0.20 way, and differs from today's fit.
  rng = np.random.default_rng(3)
  y = np.stack([rng.integers(0, 3, 200), rng.integers(0, 4, 200)], 1)
  x = y + 0.8 * rng.normal(size=(200, 2))
  r, train_acc, _ = dci.importance_matrix(x, y, x, y, random_state=1, estimators="study2019")
  models = boosted_trees.fit_columns(x, y, random_state=1, estimators="study2019")
  np.testing.assert_allclose(r, np.stack([m.feature_importances for m in models], 1))
  assert train_acc == np.mean([np.mean(boosted_trees.predict(m, x) == y[:, k])
                               for k, m in enumerate(models)])
  today = dci.importance_matrix(x, y, x, y, random_state=1)[0]
  assert np.abs(today - r).max() > 1e-6
  predict = downstream.fit("gradient_boosting_classifier", x, y[:, 1], 1,
                           estimators="study2019")
  alone = boosted_trees.fit(x, y[:, 1], random_state=1, estimators="study2019")
  np.testing.assert_array_equal(predict(x), boosted_trees.predict(alone, x))
  assert downstream.predictor_settings("gradient_boosting_classifier",
                                       "study2019")["fit"].startswith("scikit-learn 0.20")
