"""Unsupervised classification accuracy of a discrete code against class labels.

The accuracy CascadeVAE (Table 3, MNIST; Table 4, FashionMNIST) and JointVAE report for the
discrete code: the fraction of examples whose cluster maps to their label. Two standard mappings:

- one-to-one: the best bijection between clusters and labels (Hungarian algorithm on the
  contingency table, `scipy.optimize.linear_sum_assignment`, maximising matched counts). With more
  clusters than labels the extra clusters stay unmatched and count as errors; with fewer, the
  extra labels do.
- many-to-one: each cluster maps to its majority label (several clusters may share a label); an
  upper bound on one-to-one.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment


def contingency_table(labels: np.ndarray, clusters: np.ndarray):
  """Counts [num_clusters, num_labels] and the sorted cluster and label values."""
  labels = np.asarray(labels).ravel()
  clusters = np.asarray(clusters).ravel()
  if labels.shape != clusters.shape:
    raise ValueError(f"labels {labels.shape} and clusters {clusters.shape} differ in length")
  label_values, li = np.unique(labels, return_inverse=True)
  cluster_values, ci = np.unique(clusters, return_inverse=True)
  nl, nc = len(label_values), len(cluster_values)
  table = np.bincount(ci * nl + li, minlength=nc * nl).reshape(nc, nl)
  return table, cluster_values, label_values


def cluster_accuracy(labels: np.ndarray, clusters: np.ndarray) -> dict:
  """Accuracy of `clusters` [N] as predictions of `labels` [N] under the best mappings.

  Returns:
    dict with 'one_to_one' (Hungarian), 'many_to_one' (majority label per cluster), 'mapping'
    (cluster -> label of the one-to-one matching; unmatched clusters are absent),
    'many_to_one_mapping' (cluster -> majority label), 'contingency' [clusters, labels],
    'num_clusters', 'num_labels', 'num_examples'.
  """
  table, cluster_values, label_values = contingency_table(labels, clusters)
  n = int(table.sum())
  if n == 0:
    raise ValueError("no examples")
  rows, cols = linear_sum_assignment(table, maximize=True)
  one_to_one = float(table[rows, cols].sum()) / n
  majority = np.argmax(table, axis=1)
  many_to_one = float(table[np.arange(len(table)), majority].sum()) / n
  return {
      "one_to_one": one_to_one,
      "many_to_one": many_to_one,
      "mapping": {cluster_values[r].item(): label_values[c].item() for r, c in zip(rows, cols)},
      "many_to_one_mapping": {cluster_values[r].item(): label_values[c].item()
                              for r, c in enumerate(majority)},
      "contingency": table,
      "num_clusters": int(len(cluster_values)),
      "num_labels": int(len(label_values)),
      "num_examples": n,
  }
