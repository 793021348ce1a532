"""Information estimators for factorised Gaussian posteriors (Chen et al., 2018), on the host.

Given the posterior parameters q(z|x_n) = N(mean_n, diag(exp(logvar_n))) of N data points, the
aggregate posterior is the dataset mixture q(z) = 1/N sum_n q(z|x_n). Following Chen et al.
(2018, Sec. 4.1 and their `elbo_decomposition.estimate_entropies`):

  H(z_j) = E_{q(z_j)} [-log q(z_j)],   -log q(z_j) = log N - logsumexp_n log q(z_j | x_n),
  H(z)   = E_{q(z)}   [-log q(z)],     log q(z|x_n) = sum_j log q(z_j | x_n),

where the expectation is a Monte-Carlo average over z drawn from q(z|x_n) for a random subset of
`num_samples` data points (one sample each, no repeats, as their `randperm(...)[:n_samples]`),
and each sample's density is evaluated against the mixture over all N points (the sample's own
component included, as in their code). Then

  I(x; z_j) = H(z_j) - E_x H(q(z_j|x)),      E_x H(q(z_j|x)) = mean_n 1/2 log(2 pi e sigma_nj^2),
  TC(z)     = sum_j H(z_j) - H(z)            (CascadeVAE eq. 3, "total correlation").

These are the I(x; z_j) curves of CascadeVAE Figs. 5, 9 and 11 (the paper does not give its
estimator; the notes name this one). Work is chunked over samples so that the [chunk, N, m]
log-density block stays near `_BLOCK_ELEMENTS` numbers: N = 10,000 points, 1,000 samples and
m = 10 take 1-3 s on two CPU cores (the cost is N x samples x m exponentials).

Discrete codes: for a deterministic code d(x) the mutual information I(x; d) is H(d), the
plug-in entropy of the code's empirical distribution; for a soft posterior q(d|x) it is
H(E_x q(d|x)) - E_x H(q(d|x)).
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from disentangle.metrics.representation import Representation
from disentangle.metrics.representation import as_representation

_LOG_2PI = float(np.log(2.0 * np.pi))
_BLOCK_ELEMENTS = 1 << 21  # numbers per log-density block (16 MiB of float64)


def gaussian_log_density(z: np.ndarray, mean: np.ndarray, logvar: np.ndarray) -> np.ndarray:
  """Elementwise log N(z; mean, exp(logvar)), broadcasting."""
  return -0.5 * (_LOG_2PI + logvar + np.square(z - mean) * np.exp(-logvar))


def kl_per_dim(mean: np.ndarray, logvar: np.ndarray) -> np.ndarray:
  """Mean over data of KL(q(z_j|x) || N(0, 1)) per dimension, [m] (CascadeVAE supp. C).

  KL = 1/2 (mu^2 + sigma^2 - 1 - log sigma^2), averaged over the N rows.
  """
  mean = np.asarray(mean, np.float64)
  logvar = np.asarray(logvar, np.float64)
  return 0.5 * np.mean(np.square(mean) + np.exp(logvar) - 1.0 - logvar, axis=0)


def gaussian_entropy_per_dim(logvar: np.ndarray) -> np.ndarray:
  """E_x H(q(z_j|x)) = mean_n 1/2 log(2 pi e sigma_nj^2), [m] (nats)."""
  return 0.5 * np.mean(_LOG_2PI + 1.0 + np.asarray(logvar, np.float64), axis=0)


def _logsumexp(x: np.ndarray, axis: int) -> np.ndarray:
  top = np.max(x, axis=axis, keepdims=True)
  top = np.where(np.isfinite(top), top, 0.0)
  out = np.log(np.sum(np.exp(x - top), axis=axis)) + np.squeeze(top, axis=axis)
  return out


def sample_posterior(mean: np.ndarray, logvar: np.ndarray, rng: np.random.Generator,
                     num_samples: Optional[int]) -> np.ndarray:
  """One z ~ q(z|x_n) for each of `num_samples` distinct random points (all when None or >= N)."""
  n = len(mean)
  if num_samples is None or num_samples >= n:
    index = np.arange(n)
  else:
    index = rng.permutation(n)[:num_samples]
  eps = rng.standard_normal(size=(len(index), mean.shape[1]))
  return mean[index] + np.exp(0.5 * logvar[index]) * eps


def mixture_neg_log_density(z: np.ndarray, mean: np.ndarray,
                            logvar: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """-log q(z_j) [S, m] and -log q(z) [S] of samples z [S, m] under the dataset mixture.

  q(.) = 1/N sum_n q(.|x_n) with the factorised Gaussians (mean, logvar) [N, m].
  """
  z = np.asarray(z, np.float64)
  mean = np.asarray(mean, np.float64)
  logvar = np.asarray(logvar, np.float64)
  n, m = mean.shape
  # [m, 1, N], contiguous: the [m, c, N] blocks below follow their inputs' memory order, and
  # a reduction over N runs about 25x faster along a contiguous axis.
  inv_var = np.ascontiguousarray(np.exp(-logvar).T)[:, None, :]
  const = np.ascontiguousarray((-0.5 * (_LOG_2PI + logvar)).T)[:, None, :]
  mean_t = np.ascontiguousarray(mean.T)[:, None, :]
  chunk = max(1, _BLOCK_ELEMENTS // (n * m))
  marginal = np.empty((len(z), m))
  joint = np.empty(len(z))
  for s in range(0, len(z), chunk):
    zc = z[s:s + chunk].T[:, :, None]  # [m, c, 1]
    logq = np.square(zc - mean_t)  # [m, c, N]: the reduced axis N is contiguous
    logq *= -0.5 * inv_var
    logq += const
    marginal[s:s + chunk] = _logsumexp(logq, axis=2).T
    joint[s:s + chunk] = _logsumexp(np.sum(logq, axis=0), axis=1)
  log_n = np.log(n)
  return log_n - marginal, log_n - joint


def estimate_entropies(mean: np.ndarray, logvar: np.ndarray, rng: np.random.Generator, *,
                       num_samples: Optional[int] = 1000) -> tuple[np.ndarray, float]:
  """Monte-Carlo H(z_j) [m] and H(z) under the dataset mixture (Chen et al. 2018, Sec. 4.1).

  Args:
    mean, logvar: [N, m] posterior parameters of the N data points.
    rng: draws the subset of points and their samples.
    num_samples: how many of the N points contribute one z sample each (None: all).

  Returns:
    (marginal entropies [m], joint entropy), in nats.
  """
  mean = np.asarray(mean, np.float64)
  logvar = np.asarray(logvar, np.float64)
  z = sample_posterior(mean, logvar, rng, num_samples)
  marginal, joint = mixture_neg_log_density(z, mean, logvar)
  return marginal.mean(axis=0), float(joint.mean())


def mutual_information_per_dim(mean: np.ndarray, logvar: np.ndarray, rng: np.random.Generator,
                               *, num_samples: Optional[int] = 1000) -> np.ndarray:
  """I(x; z_j) = H(z_j) - E_x H(q(z_j|x)) per dimension, [m] nats (CascadeVAE Figs. 5/9/11)."""
  marginal, _ = estimate_entropies(mean, logvar, rng, num_samples=num_samples)
  return marginal - gaussian_entropy_per_dim(logvar)


def total_correlation(mean: np.ndarray, logvar: np.ndarray, rng: np.random.Generator, *,
                      num_samples: Optional[int] = 1000) -> float:
  """TC(z) = sum_j H(z_j) - H(z) = KL(q(z) || prod_j q(z_j)) (CascadeVAE eq. 3), nats."""
  marginal, joint = estimate_entropies(mean, logvar, rng, num_samples=num_samples)
  return float(np.sum(marginal) - joint)


def discrete_entropy(labels: np.ndarray) -> float:
  """Plug-in entropy (nats) of the empirical distribution of integer labels [N]."""
  _, counts = np.unique(np.asarray(labels).ravel(), return_counts=True)
  p = counts / counts.sum()
  return float(-np.sum(p * np.log(p)))


def plugin_mutual_information(a: np.ndarray, b: np.ndarray) -> float:
  """Plug-in I(a; b) in nats from the contingency table of two label arrays [N] (rows: the
  values of ``a``).

  The one implementation of the suite (MIG, modularity, the unsupervised and unified scores):
  bit for bit sklearn's ``mutual_info_score(a, b)``, which disentanglement_lib calls with the
  factor first (``mutual_info_score(ys[j], mus[i])``): the same non-zero cells in row-major
  order, the same operations (``math.log`` of the totals), the same zeroing below eps, the same
  summation; without its input checks and sparse matrices (about 3x faster).
  """
  _, ia = np.unique(np.asarray(a).ravel(), return_inverse=True)
  _, ib = np.unique(np.asarray(b).ravel(), return_inverse=True)
  na, nb = int(ia.max()) + 1, int(ib.max()) + 1
  if na == 1 or nb == 1:
    return 0.0
  joint = np.bincount(ia * nb + ib, minlength=na * nb).reshape(na, nb)
  rows, cols = np.nonzero(joint)
  counts = joint[rows, cols]
  total = int(counts.sum())
  pi, pj = joint.sum(axis=1), joint.sum(axis=0)
  log_counts = np.log(counts)
  share = counts / total
  outer = pi.take(rows).astype(np.int64) * pj.take(cols).astype(np.int64)
  log_outer = -np.log(outer) + math.log(pi.sum()) + math.log(pj.sum())
  mi = share * (log_counts - math.log(total)) + share * log_outer
  mi = np.where(np.abs(mi) < np.finfo(mi.dtype).eps, 0.0, mi)
  return float(np.clip(mi.sum(), 0.0, None))


def discrete_mutual_information(codes: np.ndarray) -> float:
  """I(x; d) in nats for a discrete code.

  Args:
    codes: int labels [N] (a deterministic code d(x): I = H(d), the plug-in entropy), or
      probabilities q(d|x) [N, K] (a soft code: I = H(mean_n q(d|x_n)) - mean_n H(q(d|x_n))).
  """
  codes = np.asarray(codes)
  if codes.ndim == 1:
    return discrete_entropy(codes)
  if codes.ndim != 2:
    raise ValueError(f"codes must be labels [N] or probabilities [N, K], got {codes.shape}")
  q = codes.astype(np.float64)
  def entropy(p, axis):
    return -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=axis)
  return float(max(0.0, entropy(q.mean(0), 0) - np.mean(entropy(q, 1))))


def information_report(representation: Representation, rng: np.random.Generator, *,
                       num_samples: Optional[int] = 1000) -> dict:
  """Per-dimension KL and I(x; z_j), TC, and I(x; d), with the estimator settings.

  Args:
    representation: encodings of N data points; needs `logvar` for the Gaussian estimators.
    rng: numpy Generator for the Monte-Carlo subset and samples.
    num_samples: points contributing a z sample (None: all N).
  """
  rep = as_representation(representation)
  if rep.logvar is None:
    raise ValueError("information_report needs posterior log-variances")
  marginal, joint = estimate_entropies(rep.mean, rep.logvar, rng, num_samples=num_samples)
  cond = gaussian_entropy_per_dim(rep.logvar)
  out = {
      "kl_per_dim": kl_per_dim(rep.mean, rep.logvar),
      "mi_per_dim": marginal - cond,
      "marginal_entropies": marginal,
      "joint_entropy": joint,
      "total_correlation": float(np.sum(marginal) - joint),
      "num_points": rep.num_examples,
      "num_samples": min(rep.num_examples, num_samples or rep.num_examples),
      "estimator": "chen2018_dataset_mixture",
      "units": "nats",
  }
  if rep.discrete is not None:
    out["discrete_mi"] = discrete_mutual_information(rep.discrete)
  return out
