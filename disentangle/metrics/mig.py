"""Mutual Information Gap (Chen et al., 2018), two estimators that are not comparable.

MIG = 1/K sum_k (I(z_{j*}; v_k) - I(z_{j'}; v_k)) / H(v_k), where j* and j' are the dimensions
with the largest and second largest mutual information with factor v_k.

``estimator='histogram'`` (default; disentanglement_lib `evaluation/metrics/mig.py` with the
study's settings): `num_points` = 10,000 points sampled from the dataset, representation = the
posterior means; each dimension is discretised with `np.digitize(x, np.histogram(x, 20)[1][:-1])`
(20 equal bins over that dimension's range in the sample); I(z_j; v_k) is the plug-in discrete
mutual information of the contingency table (sklearn `mutual_info_score`, nats) and H(v_k) the
plug-in entropy of the sampled factor.

``estimator='sampled'`` (Chen et al.'s `disentanglement_metrics.py` / `mi_metric.py` for a
factorised Gaussian posterior): with one sample z_n ~ q(z|x_n) per point,
  H(z_j)       = E[log N - logsumexp_n log q(z_j|x_n)]       over the N points' mixture,
  H(z_j | v_k) = sum_v p(v_k = v) H(z_j | v_k = v),  each term the same estimate restricted to the
                 points with v_k = v (their own mixture and their own samples),
  I(z_j; v_k)  = H(z_j) - H(z_j | v_k), sorted over j and clamped at 0, normalised by
                 log(factor size) (their `factor_entropies`, exact for a uniform factor).
At most `num_samples` = 10,000 samples enter each entropy (their `randperm(...)[:10000]`).
Departure: Chen et al. use every image of dSprites (N = 737,280, on a GPU); we use `num_points`
sampled points, so the mixture q(z) is over those points, and p(v_k = v) is the empirical
frequency (1 / size on their full grid). Cost: N x samples x m log-densities for H(z_j) plus about
N^2 / size per factor for the conditionals; 10,000 points and 10,000 samples with m = 10 take
about 20 s on two CPU cores (the histogram estimator: a few hundredths of a second).

The factors scored (``factor_set``, ``eval.mig_factors``; the result's ``factor_set`` and
``factor_names`` say which were used):
- ``'all'``: every factor with more than one value (disentanglement_lib's MIG averages over all
  factors of the data);
- ``'chen_et_al'``: the factors Chen et al.'s `disentanglement_metrics.py` conditions on
  (`CHEN_ET_AL_FACTORS`): on dSprites scale, orientation, pos x and pos y, not shape
  (`mutual_info_metric_shapes` estimates H(z_j | v_k) for those four only and
  `mi_metric.compute_metric_shapes` averages their four gaps); on 3D faces they leave out the
  face identity (not a dataset of this project). On data they did not score the set is not
  defined: `MetricInputError` naming ``eval.mig_factors``;
- ``'protocol'`` (default): the set of the published protocol of the estimator, ``'chen_et_al'``
  for ``'sampled'`` where they define one (on other data every factor, recorded as ``'all'``),
  ``'all'`` for ``'histogram'``.
The two sets give different numbers on dSprites (shape is the factor VAEs disentangle worst,
so leaving it out usually raises MIG): a MIG is comparable only with one on the same set.

Factors with a single value (zero entropy) are skipped.

The discrete code(s): disentanglement_lib's and Chen et al.'s MIG read the continuous means only,
so by default (``use_discrete=False``) a discrete code is ignored and the histogram estimator is
exactly disentanglement_lib's (``protocol='disentanglement_lib'`` in the result). With
``use_discrete=True`` every discrete code (`Representation.codes`: CascadeVAE's d, JointVAE's or
PartedVAE's K argmaxes) is one more row of the mutual-information matrix, its value the plug-in
mutual information with each factor (under both estimators: it is already discrete, and
deterministic given x); the result's protocol then says ``+discrete_codes``: not comparable with
the published MIGs.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np

from disentangle.metrics.information import discrete_entropy
from disentangle.metrics.information import mixture_neg_log_density
from disentangle.metrics.information import plugin_mutual_information
from disentangle.metrics.information import sample_posterior
from disentangle.metrics.representation import Representation
from disentangle.metrics.representation import encode_factors
from disentangle.metrics.sampling import MetricInputError
from disentangle.metrics.sampling import histogram_discretize

# The published protocol each estimator reproduces (without discrete rows).
PROTOCOL_OF = {"histogram": "disentanglement_lib", "sampled": "chen_et_al_2018"}
# The factor set of each estimator's published protocol (``factor_set='protocol'``).
PROTOCOL_FACTOR_SET = {"histogram": "all", "sampled": "chen_et_al"}
DSPRITES_FACTORS = ("shape", "scale", "orientation", "pos_x", "pos_y")
# Chen et al.'s factors per dataset (by its factor names): `disentanglement_metrics.py`
# `mutual_info_metric_shapes` conditions on scale, orientation, pos x, pos y of dSprites.
CHEN_ET_AL_FACTORS = {DSPRITES_FACTORS: ("scale", "orientation", "pos_x", "pos_y")}


def factor_set_of(factor_set: str, estimator: str, factor_names: Sequence[str],
                  factor_sizes: Sequence[int]) -> tuple[str, list[int]]:
  """(the set used, factor indices) of ``factor_set`` for ``estimator`` (module doc).

  Factors with one value are never scored. Raises `MetricInputError` for ``'chen_et_al'`` on
  data Chen et al. did not score.
  """
  names = tuple(str(n) for n in factor_names)
  sizes = tuple(int(s) for s in factor_sizes)
  varying = [k for k, s in enumerate(sizes) if s > 1]
  chosen = factor_set
  if factor_set == "protocol":
    chosen = PROTOCOL_FACTOR_SET[estimator]
    if chosen == "chen_et_al" and names not in CHEN_ET_AL_FACTORS:
      chosen = "all"  # no published set for this data: every factor, recorded as 'all'
  if chosen == "all":
    return "all", varying
  if names not in CHEN_ET_AL_FACTORS:
    raise MetricInputError(f"eval.mig_factors='chen_et_al' is defined on dSprites only (factors "
                           f"{list(DSPRITES_FACTORS)}); this data's factors are {list(names)}: "
                           f"use 'all' or 'protocol'")
  kept = CHEN_ET_AL_FACTORS[names]
  return "chen_et_al", [k for k in varying if names[k] in kept]


def mutual_information_matrix_histogram(rep: Representation, factors: np.ndarray,
                                        num_bins: int) -> np.ndarray:
  """Plug-in I(z_j; v_k) [dims, K] of the discretised means (+ the discrete codes' rows)."""
  codes = histogram_discretize(rep.mean, num_bins)
  if rep.codes is not None:
    codes = np.concatenate([codes, rep.codes], axis=1)
  return np.array([[plugin_mutual_information(factors[:, k], codes[:, j])
                    for k in range(factors.shape[1])] for j in range(codes.shape[1])])


def _entropies_of(z: np.ndarray, mean: np.ndarray, logvar: np.ndarray) -> np.ndarray:
  marginal, _ = mixture_neg_log_density(z, mean, logvar)
  return marginal.mean(axis=0)


def mutual_information_matrix_sampled(rep: Representation, factors: np.ndarray,
                                      rng: np.random.Generator,
                                      num_samples: Optional[int]) -> np.ndarray:
  """Chen et al.'s I(z_j; v_k) = H(z_j) - H(z_j | v_k) [dims, K] (+ the discrete codes' rows)."""
  if rep.logvar is None:
    raise MetricInputError("the sampled MIG estimator needs posterior log-variances")
  n = rep.num_examples
  z_all = sample_posterior(rep.mean, rep.logvar, rng, None)  # one sample per point
  def entropy_over(index):
    chosen = index if num_samples is None or len(index) <= num_samples else (
        index[rng.permutation(len(index))[:num_samples]])
    return _entropies_of(z_all[chosen], rep.mean[index], rep.logvar[index])
  marginal = entropy_over(np.arange(n))
  mi = np.zeros((rep.num_continuous, factors.shape[1]))
  for k in range(factors.shape[1]):
    values, counts = np.unique(factors[:, k], return_counts=True)
    conditional = np.zeros(rep.num_continuous)
    for v, c in zip(values, counts):
      conditional += (c / n) * entropy_over(np.flatnonzero(factors[:, k] == v))
    mi[:, k] = marginal - conditional
  if rep.codes is not None:
    disc = [[plugin_mutual_information(factors[:, k], code) for k in range(factors.shape[1])]
            for code in rep.codes.T]
    mi = np.concatenate([mi, np.array(disc)], axis=0)
  return mi


def mig_from_matrix(mi: np.ndarray, entropies: np.ndarray) -> tuple[float, np.ndarray]:
  """Mean over factors of (top - second) / H(v_k); per-factor gaps. mi is [dims, K]."""
  top = np.sort(np.maximum(mi, 0.0), axis=0)[::-1]
  second = top[1] if len(top) > 1 else np.zeros(mi.shape[1])
  gaps = (top[0] - second) / entropies
  return float(np.mean(gaps)), gaps


def mig(dataset, representation_fn: Callable[[np.ndarray], Any], rng: np.random.Generator, *,
        num_points: int = 10_000, num_bins: int = 20, estimator: str = "histogram",
        num_samples: Optional[int] = 10_000, factor_set: str = "protocol",
        factor_names: Optional[Sequence[str]] = None,
        factor_indices: Optional[Sequence[int]] = None, use_discrete: bool = False,
        encode_batch_size: int = 1000) -> dict:
  """Mutual Information Gap of `representation_fn` on `dataset` (see module doc).

  Args:
    dataset: ground-truth data (`disentangle.data.ground_truth` protocol).
    representation_fn: observations [k, ...] -> `Representation` (or means [k, m]).
    rng: numpy Generator.
    num_points: points sampled from the dataset.
    num_bins: histogram bins per dimension ('histogram').
    estimator: 'histogram' (disentanglement_lib) or 'sampled' (Chen et al. 2018).
    num_samples: z samples per entropy estimate ('sampled'; None: all points).
    factor_set: 'protocol', 'all' or 'chen_et_al' (module doc).
    factor_names: names of the dataset's factors (default: ``dataset.factor_names``, else
      ``factor_0``, ...); they identify the data for ``'chen_et_al'``.
    factor_indices: explicit factors to score (then ``factor_set`` is recorded as 'explicit').
    use_discrete: add every discrete code as one more row (not the published protocols).
    encode_batch_size: rows per `representation_fn` call.

  Returns:
    dict with 'score' (the MIG), 'per_factor' gaps, 'mutual_information' [dims, K'],
    'factor_entropy', 'factors_used' (indices), 'factor_names' (their names), 'factor_set',
    'estimator', 'protocol', 'use_discrete' and the settings.
  """
  sizes = tuple(int(s) for s in dataset.factor_sizes)
  names = tuple(factor_names if factor_names is not None else
                getattr(dataset, "factor_names", None) or
                (f"factor_{k}" for k in range(len(sizes))))
  if factor_indices is None:
    factor_set, factor_indices = factor_set_of(factor_set, estimator, names, sizes)
  else:
    factor_set = "explicit"
  factors = np.asarray(dataset.sample_factors(num_points, rng))
  rep = encode_factors(dataset, representation_fn, factors, rng, encode_batch_size)
  if not use_discrete:
    rep = rep.without_discrete()
  use_discrete = rep.codes is not None
  if estimator == "histogram":
    entropies = np.array([discrete_entropy(factors[:, k]) for k in factor_indices])
  else:
    entropies = np.log(np.array([sizes[k] for k in factor_indices], dtype=np.float64))
  used = [k for k, h in zip(factor_indices, entropies) if h > 0]
  entropies = entropies[entropies > 0]
  chosen = factors[:, used]
  if estimator == "histogram":
    mi = mutual_information_matrix_histogram(rep, chosen, num_bins)
  else:
    mi = mutual_information_matrix_sampled(rep, chosen, rng, num_samples)
  score, gaps = mig_from_matrix(mi, entropies) if used else (float("nan"), np.zeros(0))
  return {
      "score": score,
      "per_factor": gaps,
      "mutual_information": mi,
      "factor_entropy": entropies,
      "factors_used": used,
      "factor_names": [names[k] for k in used],
      "factor_set": factor_set,
      "estimator": estimator,
      "protocol": PROTOCOL_OF[estimator] + ("+discrete_codes" if use_discrete else ""),
      "use_discrete": use_discrete,
      "source": ("disentanglement_lib histogram (means)" if estimator == "histogram"
                 else "Chen et al. 2018 sampled entropies (mean, logvar)"),
      "num_points": int(num_points),
      "num_bins": int(num_bins) if estimator == "histogram" else None,
      "num_samples": num_samples if estimator == "sampled" else None,
      "discrete_dim": rep.num_continuous if use_discrete else None,
      "num_discrete_rows": 0 if not use_discrete else int(rep.codes.shape[1]),
      "encode_batch_size": encode_batch_size,
      "units": "nats",
  }
