"""disentanglement_lib's suite in the registry: listed, described, labelled, bad input."""
import numpy as np
import pytest

from disentangle.metrics import registry, suite
from tests import synthetic_factors as syn

OVER = syn.small_settings(udr_sample={"num_points": 100})


@pytest.mark.slow
def test_the_registry_lists_the_suite_and_each_result_has_protocol_and_settings():
  assert set(suite.NAMES) <= set(registry.METRICS)
  out, timings = registry.run(syn.inputs(syn.code_carries_factor0), {}, names=suite.NAMES,
                              overrides=OVER)
  assert set(out) == set(suite.NAMES)
  for name in suite.NAMES:
    m = out[name]
    assert m["protocol"].startswith("disentanglement_lib"), name
    assert m["stream"]["metric"] == name and f"{name}_s" in timings
    assert isinstance(registry.METRICS[name].describe(m), str)
    assert isinstance(registry.METRICS[name].log_values(m), dict)
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
  out, _ = registry.run(syn.inputs(nan_sometimes), {}, names=suite.NAMES + ("mig", "ok"),
                        overrides=dict(OVER, mig={"num_points": 200}), errors=errors)
  assert set(errors) == set(suite.NAMES) | {"mig"} and out == {"ok": {"value": 0.5, "stream": {
      "entropy": [0, 1], "spawn_key": [], "metric": "ok", "repeat": 0}}}
  for name, line in errors.items():
    assert line.startswith(f"{name}: the representation has NaN") and "\n" not in line
  # No ground truth (MNIST): every metric needing factors says so; the unsupervised scores run
  # on the eval points.
  errors = {}
  rep = syn.as_rep(np.random.default_rng(0).normal(size=(100, 3)))
  out, _ = registry.run(registry.Inputs("run", np.random.default_rng(0), rep=rep), {},
                        names=suite.NAMES, overrides=OVER, errors=errors)
  assert set(out) == {"unsupervised"}
  assert all(line.endswith("needs ground-truth factors; the evaluation data has none")
             for line in errors.values()) and len(errors) == len(suite.NAMES) - 1
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
  out, _ = registry.run(syn.inputs(syn.identity, data), {}, names=suite.NAMES, overrides=OVER,
                        errors=errors)
  assert out == {} and set(errors) == set(suite.NAMES)
  for name, line in errors.items():
    assert line.startswith(f"{name}: the evaluated set does not hold every factor combination")
    assert "no encoded example has factors" in line and "\n" not in line
