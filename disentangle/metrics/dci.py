"""DCI: disentanglement, completeness, informativeness (Eastwood & Williams 2018, Sec. 2).

As disentanglement_lib computes it (`evaluation/metrics/dci.py`, study settings
`config/unsupervised_study_v1/metric_configs/dci.gin`: ``num_train`` = 10,000, ``num_test`` =
5,000): one scikit-learn ``GradientBoostingClassifier()`` (default: 100 stages, depth 3, learning
rate 0.1) per factor on the posterior means; R_ik = |feature importance| of latent i for factor k.

  disentanglement = sum_i rho_i (1 - H_K(P_i.)),  P_ik = R_ik / sum_k R_ik,  rho_i = sum_k R_ik /
                    sum R  (Eq. 1-2; the entropy in base K, 1e-11 added as disentanglement_lib);
  completeness    = sum_k rho_k (1 - H_D(P_.k)),  P_ik = R_ik / sum_i R_ik  (Eq. 3);
  informativeness = mean over factors of the classifier's accuracy, train and test (the paper
                    uses the prediction error; disentanglement_lib reports accuracy).

Only factors with more than one value are scored. A discrete code is one latent: its one-hot
block is given to the trees and its importance is the sum over the block.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import scipy.stats
from sklearn import ensemble

NUM_TRAIN = 10_000
NUM_TEST = 5_000


def importance_matrix(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray,
                      y_test: np.ndarray, groups: Optional[Sequence[np.ndarray]] = None,
                      random_state: int = 0) -> tuple[np.ndarray, float, float]:
  """(R [latents, factors], mean train accuracy, mean test accuracy)."""
  groups = groups if groups is not None else [np.array([j]) for j in range(x_train.shape[1])]
  r = np.zeros((len(groups), y_train.shape[1]))
  train_acc, test_acc = [], []
  for k in range(y_train.shape[1]):
    model = ensemble.GradientBoostingClassifier(random_state=random_state)
    model.fit(x_train, y_train[:, k])
    imp = np.abs(model.feature_importances_)
    r[:, k] = [imp[cols].sum() for cols in groups]
    train_acc.append(np.mean(model.predict(x_train) == y_train[:, k]))
    test_acc.append(np.mean(model.predict(x_test) == y_test[:, k]))
  return r, float(np.mean(train_acc)), float(np.mean(test_acc))


def disentanglement(r: np.ndarray) -> float:
  """sum_i rho_i (1 - H_K(P_i.)) of an importance matrix [latents, factors]."""
  per_code = 1.0 - scipy.stats.entropy(r.T + 1e-11, base=r.shape[1])
  if r.sum() == 0.0:
    r = np.ones_like(r)
  return float(np.sum(per_code * r.sum(axis=1) / r.sum()))


def completeness(r: np.ndarray) -> float:
  """sum_k rho_k (1 - H_D(P_.k)) of an importance matrix [latents, factors]."""
  per_factor = 1.0 - scipy.stats.entropy(r + 1e-11, base=r.shape[0])
  if r.sum() == 0.0:
    r = np.ones_like(r)
  return float(np.sum(per_factor * r.sum(axis=0) / r.sum()))
