"""PartedVAE's factor score (``protocol='partedvae'``): known answers and a brute-force reference.

The reference below follows the authors' ``dis_by_fact_metric`` loop by loop (stats[k, d], one
group of L examples at a time, ``np.max(effective_stats, axis=0)``), sharing no code with the
implementation; the random order is the same permutation (``rng.permutation(N)``, the only draw).
"""
import numpy as np
import pytest

from disentangle.data.ground_truth import InMemoryGroundTruth
from disentangle.evaluation import encodings
from disentangle.metrics import factor_vae_score
from disentangle.metrics import registry
from disentangle.metrics.factor_vae import partedvae_votes
from disentangle.metrics.representation import as_representation

SIZES = (3, 4, 5, 6)
K = len(SIZES)
COPIES = 5  # every combination 5 times: 1800 examples, 300 to 600 per factor value


def grid(copies=COPIES):
  return np.tile(np.indices(SIZES).reshape(K, -1).T, (copies, 1))


def dataset(copies=COPIES):
  factors = grid(copies)
  return InMemoryGroundTruth(factors, factors.astype(np.float32))


def brute_force(latents, factors, sizes, length, permutation, prune_std=0.1):
  """The authors' loops (stats[k, d]); returns (score, stats [D, K'])."""
  d = latents.shape[1]
  used = [k for k, s in enumerate(sizes) if s > 1]
  stds = np.std(latents, axis=0, keepdims=True)
  normalized = latents / stds
  stats = np.zeros((len(used), d))
  for f, k in enumerate(used):
    for val in range(sizes[k]):
      all_fk = [i for i in permutation if factors[i, k] == val]
      for g in range(len(all_fk) // length):
        current = all_fk[g * length:(g + 1) * length]
        variances = np.var(normalized[current], axis=0)
        stats[f, np.argmin(variances)] += 1
  effective = stats.copy()
  for j in range(d):
    if stds[0, j] < prune_std:
      effective[:, j] = 0
  return np.sum(np.max(effective, axis=0)) / np.sum(effective), stats.T


def expected_groups(length=100, copies=COPIES):
  n = np.prod(SIZES) * copies
  return [s * ((n // s) // length) for s in SIZES]


def test_identity_scores_one_with_every_setting():
  out = factor_vae_score(dataset(), lambda x: x, np.random.default_rng(0), protocol="partedvae")
  assert out["score"] == 1.0
  groups = expected_groups()  # [18, 16, 15, 18]: 600/100 x 3, 450/100 x 4, 360/100 x 5, ...
  np.testing.assert_array_equal(out["votes"], np.diag(groups))
  assert out["num_votes"] == sum(groups) == out["num_votes_counted"]
  assert out["groups_per_factor"] == groups
  n = 1800
  assert out["dropped_examples"] == [n - 100 * g for g in groups]  # [0, 200, 300, 0]
  assert out["batch_size"] == 100 and out["prune_std"] == 0.1
  assert out["std_ddof"] == 0 and out["variance_ddof"] == 0
  assert out["num_points"] == n and out["points_source"] == "whole_dataset"
  assert out["use_discrete"] is False and out["pruned_dims"] == [] and out["factors_used"] == [
      0, 1, 2, 3]
  np.testing.assert_allclose(out["std"], grid().std(axis=0))


def test_small_std_dimension_votes_leave_numerator_and_denominator():
  # dims: f0, f1, 0.01 (f2 + f3) (std 0.022 < 0.1: pruned), a constant. The small dimension is
  # the only one that moves with f2 or f3, so it wins every vote of both (normalised local
  # variance ~0.5 against ~1 for f0, f1): before pruning V = diag(n0, n1) + row 2 = (0, 0, n2,
  # n3). Pruned, its votes leave both sums: score 1. Kept in the denominator it would be
  # (n0 + n1) / sum; not pruned at all, (n0 + n1 + max(n2, n3)) / sum.
  def rep(x):
    return np.stack([x[:, 0], x[:, 1], 0.01 * (x[:, 2] + x[:, 3]), np.full(len(x), 5.0)], 1)
  out = factor_vae_score(dataset(), rep, np.random.default_rng(1), protocol="partedvae")
  n0, n1, n2, n3 = expected_groups()
  want = np.zeros((4, K), int)
  want[0, 0], want[1, 1], want[2, 2], want[2, 3] = n0, n1, n2, n3
  np.testing.assert_array_equal(out["votes"], want)
  assert out["pruned_dims"] == [2, 3] and out["constant_dims"] == [3]
  assert out["kept_dims"] == [0, 1]
  assert out["num_votes_counted"] == n0 + n1
  assert out["score"] == 1.0
  # The alternatives the protocol rules out give other numbers on this case.
  assert (n0 + n1) / want.sum() < 1.0 and (n0 + n1 + max(n2, n3)) / want.sum() < 1.0


def test_equals_the_authors_loops_on_a_noisy_representation():
  factors = grid()
  rng = np.random.default_rng(7)
  mix = rng.standard_normal((K, 5))
  latents = factors @ mix + 0.7 * rng.standard_normal((len(factors), 5))
  latents[:, 4] *= 0.02  # a small dimension: pruned (std < 0.1)
  rep = as_representation(latents)
  encoded = encodings.EncodedGroundTruth(factors, rep, SIZES)
  for length, seed in ((100, 0), (37, 3)):
    out = factor_vae_score(encoded, encoded.represent, np.random.default_rng(seed),
                           protocol="partedvae", batch_size=length)
    assert out["points_source"] == "whole_dataset_encodings"
    permutation = np.random.default_rng(seed).permutation(len(factors))
    score, stats = brute_force(latents, factors, SIZES, length, permutation)
    np.testing.assert_array_equal(out["votes"], stats)
    assert out["score"] == pytest.approx(score, rel=1e-12)
    assert 0.0 < out["score"] < 1.0 and 4 in out["pruned_dims"]


def test_votes_depend_on_the_seeded_order_only():
  factors = grid()
  latents = np.random.default_rng(2).standard_normal((len(factors), 3))
  a = partedvae_votes(latents, factors, [0, 1, 2, 3], 50, np.random.default_rng(4))[0]
  b = partedvae_votes(latents, factors, [0, 1, 2, 3], 50, np.random.default_rng(4))[0]
  c = partedvae_votes(latents, factors, [0, 1, 2, 3], 50, np.random.default_rng(5))[0]
  np.testing.assert_array_equal(a, b)
  assert not np.array_equal(a, c)
  assert a.sum() == c.sum() == sum(s * ((1800 // s) // 50) for s in SIZES)


def test_settings_the_protocol_fixes_are_refused():
  with pytest.raises(ValueError, match="partedvae"):
    factor_vae_score(dataset(), lambda x: x, np.random.default_rng(0), protocol="partedvae",
                     num_votes=800)


def test_registered_partedvae_score_and_labelled_cascadevae_variants():
  factors = grid(2)
  latents = factors.astype(np.float64)
  discrete = factors[:, 0]  # the discrete code carries factor 0
  rep = as_representation({"mean": latents[:, 1:], "discrete": discrete})
  encoded = encodings.EncodedGroundTruth(factors, rep, SIZES)
  inputs = registry.Inputs("run", np.random.default_rng(0), ground_truth=encoded,
                           represent=encoded.represent, factors=factors, factor_rep=rep,
                           factor_points="whole_dataset")
  out, _ = registry.run(inputs, {}, names=["factor_score", "factor_score_partedvae",
                                           "factor_score_no_discrete"],
                        overrides={"factor_score": {"num_votes": 200},
                                   "factor_score_no_discrete": {"num_votes": 200}})
  # With d (CascadeVAE's protocol): every factor has its dimension, score 1.
  assert out["factor_score"]["use_discrete"] is True and out["factor_score"]["value"] == 1.0
  # Without d: factor 0's votes go to the continuous dims: lower, and labelled.
  nd = out["factor_score_no_discrete"]
  assert nd["use_discrete"] is False and nd["value"] < 1.0
  assert nd["stream"] == {"entropy": 0, "spawn_key": [], "metric": "factor_score_no_discrete",
                          "repeat": 0}
  # PartedVAE's: means only (3 dims: factors 1-3), factor 0's groups vote somewhere else.
  pv = out["factor_score_partedvae"]
  assert pv["protocol"] == "partedvae" and pv["votes"].shape == (3, K)
  assert pv["value"] == pytest.approx(
      brute_force(latents[:, 1:], factors, SIZES, 100,
                  registry.metric_rng(np.random.default_rng(0), "factor_score_partedvae")
                  .permutation(len(factors)))[0])
  # Each metric has its own stream: factor_score alone gives the same votes.
  alone = registry.Inputs("run", np.random.default_rng(0), ground_truth=encoded,
                          represent=encoded.represent, factors=factors, factor_rep=rep,
                          factor_points="whole_dataset")
  by_itself, _ = registry.run(alone, {}, names=["factor_score"],
                              overrides={"factor_score": {"num_votes": 200}})
  np.testing.assert_array_equal(by_itself["factor_score"]["votes"], out["factor_score"]["votes"])
  # A representation without a discrete code has no separate 'no d' score.
  plain = rep._replace(discrete=None)
  inputs = registry.Inputs("run", np.random.default_rng(0), ground_truth=encoded,
                           represent=encoded.represent, factors=factors, factor_rep=plain)
  out, _ = registry.run(inputs, {}, names=["factor_score_no_discrete"])
  assert "factor_score_no_discrete" not in out


@pytest.mark.slow
def test_evaluator_reports_the_partedvae_metrics_and_pictures(tmp_path):
  import json  # pylint: disable=g-import-not-at-top

  import jax  # pylint: disable=g-import-not-at-top

  from disentangle import methods  # pylint: disable=g-import-not-at-top
  from disentangle.evaluation import evaluator as evaluator_lib  # pylint: disable=g-import-not-at-top
  from tests import helpers  # pylint: disable=g-import-not-at-top
  try:
    config = helpers.tiny_config("partedvae", **{
        "eval.num_points": 0, "eval.num_images": 8, "eval.information": False,
        "eval.factor_score": True, "eval.factor_score_votes": 40,
        "eval.partedvae_score": True})
  except Exception as e:  # pylint: disable=broad-except
    pytest.skip(f"partedvae not available: {e}")
  config.parted.discrete_sizes = (3,)
  config.parted.u_dim = 1
  config.parted.num_labelled = 0
  sizes = (3, 4, 4)
  factors = np.tile(np.indices(sizes).reshape(3, -1).T, (5, 1))  # 240 examples
  images = np.zeros((len(factors), 32, 32, 1), np.float32)
  for i, (s, x, y) in enumerate(factors):
    images[i, 4 + 6 * y:8 + 6 * y + 2 * s, 4 + 6 * x:8 + 6 * x + 2 * s] = 1.0
  data = InMemoryGroundTruth(factors, images, factor_names=("shape", "x", "y"))
  method = methods.build(config, data.image_shape)
  params = jax.jit(method.init)(jax.random.PRNGKey(0)).params
  ev = evaluator_lib.Evaluator(config, method, tmp_path, dataset=data)
  out = ev.run(params, step=3)
  # (InMemoryGroundTruth names the factors of each stored example, ``factors_of``: the evaluator
  # encodes the 240 examples once and the score reads those encodings.)
  for name in ("factor_score", "factor_score_no_discrete", "factor_score_partedvae"):
    assert 0.0 <= out[f"eval/{name}"] <= 1.0, name
  details = json.loads((tmp_path / "eval" / "step_3.json").read_text())
  pv = details["factor_score_partedvae"]
  assert pv["protocol"] == "partedvae" and pv["points_source"] == "whole_dataset_encodings"
  assert pv["num_points"] == 240 and pv["batch_size"] == 100
  assert details["factor_score"]["use_discrete"] is True
  assert details["factor_score_no_discrete"]["use_discrete"] is False
  for kind in ("z_traversal", "u_traversal", "attribute_transfer", "prior_c0", "samples"):
    assert (tmp_path / "images" / f"{kind}.png").is_file(), kind


def test_run_stage_reads_every_example_and_eval_steps_the_eval_points():
  data = dataset()  # 1800 examples
  run = registry.Inputs("run", np.random.default_rng(0), ground_truth=data,
                        represent=lambda x: x)
  out, _ = registry.run(run, {"num_points": 600}, names=["factor_score_partedvae"])
  score = out["factor_score_partedvae"]
  assert score["num_points_setting"] == "all" and score["num_points"] == 1800
  assert "every image" in registry.METRICS["factor_score_partedvae"].describe(score)
  # Eval steps: the eval points' encodings (here 600 of them), recorded as eval.num_points.
  rows = grid()[np.random.default_rng(1).choice(1800, 600, replace=False)]
  encoded = encodings.EncodedGroundTruth(rows, as_representation(rows.astype(float)), SIZES)
  training = registry.Inputs("training", np.random.default_rng(0), ground_truth=encoded,
                             represent=encoded.represent, factors=rows,
                             factor_rep=encoded.rep, whole_dataset_max=600)
  out, _ = registry.run(training, {"num_points": 600, "partedvae_score": True},
                        names=["factor_score_partedvae"])
  assert out["factor_score_partedvae"]["num_points_setting"] == 600
  assert out["factor_score_partedvae"]["num_points"] == 600


def test_run_stage_refuses_a_set_it_cannot_read_whole():
  class Sampler:  # ground truth that only samples: no rows of its examples
    factor_sizes = SIZES

    def sample_factors(self, num, rng):
      return np.stack([rng.integers(0, s, num) for s in SIZES], axis=1)

    def sample_observations_from_factors(self, factors, rng):
      del rng
      return np.asarray(factors, np.float32)

  errors = {}
  inputs = registry.Inputs("run", np.random.default_rng(0), ground_truth=Sampler(),
                           represent=lambda x: x)
  out, _ = registry.run(inputs, {}, names=["factor_score_partedvae"], errors=errors)
  assert "factor_score_partedvae" not in out
  assert "reads every image" in errors["factor_score_partedvae"]
