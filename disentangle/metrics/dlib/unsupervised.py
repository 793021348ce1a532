"""Unsupervised scores of the code (Locatello et al. 2019, Sec. 4 and Appendix).

As disentanglement_lib computes them (`evaluation/metrics/unsupervised_metrics.py`, study
settings `config/unsupervised_study_v1/metric_configs/unsupervised.gin`: ``num_train`` = 10,000
points, histogram discretisation with 20 bins), from the covariance S (ddof 1) of the posterior
means over the points:

  gaussian_total_correlation      = KL(N(0, S) || N(0, diag S)) = (sum_j log S_jj - log|S|) / 2;
  gaussian_wasserstein_correlation = W_2^2(N(0, S), N(0, diag S)) = 2 tr S - 2 tr sqrtm(S diag S)
                                    (and divided by tr S: ``..._norm``);
  mutual_info_score               = mean over pairs i != j of the plug-in I(z_i; z_j) of the
                                    discretised means (nats).

None needs the ground-truth factors. The Gaussian scores are defined for real latents only; a
discrete code enters the mutual information as one more discrete latent (its classes its bins).
"""
from __future__ import annotations

import numpy as np
import scipy.linalg

from disentangle.metrics.information import plugin_mutual_information

NUM_TRAIN = 10_000
NUM_BINS = 20


def gaussian_total_correlation(cov: np.ndarray) -> float:
  return float(0.5 * (np.sum(np.log(np.diag(cov))) - np.linalg.slogdet(cov)[1]))


def gaussian_wasserstein_correlation(cov: np.ndarray) -> float:
  root = scipy.linalg.sqrtm(cov * np.diag(cov)[:, None])
  return float(2.0 * np.trace(cov) - 2.0 * np.real(np.trace(root)))


def mutual_info_score(codes: np.ndarray) -> float:
  """Mean plug-in mutual information over ordered pairs of distinct columns of ``codes``."""
  d = codes.shape[1]
  if d < 2:
    return 0.0
  total = sum(plugin_mutual_information(codes[:, i], codes[:, j])
              for i in range(d) for j in range(d) if i != j)
  return float(total / (d * d - d))


def scores(mean: np.ndarray, codes: np.ndarray) -> dict:
  """Every score of the means [n, d] and the discretised columns ``codes`` [n, d']."""
  cov = np.atleast_2d(np.cov(mean, rowvar=False))
  wasserstein = gaussian_wasserstein_correlation(cov)
  return {"gaussian_total_correlation": gaussian_total_correlation(cov),
          "gaussian_wasserstein_correlation": wasserstein,
          "gaussian_wasserstein_correlation_norm": float(wasserstein / np.trace(cov)),
          "mutual_info_score": mutual_info_score(codes)}
