"""disentanglement_lib's suite in the registry: listed, described, labelled, bad input."""
import numpy as np
import pytest

from disentangle.metrics import dlib
from disentangle.metrics import registry
from tests import synthetic_factors as syn

# Every boosted-trees fit on 100 training points (the trees compile once per shape of their input);
# the logistic fits on at most 20 (on separable codes they run to lbfgs' iteration limit).
OVER = syn.small_settings(udr_sample={"num_points": 100},
                          downstream_logistic=dict(num_train=(10, 20), num_points=20,
                                                   num_test=100),
                          dci=dict(num_train=100, num_test=100),
                          unified_scores=dict(num_train=100, num_test=100),
                          fairness_dlib=dict(num_train=100, num_test_points_per_class=20),
                          downstream_trees=dict(num_train=(100,), num_points=100, num_test=100))
# disentanglement_lib's later scores are switched on in the run stage by their eval fields.
ALL = {"downstream": True, "fairness_dlib": True, "unified_scores": True}
NAMES = dlib.NAMES


def test_the_papers_metrics_register_first_then_the_suite_in_the_order_of_its_names():
  # The order of registration is the order of the keys of results, reports and tables; the
  # imports of disentangle.metrics and of its dlib package fix it.
  names = list(registry.METRICS)
  first = len(names) - len(dlib.NAMES)
  assert names[first:] == list(dlib.NAMES)
  modules = [registry.METRICS[name].compute.__module__ for name in names]
  assert set(modules[:first]) == {"disentangle.metrics.papers"}
  assert all(m.startswith("disentangle.metrics.dlib.") for m in modules[first:])
  # Each family's metrics are registered by its own module, one after the other.
  family = [m.rsplit(".", 1)[1] for m in modules[first:]]
  assert family == sorted(family, key=family.index)
  assert family[0] == "factor_vae" and family[-1] == "unified"


@pytest.mark.slow
def test_the_registry_lists_the_suite_and_each_result_has_protocol_and_settings():
  assert set(NAMES) <= set(registry.METRICS)
  out, timings = registry.run(syn.inputs(syn.code_carries_factor0), ALL, names=NAMES,
                              overrides=OVER)
  assert set(out) == set(NAMES)
  for name in NAMES:
    m = out[name]
    assert m["protocol"].startswith("disentanglement_lib"), name
    assert m["stream"]["metric"] == name and f"{name}_s" in timings
    # The report's line names the points the number came from; the logged scalars are finite.
    line = registry.METRICS[name].describe(m)
    assert line and "\n" not in line
    for key in ("num_votes", "num_train", "num_points"):
      for number in np.atleast_1d(m.get(key, [])):  # one number, or the downstream sizes
        assert str(number) in line, (name, key, line)
    logged = registry.METRICS[name].log_values(m)
    if name != "udr_sample":  # no per-run value: nothing logged
      assert logged and all(np.all(np.isfinite(v)) for v in logged.values()), name
    else:
      assert logged == {} and m["value"] is None
  # Headline on the means alone ('protocol'); the discrete code beside it where it extends.
  for name in ("factor_score_dlib", "beta_vae", "sap", "dci", "modularity", "unsupervised"):
    assert out[name]["use_discrete"] is False
    assert "disentanglement_lib+discrete_codes" in out[name]["by_protocol"], name
  assert "by_protocol" not in out["irs"]


def test_bad_input_is_one_line_per_metric_and_the_others_run(monkeypatch):
  monkeypatch.setitem(registry.METRICS, "ok", registry.Metric("ok", "ok", lambda i, s: {
      "value": 0.5}))
  nan_sometimes = lambda x: np.where(np.asarray(x)[:, :1] > 1, np.nan, np.asarray(x, float))
  errors = {}
  out, _ = registry.run(syn.inputs(nan_sometimes), ALL, names=NAMES + ("mig", "ok"),
                        overrides=dict(OVER, mig={"num_points": 200}), errors=errors)
  assert set(errors) == set(NAMES) | {"mig"} and out == {"ok": {"value": 0.5, "stream": {
      "entropy": [0, 1], "spawn_key": [], "metric": "ok", "repeat": 0}}}
  for name, line in errors.items():
    assert line.startswith(f"{name}: the representation has NaN") and "\n" not in line
  # No ground truth (MNIST): every metric needing factors says so; the unsupervised scores run
  # on the eval points.
  errors = {}
  rep = syn.as_rep(np.random.default_rng(0).normal(size=(100, 3)))
  out, _ = registry.run(registry.Inputs("run", np.random.default_rng(0), rep=rep), ALL,
                        names=NAMES, overrides=OVER, errors=errors)
  assert set(out) == {"unsupervised"}
  assert all(line.endswith("needs ground-truth factors; the evaluation data has none")
             for line in errors.values()) and len(errors) == len(NAMES) - 1
  # Fewer points than a split needs.
  errors = {}
  registry.run(syn.inputs(syn.identity), {}, names=["dci"],
               overrides={"dci": {"num_train": 1, "num_test": 1}}, errors=errors)
  assert errors == {"dci": "dci: needs at least 2 points, got 1"}


def test_suite_points_scale_every_sampling_metric_and_zero_keeps_disentanglement_libs():
  own = registry.settings_of({"suite_points": 0}, "run")
  assert (own["dci"]["num_train"], own["dci"]["num_test"]) == (10_000, 5_000)
  assert (own["beta_vae"]["num_train"], own["beta_vae"]["num_eval"]) == (10_000, 5_000)
  assert own["irs"]["num_train"] == own["unsupervised"]["num_train"] == 10_000
  assert "num_votes" not in own["factor_score_dlib"]  # the function's own defaults
  small = registry.settings_of({"suite_points": 300}, "run")
  for name in ("sap", "dci", "modularity"):
    assert (small[name]["num_train"], small[name]["num_test"]) == (300, 150), name
  assert (small["beta_vae"]["num_train"], small["beta_vae"]["num_eval"]) == (300, 150)
  assert small["irs"]["num_train"] == small["unsupervised"]["num_train"] == 300
  assert (small["factor_score_dlib"]["num_votes"], small["factor_score_dlib"]["num_eval_votes"],
          small["factor_score_dlib"]["num_variance_points"]) == (300, 150, 300)


def test_a_set_without_every_factor_combination_is_one_line_per_metric(monkeypatch):
  data = syn.dataset()

  def missing(factors, rng):
    raise KeyError(f"no encoded example has factors {np.asarray(factors)[0].tolist()}")

  monkeypatch.setattr(data, "sample_observations_from_factors", missing)
  errors = {}
  out, _ = registry.run(syn.inputs(syn.identity, data), ALL, names=NAMES, overrides=OVER,
                        errors=errors)
  assert out == {} and set(errors) == set(NAMES)
  for name, line in errors.items():
    assert line.startswith(f"{name}: the evaluated set does not hold every factor combination")
    assert "no encoded example has factors" in line and "\n" not in line


def test_the_later_scores_run_only_when_their_field_is_on():
  flagged = {n: registry.METRICS[n].run_flag for n in NAMES if registry.METRICS[n].run_flag}
  assert flagged == {"downstream_logistic": "downstream", "downstream_trees": "downstream",
                     "reduced_downstream": "downstream", "strong_downstream": "downstream",
                     "fairness_dlib": "fairness_dlib", "unified_scores": "unified_scores"}
  for name, flag in flagged.items():
    assert not registry.METRICS[name].enabled({}, "run")
    assert registry.METRICS[name].enabled({flag: True}, "run")
    assert not registry.METRICS[name].enabled({flag: True}, "training")
  assert registry.METRICS["dci"].enabled({}, "run")
