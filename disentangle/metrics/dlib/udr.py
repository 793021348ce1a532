"""UDR, Unsupervised Disentanglement Ranking (Duan et al. 2020, Sec. 3, Eq. 1-2).

As disentanglement_lib computes it (`evaluation/udr/metrics/udr.py::compute_udr_sklearn`,
settings `config/tests/methods/udr/udr.gin`: 1,000 points, Lasso correlation, KL filter 0.01):
every run of one configuration (the seeds of a sweep) encodes the same `NUM_POINTS` observations;
each run's posterior means are standardised (scikit-learn ``StandardScaler``) and latents with
mean KL(q(z_j|x) || N(0, 1)) <= 0.01 are zeroed and left out. For each ordered pair of runs
(i, j), R = ``|coef|`` of ``Lasso(alpha=0.1)`` regressing run j's latents on run i's, transposed
[latents of i, latents of j], restricted to the informative latents of both, and

  UDR_ij = (mean_b max_a R_ab^2 / sum_a R_ab + mean_a max_b R_ab^2 / sum_b R_ab) / 2

(a column or row summing to 0 counts 0, as disentanglement_lib's ``nan_to_num``). A run's score
is the median of UDR_ij over the other runs j (its column, as disentanglement_lib). With
``correlation='spearman'``, R is the absolute Spearman rank correlation instead.

The points: the metric ``udr_sample`` (registered below) draws them from the ground truth with a
fixed stream (`POINTS_SEED`), the same for every seed of a configuration;
`disentangle.evaluation.aggregate` computes the scores per table row from the samples its runs
wrote.
"""
from __future__ import annotations

from typing import Optional, Sequence
import warnings

import numpy as np
import scipy.stats
from sklearn import exceptions
from sklearn import linear_model
from sklearn import preprocessing

from disentangle.metrics import registry
from disentangle.metrics import sampling
from disentangle.metrics.dlib import common
from disentangle.metrics.information import kl_per_dim

NUM_POINTS = 1_000
KL_THRESHOLD = 0.01
LASSO_ALPHA = 0.1
POINTS_SEED = 20200501  # the UDR points: one fixed stream, shared by every run


def relative_strength(r: np.ndarray) -> float:
  """(mean over columns of max^2 / sum + mean over rows of max^2 / sum) / 2 of R [a, b]."""
  if r.size == 0:
    return float("nan")
  with np.errstate(divide="ignore", invalid="ignore"):
    cols = np.nan_to_num(np.max(r, axis=0) ** 2 / np.sum(r, axis=0), nan=0.0)
    rows = np.nan_to_num(np.max(r, axis=1) ** 2 / np.sum(r, axis=1), nan=0.0)
  return float((np.nanmean(cols) + np.nanmean(rows)) / 2)


def correlation_matrix(a: np.ndarray, b: np.ndarray, kind: str = "lasso",
                       random_state: int = 0) -> np.ndarray:
  """R [latents of a, latents of b] between two representations [n, d] of the same points."""
  if kind == "lasso":
    model = linear_model.Lasso(alpha=LASSO_ALPHA, random_state=random_state)
    with warnings.catch_warnings():
      warnings.simplefilter("ignore", exceptions.ConvergenceWarning)
      model.fit(a, b)
    return np.abs(np.atleast_2d(model.coef_)).T
  if kind == "spearman":
    out = np.zeros((a.shape[1], b.shape[1]))
    for i in range(a.shape[1]):
      for j in range(b.shape[1]):
        out[i, j] = abs(scipy.stats.spearmanr(a[:, i], b[:, j], nan_policy="omit")[0])
    return np.nan_to_num(out)
  raise ValueError(f"unknown correlation {kind!r}; choose 'lasso' or 'spearman'")


def udr(means: Sequence[np.ndarray], kls: Sequence[Optional[np.ndarray]], *,
        correlation: str = "lasso", kl_threshold: float = KL_THRESHOLD,
        random_state: int = 0) -> dict:
  """UDR of ``len(means)`` runs from their means [n, d] on the same points and their mean KL
  per latent [d] (None: every latent informative)."""
  if len(means) < 2:
    raise ValueError("UDR compares at least two runs")
  reps, masks = [], []
  for mean, kl in zip(means, kls):
    mean = np.asarray(mean, np.float64)
    kl = np.full(mean.shape[1], np.inf) if kl is None else np.asarray(kl, np.float64)
    reps.append(preprocessing.StandardScaler().fit_transform(mean) * (kl > KL_THRESHOLD))
    masks.append(kl > kl_threshold)
  k = len(reps)
  pairwise = np.full((k, k), np.nan)
  for i in range(k):
    for j in range(k):
      if i != j:
        r = correlation_matrix(reps[i], reps[j], correlation, random_state)
        pairwise[i, j] = relative_strength(r[masks[i]][:, masks[j]])
  scores = [float(np.median(np.delete(pairwise[:, i], i))) for i in range(k)]
  return {"model_scores": scores, "pairwise": pairwise, "correlation": correlation,
          "kl_threshold": kl_threshold, "informative_latents": [m.tolist() for m in masks],
          "num_points": int(reps[0].shape[0]), "lasso_alpha": LASSO_ALPHA}


# -- Registration in `registry` ------------------------------------------------------------------

@common.sampled_from_the_grid
def _udr_sample(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """The means (and mean KL per latent) of `NUM_POINTS` points drawn with the fixed stream
  `POINTS_SEED`, so that every seed of a configuration encodes the same observations;
  `disentangle.evaluation.aggregate` computes UDR (`udr`) over a row's runs from them."""
  common.require_ground_truth(inputs)
  gen = np.random.default_rng(s["points_seed"])
  rep, factors = sampling.sample_points(inputs.ground_truth, inputs.represent, s["num_points"],
                                        gen, inputs.encode_batch_size)
  kl = None if rep.logvar is None else kl_per_dim(rep.mean, rep.logvar)
  return {"value": None, "means": rep.mean, "kl_per_dim": kl, "num_points": rep.num_examples,
          "points_seed": s["points_seed"], "factors_checksum": int(np.sum(
              factors * np.arange(1, factors.shape[1] + 1)) % 1_000_003),
          "protocol": sampling.PROTOCOL}


registry.register(registry.Metric(
    "udr_sample", "UDR sample", _udr_sample,
    lambda cfg, stage: {"num_points": NUM_POINTS, "points_seed": POINTS_SEED},
    training_flag="", ground_truth=True, tabulated=False, logged=lambda m: {},
    describe=lambda m: (f"{m['num_points']} points (stream {m['points_seed']}) for UDR across "
                        f"the seeds of a configuration (aggregate)")))
