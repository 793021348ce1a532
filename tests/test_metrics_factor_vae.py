"""FactorVAE score (CascadeVAE supp. C): known answers on a full factor grid."""
import itertools

import numpy as np
import pytest

from disentangle.data.ground_truth import InMemoryGroundTruth
from disentangle.metrics import Representation
from disentangle.metrics import encode_in_batches
from disentangle.metrics import factor_vae_score
from disentangle.metrics.factor_vae import pairwise_discrete_variance
from disentangle.metrics.factor_vae import score_from_votes

SIZES = (3, 4, 5, 6)
K = len(SIZES)


def grid_dataset(noise=0.05, seed=0):
  """Every combination of 4 factors once; observation = factor values + a little fixed noise."""
  factors = np.indices(SIZES).reshape(K, -1).T
  rng = np.random.default_rng(seed)
  obs = factors + noise * rng.standard_normal(factors.shape)
  return InMemoryGroundTruth(factors, obs.astype(np.float32))


def test_pairwise_discrete_variance_brute_force():
  rng = np.random.default_rng(0)
  codes = rng.integers(0, 4, size=(3, 17))
  want = [sum(a != b for a, b in itertools.product(row, row)) / (2 * 17 * 16) for row in codes]
  np.testing.assert_allclose(pairwise_discrete_variance(codes), want, rtol=1e-12)
  # The supplement's normalisation: for a 0/1 code it is the ddof=1 variance (continuous form).
  binary = rng.integers(0, 2, size=50)
  np.testing.assert_allclose(pairwise_discrete_variance(binary), np.var(binary, ddof=1))
  # And the continuous form 1/(2N(N-1)) sum (x_p - x_q)^2 is the ddof=1 variance.
  x = rng.standard_normal(20)
  pair = np.sum((x[:, None] - x[None]) ** 2) / (2 * 20 * 19)
  np.testing.assert_allclose(pair, np.var(x, ddof=1))


def test_score_from_votes_by_hand():
  votes = np.array([[10, 2, 0], [0, 5, 5], [1, 0, 7]])
  assert score_from_votes(votes) == pytest.approx((10 + 5 + 7) / 30)


def test_identity_scores_one_with_settings():
  out = factor_vae_score(grid_dataset(), lambda x: x, np.random.default_rng(0))
  assert out["score"] == 1.0
  assert out["protocol"] == "cascadevae"
  assert out["num_votes"] == 800 and out["batch_size"] == 100
  assert out["variance_source"] == "whole_dataset" and out["num_variance_points"] == 360
  assert out["vote_source"] == "dataset_encodings"
  np.testing.assert_array_equal(out["votes"], 200 * np.eye(K, dtype=int))  # 800 = 200 x 4
  assert out["kept_dims"] == [0, 1, 2, 3] and not out["kl_pruning_applied"]


def test_identity_with_fresh_samples_scores_one():
  out = factor_vae_score(grid_dataset(), lambda x: x, np.random.default_rng(1),
                         num_variance_points=300, num_votes=200, encode_batch_size=250)
  assert out["vote_source"] == "fresh_samples" and out["variance_source"] == "sample"
  assert out["score"] == 1.0 and out["votes"].sum() == 200


def test_input_independent_representation_scores_chance():
  noise_rng = np.random.default_rng(5)
  out = factor_vae_score(grid_dataset(), lambda x: noise_rng.standard_normal(x.shape),
                         np.random.default_rng(2))
  # Under the null every vote picks a dimension uniformly, whatever the factor: 1/K plus the
  # upward bias of sum_j max_k V_jk. Reference distribution by simulating such vote matrices.
  sim = np.random.default_rng(0)
  null = [score_from_votes(np.stack([sim.multinomial(200, [1 / K] * K) for _ in range(K)], 1))
          for _ in range(400)]
  lo, hi = np.quantile(null, [0.001, 0.999])
  assert 1 / K < np.mean(null) < 1 / K + 0.08
  assert lo <= out["score"] <= hi


def test_duplicated_and_dropped_factor_scores_k_minus_one_over_k():
  # dims: f0 (+noise), f0 (+other noise), f1, f2; f3 is dropped. Factor 0 votes split between
  # the two copies, factor 3 votes land at random: each dimension's majority is its own factor
  # (factor 0's 200 votes split ~100/100 still beat factor 3's ~50), score (K - 1) / K.
  rng = np.random.default_rng(3)
  def rep(x):
    extra = np.rint(x[:, :1]) + 0.05 * rng.standard_normal((len(x), 1))  # as noisy as x[:, 0]
    return np.concatenate([x[:, :1], extra, x[:, 1:3]], axis=1)
  out = factor_vae_score(grid_dataset(), rep, np.random.default_rng(4))
  assert out["score"] == pytest.approx((K - 1) / K, abs=0.04)
  assert out["votes"][2, 1] == 200 and out["votes"][3, 2] == 200


