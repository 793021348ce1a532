"""disentanglement_lib's downstream tasks (plain, reduced, strong): known answers, bad input."""
import numpy as np
import pytest

from disentangle.metrics import registry
from disentangle.metrics.dlib import downstream
from tests import synthetic_factors as syn

ON = {"downstream": True}  # switched on in the run stage by its eval field

CHANCE = float(np.mean([1.0 / n for n in syn.SIZES]))  # uniform factors of 3, 4, 5 values


# Every boosted-trees fit here has N training points and 3 or 4 latents: the trees compile once
# per (points, latents) shape.
N = 100


def _points(represent, n, seed):
  y = syn.identity_observations(n, np.random.default_rng(seed), num_factors=3, num_values=4)
  return represent(y), y


@pytest.mark.slow  # compiles the boosted trees
def test_identity_predicts_every_factor_and_noise_is_at_chance():
  for predictor in downstream.PREDICTORS:
    # The logistic fits on separable points run to lbfgs' iteration limit: 40 points are enough.
    n = N if predictor == "gradient_boosting_classifier" else 40
    (x_tr, y_tr), (x_te, y_te) = _points(syn.identity, n, 0), _points(syn.identity, 200, 1)
    acc = downstream.accuracies(predictor, x_tr, y_tr, x_te, y_te)
    np.testing.assert_array_equal(acc["test"], 1.0, err_msg=predictor)
    noise = syn.noise(2)
    (x_tr, y_tr), (x_te, y_te) = _points(noise, n, 0), _points(noise, 400, 1)
    acc = downstream.accuracies(predictor, x_tr, y_tr, x_te, y_te)
    assert abs(np.mean(acc["test"]) - 0.25) < 0.08, predictor


def test_registered_tasks_record_their_settings_and_sizes():
  over = {"downstream_logistic": {"num_train": (60, 120), "num_points": 120, "num_test": 100}}
  out, _ = registry.run(syn.inputs(syn.noise(0)), ON, names=["downstream_logistic"],
                        overrides=over)
  m = out["downstream_logistic"]
  assert m["value"] == m["by_size"]["120"]["mean_test_accuracy"] and m["value_num_train"] == 120
  assert abs(m["value"] - CHANCE) < 0.12
  assert m["estimator"]["estimator"] == "LogisticRegressionCV" and m["estimator"]["Cs"] == 10
  assert m["estimator"]["cv"] == "KFold(n_splits=5)" and m["estimator"]["fits"] == 2 * 3
  assert {"solver", "max_iter", "multi_class"} <= set(m["estimator"])
  assert (m["num_train"], m["num_test"], m["protocol"]) == ((60, 120), 100,
                                                           "disentanglement_lib")
  assert "120 training points" in registry.METRICS["downstream_logistic"].describe(m)


def test_suite_points_leave_out_the_larger_sizes_and_a_larger_size_is_one_line():
  own = registry.settings_of({}, "run")
  assert own["downstream_logistic"]["num_train"] == (10, 100, 1_000, 10_000)
  assert own["downstream_trees"]["num_test"] == 5_000
  small = registry.settings_of({"suite_points": 300}, "run")["downstream_trees"]
  assert (small["num_train"], small["sizes_left_out"], small["num_test"]) == (
      (10, 100), (1_000, 10_000), 150)
  monkey = {"ok": registry.Metric("ok", "ok", lambda i, s: {"value": 1.0})}
  registry.METRICS.update(monkey)
  try:
    errors = {}
    out, _ = registry.run(syn.inputs(syn.identity), ON, names=["downstream_trees", "ok"],
                          overrides={"downstream_trees": {"num_train": (10, 500),
                                                          "num_points": 300}}, errors=errors)
  finally:
    del registry.METRICS["ok"]
  assert set(out) == {"ok"}
  assert errors == {"downstream_trees": "downstream_trees: num_train size 500 is larger than the "
                                        "evaluation's 300 points (eval.suite_points)"}


