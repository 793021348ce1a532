"""Locatello et al. 2019b's unfairness (`metrics.dlib.fairness`): closed forms, bad input."""
import numpy as np
import pytest

from disentangle.metrics import registry
from disentangle.metrics.dlib import fairness
from tests import synthetic_factors as syn

ON = {"fairness_dlib": True}  # switched on in the run stage by its eval field


def _brute_force(counts):
  """Sum_c P(c) TV(P(pred | c), P(pred)) and max_c TV, one loop per class."""
  n = counts.sum()
  overall = [counts[k].sum() / n for k in range(counts.shape[0])]
  tvs, weights = [], []
  for c in range(counts.shape[1]):
    m = counts[:, c].sum()
    tvs.append(0.5 * sum(abs(counts[k, c] / m - overall[k]) for k in range(counts.shape[0])))
    weights.append(m / n)
  return sum(w * t for w, t in zip(weights, tvs)), max(tvs)


def test_inter_group_fairness_against_hand_and_brute_force():
  # disentanglement_lib's case: overall 1/3, 2/3; classes (0, 1) and (1/2, 1/2): TV 1/3, 1/6.
  mean, worst = fairness.inter_group_fairness(np.array([[0, 100], [100, 100]]))
  assert mean == pytest.approx(2 / 9) and worst == pytest.approx(1 / 3)
  rng = np.random.default_rng(0)
  for shape in ((2, 3), (4, 2), (5, 5)):
    counts = rng.integers(0, 50, size=shape)
    counts[0] += 1  # no empty sensitive class
    np.testing.assert_allclose(fairness.inter_group_fairness(counts),
                               _brute_force(counts), rtol=1e-12)


def test_summary_of_a_matrix_as_disentanglement_lib():
  scores = np.array([[0., 2., 4.], [4., 0., 8.], [2., 10., 0.]])
  out = fairness.summarize(scores)
  expected = {"pred0:sens1": 2., "pred0:sens2": 4., "pred1:sens0": 4., "pred1:sens2": 8.,
              "pred2:sens0": 2., "pred2:sens1": 10., "pred0:mean_sens": 3., "pred0:max_sens": 4.,
              "pred1:mean_sens": 6., "pred1:max_sens": 8., "pred2:mean_sens": 6.,
              "pred2:max_sens": 10., "sens0:mean_pred": 3., "sens0:max_pred": 4.,
              "sens1:mean_pred": 6., "sens1:max_pred": 10., "sens2:mean_pred": 6.,
              "sens2:max_pred": 8., "mean_sens:mean_pred": 5., "mean_sens:max_pred": 22. / 3.,
              "max_sens:mean_pred": 6., "max_sens:max_pred": 10., "mean_pred:mean_sens": 5.,
              "mean_pred:max_sens": 22. / 3., "max_pred:mean_sens": 6., "max_pred:max_sens": 10.}
  assert out.keys() == expected.keys()
  for k, v in expected.items():
    assert out[k] == pytest.approx(v), k


def _factor_0(x):
  """A code of factor 0 alone."""
  return syn.identity(x)[:, :1]


def test_a_code_of_factor_0_alone_is_fair_towards_every_other_factor():
  """Every prediction reads factor 0 only: an intervention on factor 1 or 2 leaves each row's
  prediction as it was, so TV = 0; intervening on factor 0 sends all N rows of class c to one
  prediction f(c), so TV_c = 1 - #{c': f(c') = f(c)} / |C|."""
  data = syn.dataset()
  out = fairness.unfairness(data, _factor_0, np.random.default_rng(0), [0, 1, 2], num_train=200,
                            num_test_points_per_class=30)
  for name in ("mean_fairness", "max_fairness"):
    m = out[name]
    assert (m[:, 1:] == 0).all() and (np.diag(m) == 0).all(), name
  for i in (1, 2):
    counts = np.array(out["counts"][f"pred{i}:sens0"])
    assert ((counts == 0) | (counts == 30)).all() and (counts.sum(axis=0) == 30).all()
    f = counts.argmax(axis=0)
    tv = 1.0 - np.array([np.mean(f == f[c]) for c in range(len(f))])
    assert out["mean_fairness"][i, 0] == pytest.approx(tv.mean())
    assert out["max_fairness"][i, 0] == pytest.approx(tv.max())


def test_registered_metric_records_settings_and_one_factor_is_one_line():
  # The code and training size of the test above: the same compiled boosted-trees stage.
  over = {"fairness_dlib": {"num_train": 200, "num_test_points_per_class": 20}}
  out, _ = registry.run(syn.inputs(_factor_0), ON, names=["fairness_dlib"], overrides=over)
  m = out["fairness_dlib"]
  assert m["value"] == m["scores"]["mean_fairness"]["mean_pred:mean_sens"]
  assert m["value_is"] == "mean_fairness:mean_pred:mean_sens"
  assert (m["num_train"], m["num_test_points_per_class"]) == (200, 20)
  assert m["estimator"]["estimator"] == "GradientBoostingClassifier"
  assert np.shape(m["mean_fairness_matrix"]) == (3, 3)
  assert isinstance(registry.METRICS["fairness_dlib"].describe(m), str)
  errors = {}
  out, _ = registry.run(syn.inputs(syn.identity, syn.dataset(sizes=(3, 1))), ON,
                        names=["fairness_dlib", "modularity"], errors=errors,
                        overrides=dict(over, modularity={"num_train": 30, "num_test": 30}))
  assert errors == {"fairness_dlib": "fairness_dlib: needs at least 2 factors with more than one "
                                     "value (a target and a sensitive one); the set's "
                                     "factor_sizes are [3, 1]"}
  assert set(out) == {"modularity"}  # the other metric of the stage still runs
