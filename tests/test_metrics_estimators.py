"""The suite's scikit-learn classifiers today and as the 2019 study ran them; fits counted."""
import warnings

import numpy as np
import pytest
from sklearn import ensemble
from sklearn import exceptions
from sklearn import linear_model
from sklearn import model_selection
from sklearn import svm

from disentangle.evaluation import report
from disentangle.metrics import estimators
from disentangle.metrics import registry
from tests import synthetic_factors as syn

OVER = syn.small_settings()


def _classes(n=600, seed=0):
  gen = np.random.default_rng(seed)
  x = gen.normal(size=(n, 4))
  y = np.digitize(x[:, 0] + 0.5 * x[:, 1] + 0.3 * gen.normal(size=n), [-1.0, 0.0, 1.0])
  return x, y


def test_study2019_logistic_regression_is_liblinear_one_vs_rest():
  x, y = _classes()
  ours = estimators.fit(estimators.logistic_regression("study2019"), x, y)
  # 0.20's default, multi_class='ovr' with liblinear: one binary liblinear problem per class
  # (class c against the rest), the probabilities each binary model's, normalised to sum to one
  # (scikit-learn 0.20, linear_model/logistic.py, predict_proba). Built here one class at a time,
  # which every release can do (later ones refuse liblinear on three or more classes).
  classes = np.unique(y)
  binary = [linear_model.LogisticRegression(solver="liblinear").fit(x, (y == c).astype(int))
            for c in classes]
  coef = np.stack([b.coef_[0] for b in binary])
  p = np.stack([b.predict_proba(x)[:, 1] for b in binary], 1)
  np.testing.assert_allclose(np.stack([e.coef_[0] for e in ours.estimators_]), coef, atol=1e-12)
  np.testing.assert_allclose(ours.predict_proba(x), p / p.sum(1, keepdims=True), atol=1e-12)
  # Today's default is another model: multinomial lbfgs.
  now = estimators.fit(estimators.logistic_regression("current"), x, y)
  assert now.solver == "lbfgs" and np.abs(now.predict_proba(x) - ours.predict_proba(x)).max() > 1e-3


def test_study2019_linear_svc_solves_the_dual():
  x, y = _classes()
  ours = estimators.fit(estimators.linear_svc("study2019", 0.01, "balanced"), x[:, :1], y)
  ref = svm.LinearSVC(C=0.01, class_weight="balanced", dual=True, random_state=0).fit(x[:, :1], y)
  np.testing.assert_array_equal(ours.coef_, ref.coef_)
  assert estimators.linear_svc_settings("study2019", 0.01)["dual"] is True
  assert estimators.linear_svc_settings("current", 0.01)["dual"] == "auto"


def test_logistic_regression_cv_picks_c_by_fold_accuracy_and_warns_nothing():
  """disentanglement_lib's downstream predictor keeps its fit on every release: an L2 penalty
  and each C scored by the folds' mean accuracy (later releases change both defaults and warn
  that they will)."""
  x, y = _classes(n=200, seed=3)
  with warnings.catch_warnings():
    warnings.simplefilter("error", FutureWarning)
    model = estimators.logistic_regression_cv("current", cs=4, folds=3).fit(x, y)
  folds = list(model_selection.KFold(n_splits=3).split(x))
  accuracy = [np.mean([linear_model.LogisticRegression(C=c).fit(x[a], y[a]).score(x[b], y[b])
                       for a, b in folds]) for c in model.Cs_]
  assert np.ravel(model.C_)[0] == model.Cs_[int(np.argmax(accuracy))]
  assert np.ptp(accuracy) > 0  # the choice is made by the accuracies, not a tie


