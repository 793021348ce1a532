"""Classification accuracy of discrete codes named by their labels (identity mapping).

A semi-supervised discrete code (PartedVAE Sec. 4.5: q(c|x) trained with labels) is named by its
labels, so its accuracy maps code k to label k, without searching for the best mapping as the
unsupervised accuracies of `clustering.cluster_accuracy` do (Hungarian one-to-one, many-to-one).
PartedVAE Sec. 5.2 reports this accuracy of argmax q(c|x) on the MNIST test set (95% with 256
labels; 83% for the same encoder trained as a classifier on the 256 labels alone); on CelebA
(App. B) every categorical variable c_i has its own label column, so the accuracy is per variable.

Label -1 means unknown (the convention of `disentangle.data.labels.supervision`): those examples are
skipped, and the counts say how many.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np


def classification_accuracy(labels, predictions) -> dict:
  """Fraction of labelled examples whose prediction equals their label (identity mapping).

  Args:
    labels: int [N] class labels; -1 = unknown (skipped).
    predictions: int [N] predicted classes (e.g. argmax q(c|x)).

  Returns:
    dict: 'accuracy' (None when no example is labelled), 'num_correct', 'num_examples' (labelled
    ones), 'num_skipped' (label -1), 'mapping' = 'identity'.
  """
  labels = np.asarray(labels).ravel()
  predictions = np.asarray(predictions).ravel()
  if labels.shape != predictions.shape:
    raise ValueError(f"labels {labels.shape} and predictions {predictions.shape} differ in length")
  known = labels >= 0
  n = int(known.sum())
  correct = int(np.sum(labels[known] == predictions[known]))
  return {"accuracy": correct / n if n else None, "num_correct": correct, "num_examples": n,
          "num_skipped": int(labels.size - n), "mapping": "identity"}


def per_variable_accuracy(targets, codes, names: Optional[Sequence[str]] = None) -> dict:
  """`classification_accuracy` of each discrete code column against its target column.

  Args:
    targets: int [N, K] label columns, -1 = unknown (e.g. CelebA's PartedVAE variables of
      `disentangle.data.datasets.celeba.PARTED_VARIABLES` on the test split).
    codes: int [N, K] the K argmaxes (`Representation.discrete_codes`), column i for variable i.
    names: K variable names (default ``c_0``, ...).

  Returns:
    dict: 'per_variable' {name: classification_accuracy dict}, 'accuracy' {name: accuracy},
    'mean' (unweighted mean over the variables with at least one label; None if none has),
    'names', 'num_variables', 'variables_without_labels'.
  """
  targets = np.asarray(targets)
  codes = np.asarray(codes)
  if targets.ndim == 1:
    targets = targets[:, None]
  if codes.ndim == 1:
    codes = codes[:, None]
  if targets.shape != codes.shape:
    raise ValueError(f"targets {targets.shape} and codes {codes.shape} differ")
  k = targets.shape[1]
  names = tuple(f"c_{i}" for i in range(k)) if names is None else tuple(names)
  if len(names) != k:
    raise ValueError(f"{len(names)} names for {k} variables")
  per = {n: classification_accuracy(targets[:, i], codes[:, i]) for i, n in enumerate(names)}
  acc = {n: r["accuracy"] for n, r in per.items()}
  known = [a for a in acc.values() if a is not None]
  return {"per_variable": per, "accuracy": acc,
          "mean": float(np.mean(known)) if known else None, "names": list(names),
          "num_variables": k,
          "variables_without_labels": [n for n, a in acc.items() if a is None]}