@pytest.mark.slow  # compiles the boosted trees
def test_one_vs_rest_fits_folds_missing_a_class():
  # KFold without shuffling: the first fold's training rows hold no class 0.
  y = np.repeat(np.arange(5), 2)
  x = y[:, None] + np.random.default_rng(0).normal(size=(10, 1)) * 0.1
  # Today's multinomial fit: earlier scikit-learn releases (1.7) refuse a fold missing a class (a
  # ValueError, which the suite reports as not computed), later ones (1.9) fit it.
  try:
    pred = downstream.fit("logistic_regression_cv", x, y, estimators="current")(x)
  except ValueError:
    pass
  else:
    assert pred.shape == (10,) and set(pred) <= set(y)
  # The 2019 one-vs-rest fit has a binary problem per class and fits it on every release.
  pred = downstream.fit("logistic_regression_cv", x, y, estimators="study2019")(x)
  assert pred.shape == (10,) and set(pred) <= set(y)
  # A factor whose training points hold one value is predicted as that value (left out of the
  # trees, which need two classes).
  x, y = _points(syn.identity, N, 0)
  single = np.stack([y[:, 0], 0 * y[:, 0]], 1)
  acc = downstream.accuracies("gradient_boosting_classifier", x, single, x, single + [0, 1])
  assert acc["single_class_factors"] == [1] and acc["test"][1] == 0.0 and acc["test"][0] == 1.0


@pytest.mark.slow  # compiles the boosted trees
def test_reduced_task_removes_the_factors_latent():
  # Latents: the three factors and a copy of factor 0. Removing a factor's most important latent
  # leaves nothing about factors 1 and 2 (chance, 1 in 4) and the copy of factor 0 (still 1).
  copy0 = lambda y: np.hstack([syn.identity(y), syn.identity(y)[:, :1]])
  (x_tr, y_tr), (x_te, y_te) = _points(copy0, N, 0), _points(copy0, 400, 1)
  out = downstream.reduced_accuracies("gradient_boosting_classifier", x_tr, y_tr, x_te, y_te, 1)
  assert out["per_factor"][0]["removed"] in ([0], [3])
  assert [p["removed"] for p in out["per_factor"][1:]] == [[1], [2]]
  assert out["mean_test_accuracy_other_factors"] == 1.0
  reduced = [p["test_accuracy_reduced_factor"] for p in out["per_factor"]]
  assert reduced[0] == 1.0  # its copy is still there
  assert all(abs(a - 0.25) < 0.1 for a in reduced[1:]), reduced  # nothing left about it
  assert out["mean_test_accuracy_reduced_factor"] == pytest.approx(np.mean(reduced))
  with pytest.raises(registry.MetricInputError, match="num_factors_to_remove=4"):
    downstream.reduced_accuracies("gradient_boosting_classifier", x_tr, y_tr, x_te, y_te, 4)


def test_intervention_fixes_another_factor_in_training_and_avoids_its_value_in_test():
  rng = np.random.default_rng(0)
  data = syn.dataset()
  f_tr, f_te = data.sample_factors(50, rng), data.sample_factors(50, rng)
  for target in range(3):
    tr, te, j, v = downstream.intervene(f_tr, f_te, target, [0, 1, 2], syn.SIZES, rng)
    assert j != target and (tr[:, j] == v).all() and (te[:, j] != v).all()
    others = [k for k in range(3) if k != j]
    np.testing.assert_array_equal(tr[:, others], f_tr[:, others])


@pytest.mark.slow  # compiles the boosted trees
def test_strong_task_is_one_on_identity_and_drops_for_a_mixed_code():
  over = {"strong_downstream": {"num_train": (N,), "num_points": N, "num_test": 100}}
  out, _ = registry.run(syn.inputs(syn.identity), ON, names=["strong_downstream"],
                        overrides=over)
  m = out["strong_downstream"]
  assert m["value"] == m["mean_test_accuracy"] == 1.0 and m["strong_generalization_gap"] == 0.0
  assert len(m["by_size"][str(N)]["experiments"]) == 3 * m["num_experiments"] == 6
  # Factors 0 and 1 rotated into each other: with one of them fixed in training the classifier
  # of the other never sees the code move with the fixed one.
  out, _ = registry.run(syn.inputs(syn.mixed), ON, names=["strong_downstream"], overrides=over)
  assert out["strong_downstream"]["value"] < out["strong_downstream"]["mean_test_accuracy"] - 0.1
