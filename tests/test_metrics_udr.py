"""UDR (Duan et al. 2020) as disentanglement_lib computes it, and per row in `aggregate`."""
import numpy as np
import pytest

from disentangle.evaluation import aggregate
from disentangle.metrics import registry
from disentangle.metrics.dlib import udr
from tests import synthetic_factors as syn


def _runs(n=500, d=4, seed=0):
  return np.random.default_rng(seed).normal(size=(n, d))


# Lasso (alpha 0.1) on standardised copies of the same latents: coefficient 1 - alpha for the
# matching latent, 0 elsewhere, so R's max^2 / sum = 1 - alpha: UDR's top with this estimator.
TOP = 1.0 - udr.LASSO_ALPHA


def test_same_permuted_or_sign_flipped_runs_score_the_top():
  z = _runs()
  other = -3.0 * z[:, ::-1] + 1.0
  out = udr.udr([z, z, other], [None] * 3)
  np.testing.assert_allclose(out["model_scores"], TOP, atol=0.01)


def test_independent_runs_score_near_zero_rotated_in_between():
  z = _runs()
  assert max(udr.udr([z, _runs(seed=1), _runs(seed=2)], [None] * 3)["model_scores"]) < 0.1
  c, s = np.cos(np.pi / 4), np.sin(np.pi / 4)
  rotated = z.copy()
  rotated[:, :2] = z[:, :2] @ np.array([[c, -s], [s, c]])
  score = udr.udr([z, rotated], [None, None])["model_scores"][0]
  assert 0.3 < score < TOP - 0.1


def test_relative_strength_closed_form_and_low_kl_latents_left_out():
  r = np.array([[1.0, 0.0], [1.0, 1.0]])
  # columns: max^2/sum = 1/2, 1; rows: 1, 1/2 -> (3/4 + 3/4) / 2.
  assert udr.relative_strength(r) == pytest.approx(0.75)
  assert udr.relative_strength(np.zeros((2, 2))) == 0.0
  z = _runs()
  z_dead = z.copy()
  z_dead[:, 3] = 1e-3 * _runs(seed=5)[:, 0]  # collapsed latent: KL below the threshold
  out = udr.udr([z, z_dead], [np.ones(4), np.array([1.0, 1.0, 1.0, 0.0])])
  assert out["informative_latents"][1] == [True, True, True, False]
  # R is 4 x 3: the columns score TOP; of the rows, the one without a partner scores 0.
  np.testing.assert_allclose(out["model_scores"], (TOP + TOP * 3 / 4) / 2, atol=0.01)
  with pytest.raises(ValueError, match="two runs"):
    udr.udr([z], [None])


def test_spearman_variant_agrees_on_a_monotone_copy():
  z = _runs()
  out = udr.udr([z, np.exp(z)], [None, None], correlation="spearman")
  # |rank correlation| 1 with the partner, ~0.04 with each of the 3 others: 1 / (1 + ~0.12).
  assert min(out["model_scores"]) > 0.8
  assert udr.udr([z, np.exp(_runs(seed=3))], [None] * 2,
                 correlation="spearman")["model_scores"][0] < 0.5


def test_udr_sample_is_the_same_points_for_every_seed_and_aggregate_scores_a_row():
  samples = []
  for seed in (0, 1, 2):
    inputs = syn.inputs(syn.identity, seed=seed)
    s = registry.run(inputs, {}, names=["udr_sample"],
                     overrides={"udr_sample": {"num_points": 200}})[0]["udr_sample"]
    samples.append((seed, s))
  np.testing.assert_array_equal(samples[0][1]["means"], samples[2][1]["means"])
  row = aggregate.udr_of_row(samples)
  assert row["correlation"] == "lasso" and row["num_points"] == 200
  np.testing.assert_allclose(list(row["per_seed"].values()), TOP, atol=0.01)
  assert aggregate.udr_of_row(samples[:1]) is None


def test_spearman_matrix_is_scipys_and_udr_reads_it():
  import scipy.stats  # pylint: disable=g-import-not-at-top
  gen = np.random.default_rng(4)
  a = gen.normal(size=(40, 3))
  b = np.column_stack([np.exp(a[:, 2]), a[:, 0] + gen.normal(size=40), gen.normal(size=40)])
  r = udr.correlation_matrix(a, b, "spearman")
  expected = np.array([[abs(scipy.stats.spearmanr(a[:, i], b[:, j])[0]) for j in range(3)]
                       for i in range(3)])
  np.testing.assert_allclose(r, expected, rtol=1e-12)
  out = udr.udr([a, b], [None, None], correlation="spearman")
  scale = lambda z: (z - z.mean(0)) / z.std(0)  # StandardScaler: ranks unchanged
  np.testing.assert_allclose(out["pairwise"][0, 1], udr.relative_strength(expected), rtol=1e-12)
  np.testing.assert_allclose(out["pairwise"][1, 0], udr.relative_strength(
      udr.correlation_matrix(scale(b), scale(a), "spearman")), rtol=1e-12)
  assert out["correlation"] == "spearman"


def _record(seed, sample, correlation):
  cfg = {"method": "betavae", "dataset": {"name": "dsprites"}, "seed": seed, "eval": {}}
  if correlation is not None:
    cfg["eval"]["udr_correlation"] = correlation
  results = {"seed": seed, "method": "betavae", "latent_dim": 4, "metrics": {"udr_sample": sample},
             "dataset": {"name": "dsprites", "class": "X", "source": "render",
                         "comparable_with_published": False},
             "checkpoint": {"step": 1, "num_steps": 1, "final": True}}
  return {"run_dir": f"run{seed}", "config": cfg, "results": results}


def test_aggregate_scores_udr_with_the_runs_eval_udr_correlation():
  z = _runs(n=200)
  samples = [{"means": m, "kl_per_dim": None, "num_points": 200, "points_seed": 1,
              "factors_checksum": 7} for m in (z, np.exp(z), -z)]
  scores = {}
  for correlation in ("spearman", None):  # a run without the field: lasso
    table = aggregate.aggregate([_record(s, m, correlation) for s, m in enumerate(samples)], [])
    row = table["rows"][0]["udr"]
    assert row["correlation"] == (correlation or "lasso")
    expected = udr.udr([s["means"] for s in samples], [None] * 3,
                       correlation=correlation or "lasso")["model_scores"]
    np.testing.assert_allclose(list(row["per_seed"].values()), expected, rtol=1e-12)
    scores[correlation] = expected
  # exp keeps the ranks (|rank correlation| 1 with the partner), not the linear fit.
  assert min(scores["spearman"]) > 0.85 and scores[None][1] < scores["spearman"][1] - 0.05
  mixed = [_record(0, samples[0], "lasso"), _record(1, samples[1], "spearman")]
  row = aggregate.aggregate(mixed, [])["rows"][0]
  assert row["udr"] is None and "eval.udr_correlation differ" in row["warning"]


def test_config_validates_eval_udr_correlation():
  from disentangle import config as config_lib  # pylint: disable=g-import-not-at-top
  schema = config_lib.base_config()
  assert schema.eval.udr_correlation == "lasso"
  good = config_lib.base_config()
  good.eval.udr_correlation = "spearman"
  config_lib.validate(good, schema)
  bad = config_lib.base_config()
  bad.eval.udr_correlation = "pearson"
  with pytest.raises(config_lib.ConfigError, match=r"eval\.udr_correlation"):
    config_lib.validate(bad, schema)