def test_a_fit_that_stops_at_max_iter_is_counted_and_warns_nothing():
  gen = np.random.default_rng(0)
  x = gen.normal(size=(400, 30)) * np.logspace(0, 4, 30)  # badly scaled: lbfgs needs > 100 steps
  y = (x[:, :5].sum(axis=1) > 0).astype(int) + (x[:, 5] > 0)
  log = estimators.FitLog()
  with warnings.catch_warnings():
    warnings.simplefilter("error", exceptions.ConvergenceWarning)
    estimators.fit(estimators.logistic_regression("current"), x, y, log)
    estimators.fit(estimators.logistic_regression("current"), x[:, :2] / x[:, :2].std(0), y, log)
  record = log.record(estimators.logistic_regression_settings("current"))
  assert (record["fits"], record["not_converged"], record["converged"]) == (2, 1, False)
  assert record["max_iter"] == 100 and record["solver"] == "lbfgs"


def test_gradient_boosting_importances_as_0_20_computed_them_equal_todays():
  # 0.20: sum over stages of the mean over a stage's trees of the unnormalised importances,
  # normalised; today: mean over the trees that split, normalised.
  x, y = _classes(300)
  model = ensemble.GradientBoostingClassifier(n_estimators=20, random_state=0).fit(x, y)
  total = sum(np.mean([t.tree_.compute_feature_importances(normalize=False) for t in stage],
                      axis=0) for stage in model.estimators_)
  np.testing.assert_allclose(total / total.sum(), model.feature_importances_, rtol=1e-12)


@pytest.mark.slow
def test_the_suite_records_the_estimators_and_study2019_changes_the_classifiers():
  names = ("beta_vae", "sap", "modularity", "dci")
  runs = {e: registry.run(syn.inputs(syn.mixed), {"estimators": e}, names=names,
                          overrides=OVER)[0] for e in estimators.ESTIMATORS}
  for e, out in runs.items():
    assert out["beta_vae"]["estimator"]["solver"] == (
        "liblinear" if e == "study2019" else "lbfgs")
    assert out["modularity"]["estimator"]["multi_class"] == (
        "ovr" if e == "study2019" else "multinomial")
    assert out["sap"]["estimator"]["dual"] == (True if e == "study2019" else "auto")
    # One fit per factor for explicitness, one per latent and factor for SAP.
    factors = len(out["sap"]["factors_used"])
    assert out["modularity"]["estimator"]["fits"] == factors
    assert out["sap"]["estimator"]["fits"] == factors * out["sap"]["score_matrix"].shape[0]
    assert out["dci"]["estimator"]["implementation"] == "disentangle.metrics.boosted_trees"
    assert "boosted_trees" in out["dci"]["classifier"]
  # The same points (each metric's own stream), other classifiers: other numbers.
  assert (runs["current"]["modularity"]["explicitness_test"]
          != runs["study2019"]["modularity"]["explicitness_test"])
  # DCI's trees: today's fit, or scikit-learn 0.20's (prior start, classes in turn).
  assert runs["current"]["dci"]["value"] != runs["study2019"]["dci"]["value"]
  assert runs["study2019"]["dci"]["estimator"]["fit"].startswith("scikit-learn 0.20")
  assert runs["current"]["dci"]["estimator"]["fit"].startswith("scikit-learn >= 0.21")


def test_summary_names_metrics_without_a_value_and_fits_that_did_not_converge():
  record = estimators.FitLog()
  record.add(True)
  record.add(False)
  est = record.record(estimators.logistic_regression_settings("current"))
  results = {"run_dir": "RUN", "seed": 0, "checkpoint": {"step": 4, "final": True},
             "metrics": {"mig": {"value": 0.25}, "udr_sample": {"value": None},
                         "modularity": {"value": 0.9, "estimator": est,
                                        "by_protocol": {"a": {"estimator": est},
                                                        "b": {"estimator": est}}},
                         "not_computed": {"irs": "irs: no factor has more than one value"}}}
  lines = report.summary_lines(results)
  assert lines[0] == "RUN: seed 0 step 4 (final: True): mig 0.2500, modularity 0.9000"
  assert lines[1].startswith("  no per-run value: udr_sample")
  assert lines[2] == "  not computed: irs: no factor has more than one value"
  assert lines[3] == ("  not converged: modularity: 2 of 4 fits (LogisticRegression, lbfgs, "
                      "max_iter 100, current)")
