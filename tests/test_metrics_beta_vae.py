"""β-VAE score (disentanglement_lib's protocol) and the registered FactorVAE score of its protocol."""
import numpy as np
import pytest

from disentangle.metrics import registry
from disentangle.metrics import sampling
from disentangle.metrics.dlib import beta_vae
from tests import synthetic_factors as syn

SMALL = dict(batch_size=16, num_train=300, num_eval=300)


def score(represent, **kw):
  return beta_vae.beta_vae_score(syn.dataset(), represent, np.random.default_rng(0),
                                 **dict(SMALL, **kw))


def test_identity_scores_near_one_input_ignoring_near_chance():
  good = score(syn.identity)["disentanglement_lib"]
  assert good["train_accuracy"] >= 0.9 and good["eval_accuracy"] >= 0.9
  for bad in (syn.zeros, syn.noise()):
    out = score(bad)["disentanglement_lib"]
    assert out["eval_accuracy"] < 0.5  # chance 1/3


def test_disentanglement_lib_case_identity_batch_5():
  # beta_vae_test.py: identity observations, batch 5, 2000 / 2000 points: in [0.9, 1].
  out = score(syn.identity, batch_size=5, num_train=2000, num_eval=2000)["disentanglement_lib"]
  assert 0.9 <= out["train_accuracy"] <= 1.0 and 0.9 <= out["eval_accuracy"] <= 1.0


def test_permuted_and_rescaled_dims_still_score_high():
  assert score(syn.permuted_rescaled)["disentanglement_lib"]["eval_accuracy"] >= 0.9


def test_discrete_code_as_a_one_hot_block():
  def represent(x):  # the means carry factor 2 only, the code factor 0: 0 and 1 confused
    return {"mean": syn.identity(x)[:, 2:], "discrete": np.rint(x[:, 0]).astype(np.int64)}
  out = score(represent)
  means, both = out["disentanglement_lib"], out["disentanglement_lib+discrete_codes"]
  assert both["eval_accuracy"] >= 0.9 and means["eval_accuracy"] < 0.8
  assert both["num_features"] == 1 + 3 and means["num_features"] == 1


def test_registered_with_protocols_and_bad_input_is_one_line():
  inputs = syn.inputs(syn.code_carries_factor0)
  over = {"beta_vae": SMALL, "factor_score_dlib": dict(num_votes=300, num_eval_votes=300,
                                                        batch_size=16, num_variance_points=300)}
  out, _ = registry.run(inputs, {"use_discrete": "include"}, names=["beta_vae",
                                                                     "factor_score_dlib"],
                        overrides=over)
  for name in ("beta_vae", "factor_score_dlib"):
    m = out[name]
    assert m["protocol"] == "disentanglement_lib+discrete_codes" and m["use_discrete"]
    assert set(m["by_protocol"]) == {"disentanglement_lib", "disentanglement_lib+discrete_codes"}
    assert m["value"] == m["by_protocol"][m["protocol"]]["eval_accuracy"]
  out, _ = registry.run(syn.inputs(syn.identity), {}, names=["factor_score_dlib"],
                        overrides=over)
  assert out["factor_score_dlib"]["protocol"] == "disentanglement_lib"
  assert out["factor_score_dlib"]["value"] == 1.0
  errors = {}
  nan = lambda x: np.full(np.asarray(x).shape, np.nan)
  registry.run(syn.inputs(nan), {}, names=["beta_vae"], overrides=over, errors=errors)
  registry.run(registry.Inputs("run", np.random.default_rng(0)), {},
               names=["factor_score_dlib"], overrides=over, errors=errors)
  assert errors["beta_vae"].startswith("beta_vae: the representation has NaN")
  assert errors["factor_score_dlib"] == ("factor_score_dlib: needs ground-truth factors; the "
                                         "evaluation data has none")
  with pytest.raises(sampling.MetricInputError, match="num_train"):
    score(syn.identity, num_train=1)