def test_discrete_dimension_wins_its_factor():
  def rep(x):
    return Representation(mean=x[:, 1:], discrete=np.rint(x[:, 0]).astype(np.int64))
  out = factor_vae_score(grid_dataset(), rep, np.random.default_rng(5))
  assert out["discrete_dim"] == 3
  assert out["votes"][3, 0] == 200  # factor 0 always votes for the discrete dimension
  assert out["score"] == 1.0


@pytest.mark.parametrize("protocol", ["cascadevae", "disentanglement_lib"])
def test_each_of_several_discrete_codes_is_a_dimension(protocol):
  # Two codes carry factors 0 and 1, the two mean dimensions factors 2 and 3 (the first code
  # alone would leave factor 1 without a dimension of its own).
  def rep(x):
    codes = np.rint(x[:, :2]).astype(np.int64)
    return Representation(mean=x[:, 2:], discrete_codes=codes)
  out = factor_vae_score(grid_dataset(), rep, np.random.default_rng(5), protocol=protocol,
                         **({} if protocol == "cascadevae" else
                            {"num_votes": 300, "num_eval_votes": 150}))
  assert out["discrete_dim"] == 2 and out["num_discrete_dims"] == 2
  assert out["votes"].shape == (4, 4)
  np.testing.assert_array_equal(np.argmax(out["votes"], axis=0), [2, 3, 0, 1])
  assert out["score"] == 1.0


def test_kl_pruning_removes_collapsed_dimension():
  rng = np.random.default_rng(6)
  def rep(x):
    n = len(x)
    collapsed = 1e-3 * rng.standard_normal((n, 1))  # mean ~ 0, logvar 0: KL ~ 0
    mean = np.concatenate([x / np.array(SIZES), collapsed], axis=1)
    logvar = np.concatenate([np.full((n, K), -6.0), np.zeros((n, 1))], axis=1)
    return Representation(mean=mean, logvar=logvar)
  out = factor_vae_score(grid_dataset(), rep, np.random.default_rng(7))
  assert out["kl_pruning_applied"] and out["prune_kl"] == 0.1
  assert out["pruned_dims"] == [4] and out["kept_dims"] == [0, 1, 2, 3]
  assert out["kl_per_dim"][4] < 1e-5 and np.all(out["kl_per_dim"][:4] > 0.1)
  assert out["votes"][4].sum() == 0 and out["score"] == 1.0
  kept_all = factor_vae_score(grid_dataset(), rep, np.random.default_rng(7), prune_kl=-1.0)
  assert kept_all["kept_dims"] == [0, 1, 2, 3, 4]


def test_disentanglement_lib_protocol():
  def rep(x):  # dim 4 has std 0.01 < 0.05: pruned by that protocol
    return np.concatenate([x, 0.01 * x[:, :1]], axis=1)
  out = factor_vae_score(grid_dataset(), rep, np.random.default_rng(8),
                         protocol="disentanglement_lib", num_votes=400, num_eval_votes=200)
  assert out["batch_size"] == 64 and out["prune_std"] == 0.05
  assert out["num_variance_points"] == 10_000
  assert out["vote_source"] == "fresh_samples"
  assert out["pruned_dims"] == [4]
  assert out["votes"].sum() == 400 and out["eval_votes"].sum() == 200
  assert out["train_accuracy"] == 1.0 and out["eval_accuracy"] == 1.0 and out["score"] == 1.0
  np.testing.assert_array_equal(out["classifier"][:4], [0, 1, 2, 3])


def test_encode_in_batches_pads_every_call():
  seen = []
  def fn(x):
    seen.append(len(x))
    return Representation(mean=x[:, :2], logvar=x[:, :2] * 0, discrete=x[:, 0].astype(int))
  x = np.arange(23 * 2, dtype=np.float32).reshape(23, 2)
  rep = encode_in_batches(fn, x, 10)
  assert seen == [10, 10, 10]
  np.testing.assert_array_equal(rep.mean, x)
  np.testing.assert_array_equal(rep.discrete, x[:, 0].astype(int))
