"""Unsupervised classification accuracy: hand-computed cases and brute force."""
import itertools

import numpy as np
import pytest

from disentangle.metrics import cluster_accuracy


def test_perfect_clustering_under_relabelling():
  labels = np.array([0, 0, 1, 1, 2, 2, 2])
  clusters = np.array([7, 7, 3, 3, 9, 9, 9])
  out = cluster_accuracy(labels, clusters)
  assert out["one_to_one"] == 1.0 and out["many_to_one"] == 1.0
  assert out["mapping"] == {7: 0, 3: 1, 9: 2}


def test_small_case_by_hand():
  # contingency: cluster 0 -> {label 0: 2}; cluster 1 -> {label 0: 1, label 1: 4}
  out = cluster_accuracy([0, 0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1, 1])
  assert out["one_to_one"] == pytest.approx(6 / 7)
  assert out["many_to_one"] == pytest.approx(6 / 7)
  np.testing.assert_array_equal(out["contingency"], [[2, 0], [1, 4]])
  # Two clusters both mostly label 0: one-to-one must give one of them another label.
  out = cluster_accuracy([0, 0, 0, 0, 1, 1], [0, 0, 1, 1, 1, 0])
  # table: c0 {0: 2, 1: 1}, c1 {0: 2, 1: 1} -> best bijection 2 + 1; majority 2 + 2.
  assert out["one_to_one"] == pytest.approx(3 / 6)
  assert out["many_to_one"] == pytest.approx(4 / 6)


def test_more_and_fewer_clusters_than_labels():
  out = cluster_accuracy([0, 0, 1, 1], [0, 1, 2, 3])
  assert out["one_to_one"] == 0.5 and out["many_to_one"] == 1.0
  assert out["num_clusters"] == 4 and out["num_labels"] == 2 and len(out["mapping"]) == 2
  out = cluster_accuracy([0, 1, 2, 0, 1, 2], [0, 0, 0, 0, 0, 0])
  assert out["one_to_one"] == pytest.approx(2 / 6) and out["many_to_one"] == pytest.approx(2 / 6)


def test_matches_brute_force_and_is_invariant_to_relabelling():
  rng = np.random.default_rng(0)
  for num_clusters in (3, 4, 5):
    labels = rng.integers(0, 4, size=60)
    clusters = rng.integers(0, num_clusters, size=60)
    best = 0
    # every injective map from the smaller side into the larger one
    for perm in itertools.permutations(range(max(4, num_clusters)), min(4, num_clusters)):
      if num_clusters <= 4:
        hits = sum(np.sum((clusters == c) & (labels == perm[c])) for c in range(num_clusters))
      else:
        hits = sum(np.sum((labels == l) & (clusters == perm[l])) for l in range(4))
      best = max(best, hits)
    out = cluster_accuracy(labels, clusters)
    assert out["one_to_one"] == pytest.approx(best / 60)
    relabelled = cluster_accuracy(rng.permutation(4)[labels] + 10,
                                  rng.permutation(num_clusters)[clusters] * 3)
    assert relabelled["one_to_one"] == pytest.approx(out["one_to_one"])
    assert relabelled["many_to_one"] == pytest.approx(out["many_to_one"])
