"""eval.representation: disentanglement_lib's suite on the mean, on a sample, or on both."""
import zlib

import numpy as np
import pytest

from disentangle import config as config_lib
from disentangle.metrics import postprocess
from disentangle.metrics import registry
from disentangle.metrics.representation import MetricInputError
from disentangle.metrics.representation import as_representation
from tests import synthetic_factors as syn

NAMES = ("mig", "dci", "beta_vae", "unsupervised", "downstream_trees", "fairness_dlib")
FLAGS = {"downstream": True, "fairness_dlib": True}
# The boosted trees (DCI, downstream, fairness) all fit 100 points: one compiled shape.
OVER = syn.small_settings(mig={"num_points": 300}, dci=dict(num_train=100, num_test=100),
                          fairness_dlib=dict(num_train=100, num_test_points_per_class=20),
                          downstream_trees=dict(num_train=(100,), num_points=100, num_test=100))


def gaussian(x):
  """A posterior per point: means mixing the factors, log-variances depending on them."""
  x = syn.identity(x)
  return {"mean": syn.mixed(x), "logvar": -1.0 + 0.3 * x[:, ::-1]}


def with_noise(name):
  """z = mu + sigma eps, eps drawn here in call order from the stream the evaluation documents
  for metric ``name``: SeedSequence(the evaluation's entropy, spawn key (crc32('sampled:' +
  name), repeat 0)); `syn.inputs` seeds the evaluation with [0, 1]."""
  gen = np.random.default_rng(np.random.SeedSequence(
      [0, 1], spawn_key=(zlib.crc32(f"sampled:{name}".encode()), 0)))

  def fn(x):
    post = gaussian(x)
    eps = gen.standard_normal(post["mean"].shape)
    return post["mean"] + np.exp(post["logvar"] / 2.0) * eps
  return fn


def _scores(represent, representation, names):
  out, _ = registry.run(syn.inputs(represent), dict(FLAGS, representation=representation),
                        names=names, overrides=OVER)
  return out


@pytest.mark.slow  # six metrics five times each, three of them boosted trees: several seconds
def test_sampled_scores_the_metric_on_mu_plus_sigma_eps_and_both_scores_both():
  sampled = _scores(gaussian, "sampled", NAMES)
  mean = _scores(gaussian, "mean", NAMES)
  both = _scores(gaussian, "both", NAMES)
  assert set(sampled) == set(mean) == set(both) == set(NAMES)
  for name in NAMES:
    ref = _scores(with_noise(name), "mean", (name,))[name]
    assert sampled[name]["representation"] == "sampled", name
    np.testing.assert_allclose(sampled[name]["value"], ref["value"], rtol=1e-12, err_msg=name)
    assert "representation" not in mean[name]
    assert both[name]["representation"] == "mean"
    assert both[name]["value"] == mean[name]["value"], name
    assert both[name]["sampled"]["value"] == sampled[name]["value"], name
    assert postprocess.value_of(both[name], "sampled") == sampled[name]["value"]
    assert postprocess.value_of(sampled[name], "mean") is None
  # The noise moves the numbers (the test could fail): the sample is not the mean.
  assert any(abs(mean[n]["value"] - sampled[n]["value"]) > 1e-3 for n in NAMES)


def test_the_other_metrics_read_the_mean_and_bad_settings_are_one_line(monkeypatch):
  # A metric outside disentanglement_lib's suite (postprocessed False) reads the mean under
  # 'sampled' and 'both'; in the run stage only.
  probe = lambda inputs, s: {"value": float(as_representation(inputs.represent(
      np.ones((4, 3)))).mean.sum())}
  for name, post in (("probe_mean", False), ("probe_post", True)):
    monkeypatch.setitem(registry.METRICS, name, registry.Metric(name, name, probe,
                                                                postprocessed=post))
  exact = float(syn.mixed(np.ones((4, 3))).sum())
  for choice in ("sampled", "both"):
    out = _scores(gaussian, choice, ("probe_mean", "probe_post"))
    assert out["probe_mean"]["value"] == exact and "representation" not in out["probe_mean"]
    moved = out["probe_post"]["value"] if choice == "sampled" else (
        out["probe_post"]["sampled"]["value"])
    assert moved != exact
  training, _ = registry.run(registry.Inputs("training", np.random.default_rng(0),
                                             represent=gaussian),
                             {"representation": "sampled"}, names=("probe_post",))
  assert training["probe_post"]["value"] == exact
  with pytest.raises(MetricInputError, match="log-variance"):
    postprocess.sample(syn.as_rep(np.zeros((3, 2))), np.random.default_rng(0))
  c = config_lib.base_config()
  c.eval.representation = "posterior"
  with pytest.raises(config_lib.ConfigError, match="eval.representation"):
    config_lib.validate(c, config_lib.base_config())
