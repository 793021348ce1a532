"""IRS, Interventional Robustness Score (Suter et al. 2019, Sec. 4 and the scalable estimate).

As disentanglement_lib computes it (`evaluation/metrics/irs.py`, settings
`config/sample/irs/irs.gin`: ``num_train`` = 10,000, histogram discretisation of the factors with
20 bins, ``diff_quantile`` = 0.99): with the latents that vary on the points (variance > 0),

::

  EMPIDA_jk = mean over the values g of factor k of the 99th percentile of |z_j - E[z_j | v_k = g]|
              over the points with v_k = g,
  IRS_j     = 1 - min_k EMPIDA_jk / max |z_j - E z_j|,
  IRS       = sum_j w_j IRS_j / sum_j w_j,  w_j = max |z_j - E z_j|  (the plain mean when every
              w_j is 0; 0 when no latent varies).

Only factors with more than one value are scored. The definition is one of deviations of real
latents: a categorical code does not enter (the means alone).

Registered in `registry` as ``irs`` (settings: `common`).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from disentangle.metrics import registry
from disentangle.metrics import sampling
from disentangle.metrics.dlib import common

NUM_TRAIN = 10_000
NUM_BINS = 20
DIFF_QUANTILE = 0.99


def irs_scores(factors: np.ndarray, latents: np.ndarray,
               diff_quantile: float = DIFF_QUANTILE) -> dict:
  """IRS of ``latents`` [n, d] (active ones) against discretised ``factors`` [n, K]."""
  max_dev = np.max(np.abs(latents - latents.mean(axis=0)), axis=0)
  cum = np.zeros((latents.shape[1], factors.shape[1]))
  for k in range(factors.shape[1]):
    values = np.unique(factors[:, k])
    for g in values:
      match = latents[factors[:, k] == g]
      cum[:, k] += np.percentile(np.abs(match - match.mean(axis=0)), diff_quantile * 100, axis=0)
    cum[:, k] /= len(values)
  with np.errstate(divide="ignore", invalid="ignore"):
    matrix = 1.0 - cum / max_dev[:, None]
  per_latent = matrix.max(axis=1)
  avg = (np.average(per_latent, weights=max_dev) if max_dev.sum() > 0
         else float(np.mean(per_latent)))
  return {"score": float(avg), "per_latent": per_latent, "irs_matrix": matrix,
          "parents": matrix.argmax(axis=1), "max_deviations": max_dev}


def irs(factors: np.ndarray, latents: np.ndarray, diff_quantile: float = DIFF_QUANTILE) -> dict:
  """IRS of every latent [n, d] that varies on the points (disentanglement_lib's
  ``_drop_constant_dims``); a score of 0 when none varies. The result names the active dims."""
  active = np.var(latents, axis=0) > 0
  out = ({"score": 0.0} if not active.any()
         else irs_scores(factors, latents[:, active], diff_quantile))
  return dict(out, num_active_dims=int(active.sum()), active_dims=np.flatnonzero(active).tolist())


# -- Registration in `registry` ------------------------------------------------------------------

@common.sampled_from_the_grid
def _irs(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Suter et al.'s IRS as disentanglement_lib (`irs`); the means alone."""
  sets, used, _ = common.sets(inputs, s, names=("train",))
  rep, factors = sets["train"]
  binned = sampling.histogram_discretize(factors.astype(np.float64), s["num_bins"])
  out = irs(binned, rep.mean, s["diff_quantile"])
  return dict(out, value=out["score"], protocol=sampling.PROTOCOL, use_discrete=False,
              factors_used=used, num_train=s["num_train"], num_bins=s["num_bins"],
              diff_quantile=s["diff_quantile"])


registry.register(registry.Metric(
    "irs", "IRS", _irs,
    lambda cfg, stage: {"num_train": common.points(cfg, NUM_TRAIN), "num_bins": NUM_BINS,
                        "diff_quantile": DIFF_QUANTILE},
    training_flag="", ground_truth=True, sampled=True, postprocessed=True,
    describe=lambda m: (f"{m['protocol']}: {m['num_train']} points, factors in {m['num_bins']} "
                        f"bins, quantile {m['diff_quantile']}, {m['num_active_dims']} active "
                        f"dims")))
