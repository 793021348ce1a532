"""Unsupervised scores of the code (Locatello et al. 2019, Sec. 4 and Appendix).

As disentanglement_lib computes them (`evaluation/metrics/unsupervised_metrics.py`, study
settings `config/unsupervised_study_v1/metric_configs/unsupervised.gin`: ``num_train`` = 10,000
points, histogram discretisation with 20 bins), from the covariance S (ddof 1) of the posterior
means over the points::

  gaussian_total_correlation      = KL(N(0, S) || N(0, diag S)) = (sum_j log S_jj - log|S|) / 2;
  gaussian_wasserstein_correlation = W_2^2(N(0, S), N(0, diag S)) = 2 tr S - 2 tr sqrtm(S diag S)
                                    (and divided by tr S: ``..._norm``);
  mutual_info_score               = mean over pairs i != j of the plug-in I(z_i; z_j) of the
                                    discretised means (nats).

None needs the ground-truth factors. The Gaussian scores are defined for real latents only; a
discrete code enters the mutual information as one more discrete latent (its classes its bins).

Registered in `registry` as ``unsupervised`` (value: the Gaussian total correlation; on the
ground truth's points, else on the eval points; settings and protocols: `common`).
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import scipy.linalg

from disentangle.metrics import registry
from disentangle.metrics import sampling
from disentangle.metrics.dlib import common
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


# -- Registration in `registry` ------------------------------------------------------------------

@common.sampled_from_the_grid
def _unsupervised(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """disentanglement_lib's unsupervised scores (`scores`) on ``num_train`` points
  of the ground truth, else on the eval points; value: the Gaussian total correlation."""
  if inputs.ground_truth is not None:
    rep, _ = sampling.sample_points(inputs.ground_truth, inputs.represent, s["num_train"],
                                    inputs.rng, inputs.encode_batch_size)
    points = "sampled from the ground truth"
  elif inputs.rep is not None:
    rep = inputs.rep.take(slice(0, s["num_train"]))
    sampling.check_finite(rep, "the eval points")
    points = "the eval points"
  else:
    raise sampling.MetricInputError("no points to encode")
  if rep.num_examples < 2:
    raise sampling.MetricInputError(f"needs at least 2 points, got {rep.num_examples}")
  by = {}
  for protocol, with_codes in sampling.protocols(rep, True):
    codes = sampling.histogram_discretize(rep.mean, s["num_bins"])
    if with_codes:
      codes = np.concatenate([codes, rep.codes], axis=1)
    by[protocol] = dict(scores(rep.mean, codes), protocol=protocol)
  return common.headline(by, "gaussian_total_correlation", s["use_discrete"], points=points,
                         num_points=rep.num_examples, num_bins=s["num_bins"], units="nats")


_KEYS = ("gaussian_total_correlation", "gaussian_wasserstein_correlation",
         "gaussian_wasserstein_correlation_norm", "mutual_info_score")


registry.register(registry.Metric(
    "unsupervised", "Gaussian total correlation (nats)", _unsupervised,
    lambda cfg, stage: {"num_train": common.points(cfg, NUM_TRAIN),
                        "num_bins": NUM_BINS,
                        "use_discrete": common.use_discrete(cfg)},
    training_flag="", sampled=True, postprocessed=True, tabulated=False,
    logged=lambda m: {k: m[k] for k in _KEYS},
    describe=lambda m: (f"{common.describe_protocols(m, 'gaussian_total_correlation')}: "
                        + ", ".join(f"{k} {m[k]:.4f}" for k in _KEYS[1:])
                        + f", {m['num_points']} points ({m['points']}), {m['num_bins']} bins")))
