"""Points of a ground-truth dataset for the disentanglement_lib metrics, and their features.

disentanglement_lib's metrics (`evaluation/metrics/utils.py::generate_batch_factor_code`) draw
``num_points`` factor rows from the dataset, an observation for each, and read the posterior
means. `sample_points` does the same through the ground-truth protocol (with the whole dataset's
encodings, `disentangle.evaluation.encodings.EncodedGroundTruth`, no image is encoded again) and
refuses bad input with a `MetricInputError` of one line: no ground truth, fewer points than a
split needs, NaN in the representation.

The discrete code(s) (CascadeVAE's d, JointVAE's and PartedVAE's argmaxes): disentanglement_lib
reads the continuous means alone (``protocol='disentanglement_lib'``). Where a metric's
definition extends to a categorical latent, `features` appends each code as a one-hot block
(``protocol='disentanglement_lib+discrete_codes'``); `groups` says which columns form each latent
(one column per continuous dimension, one block per code), so a metric with one classifier or
one importance per latent (SAP, DCI) treats a code as one latent.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from disentangle.metrics.representation import MetricInputError
from disentangle.metrics.representation import Representation
from disentangle.metrics.representation import encode_factors

PROTOCOL = "disentanglement_lib"
PROTOCOL_DISCRETE = "disentanglement_lib+discrete_codes"


def check_ground_truth(dataset) -> None:
  if dataset is None or not all(hasattr(dataset, a) for a in (
      "factor_sizes", "sample_factors", "sample_observations_from_factors")):
    raise MetricInputError("needs ground-truth factors; the evaluation data has none")


def check_finite(rep: Representation, where: str = "the sampled points") -> None:
  bad = ~np.isfinite(rep.mean)
  if bad.any():
    dims = sorted({int(j) for j in np.nonzero(bad)[1]})
    raise MetricInputError(f"the representation has NaN or inf on {where} (dims {dims})")


def sample_points(dataset, represent, num_points: int, rng: np.random.Generator,
                  encode_batch_size: int = 1000,
                  minimum: int = 2) -> tuple[Representation, np.ndarray]:
  """(representation, factors [n, K]) of ``num_points`` points drawn from ``dataset``."""
  check_ground_truth(dataset)
  if num_points < minimum:
    raise MetricInputError(f"needs at least {minimum} points, got {num_points}")
  factors = np.asarray(dataset.sample_factors(int(num_points), rng), np.int64)
  rep = encode_factors(dataset, represent, factors, rng, encode_batch_size)
  check_finite(rep)
  return rep, factors


def one_hot(codes: np.ndarray, num_classes: Optional[int] = None) -> np.ndarray:
  codes = np.asarray(codes, np.int64)
  c = int(num_classes if num_classes is not None else codes.max(initial=0) + 1)
  return np.eye(c)[codes]


def code_sizes(*reps: Representation) -> list[int]:
  """Number of classes of each discrete code over ``reps`` (so train and test blocks match)."""
  codes = [r.codes for r in reps if r.codes is not None]
  if not codes:
    return []
  return [int(max(c[:, k].max(initial=0) for c in codes)) + 1 for k in range(codes[0].shape[1])]


def features(rep: Representation, with_codes: bool,
             sizes: Optional[list[int]] = None) -> tuple[np.ndarray, list[np.ndarray]]:
  """(columns [n, d'], groups): the means, then one one-hot block per code when asked."""
  cols = [rep.mean]
  groups = [np.array([j]) for j in range(rep.num_continuous)]
  if with_codes and rep.codes is not None:
    sizes = sizes or code_sizes(rep)
    start = rep.num_continuous
    for k, c in enumerate(sizes):
      cols.append(one_hot(rep.codes[:, k], c))
      groups.append(np.arange(start, start + c))
      start += c
  return np.concatenate(cols, axis=1), groups


def protocols(rep: Representation, extends: bool) -> list[tuple[str, bool]]:
  """[(protocol, with_codes)]: the means alone, and the codes too where there are codes and the
  metric's definition extends to them."""
  out = [(PROTOCOL, False)]
  if extends and rep.codes is not None:
    out.append((PROTOCOL_DISCRETE, True))
  return out


def histogram_discretize(values: np.ndarray, num_bins: int) -> np.ndarray:
  """Bin index per column of ``values`` [n, d]: ``np.digitize(x, np.histogram(x, bins)[1][:-1])``,
  disentanglement_lib's `utils._histogram_discretize` (20 bins in its studies)."""
  out = np.zeros(values.shape, np.int64)
  for j in range(values.shape[1]):
    out[:, j] = np.digitize(values[:, j], np.histogram(values[:, j], num_bins)[1][:-1])
  return out


def normalize(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Both standardised by the train columns' mean and std (`utils.normalize_data`); departure:
  a constant column (std 0, NaN there) is divided by 1."""
  mean, std = train.mean(axis=0), train.std(axis=0)
  std = np.where(std > 0, std, 1.0)
  return (train - mean) / std, (test - mean) / std
