"""The representation a metric reads from an encoder, and batched encoding on the host.

A representation function maps a batch of observations to a `Representation`: the posterior
mean of the continuous code (what disentanglement_lib calls the representation), optionally its
log-variance (needed for KL pruning, CascadeVAE supplement C, and for the sampled estimators of
Chen et al. 2018), optionally one discrete code per example (CascadeVAE's d = z_{m+1},
JointVAE's argmax c) and optionally K discrete codes per example (``discrete_codes`` [n, K]: the
argmaxes of K categorical variables, PartedVAE Sec. 4; column 0 is ``discrete``). A plain array is
read as the mean alone; a mapping with keys ``mean``/``logvar``/``discrete``/``discrete_codes`` is
accepted too.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple, Optional

import numpy as np


class Representation(NamedTuple):
  """Encoder output for n examples.

  Attributes:
    mean: float [n, m], posterior means of the m continuous dimensions.
    logvar: optional float [n, m], posterior log-variances log sigma^2.
    discrete: optional int [n], one discrete code per example (class index); with several
      codes, the first (``discrete_codes[:, 0]``).
    discrete_codes: optional int [n, K], one class index per example for each of K categorical
      variables; None when the encoder has at most one discrete code.
  """
  mean: np.ndarray
  logvar: Optional[np.ndarray] = None
  discrete: Optional[np.ndarray] = None
  discrete_codes: Optional[np.ndarray] = None

  @property
  def num_examples(self) -> int:
    """n, the number of examples."""
    return int(self.mean.shape[0])

  @property
  def num_continuous(self) -> int:
    """m, the number of continuous dimensions."""
    return int(self.mean.shape[1])

  @property
  def codes(self) -> Optional[np.ndarray]:
    """Every discrete code as int [n, K] (K = 1 for a single code); None without one."""
    if self.discrete_codes is not None:
      return self.discrete_codes
    return None if self.discrete is None else self.discrete[:, None]

  def take(self, index) -> "Representation":
    """Rows `index` of every field (fancy indexing or a slice)."""
    return Representation(*(None if v is None else v[index] for v in self))

  def without_discrete(self) -> "Representation":
    """The continuous part alone (every discrete code dropped)."""
    return self._replace(discrete=None, discrete_codes=None)


def as_representation(value: Any) -> Representation:
  """Reads an encoder output (Representation, mapping, tuple or array) as numpy arrays.

  The mean becomes float64 [n, m] (a 1-D array is one dimension), the log-variance float64,
  the discrete code int64 [n] (an [n, 1] column is flattened), the discrete codes int64 [n, K]
  (a 1-D array is one code). Given the codes alone, ``discrete`` is their first column; given
  both, ``discrete`` must equal that column.
  """
  if isinstance(value, Representation):
    mean, logvar, discrete, codes = value
  elif isinstance(value, Mapping):
    mean, logvar, discrete, codes = (value["mean"], value.get("logvar"), value.get("discrete"),
                                     value.get("discrete_codes"))
  elif isinstance(value, tuple):
    mean, logvar, discrete, codes = (tuple(value) + (None, None, None))[:4]
  else:
    mean, logvar, discrete, codes = value, None, None, None
  mean = np.asarray(mean, dtype=np.float64)
  if mean.ndim == 1:
    mean = mean[:, None]
  if mean.ndim != 2:
    raise ValueError(f"representation mean must be [n, m], got shape {mean.shape}")
  if logvar is not None:
    logvar = np.asarray(logvar, dtype=np.float64).reshape(mean.shape)
  if discrete is not None:
    discrete = np.asarray(discrete)
    if discrete.ndim == 2 and discrete.shape[1] == 1:
      discrete = discrete[:, 0]
    if discrete.shape != (mean.shape[0],):
      raise ValueError(f"discrete code must be [n], got shape {discrete.shape}")
    if not np.issubdtype(discrete.dtype, np.integer):
      raise ValueError(f"discrete code must be integer class indices, got {discrete.dtype}")
    discrete = discrete.astype(np.int64)
  if codes is not None:
    codes = np.asarray(codes)
    if codes.ndim == 1:
      codes = codes[:, None]
    if codes.ndim != 2 or codes.shape[0] != mean.shape[0] or codes.shape[1] < 1:
      raise ValueError(f"discrete codes must be [n, K], got shape {codes.shape}")
    if not np.issubdtype(codes.dtype, np.integer):
      raise ValueError(f"discrete codes must be integer class indices, got {codes.dtype}")
    codes = codes.astype(np.int64)
    if discrete is None:
      discrete = codes[:, 0].copy()
    elif not np.array_equal(discrete, codes[:, 0]):
      raise ValueError("the discrete code must be the first column of the discrete codes")
  return Representation(mean, logvar, discrete, codes)


def concatenate(parts: list[Representation]) -> Representation:
  """Concatenates representations along the example axis."""
  if not parts:
    raise ValueError("nothing to concatenate")
  def cat(field):
    values = [getattr(p, field) for p in parts]
    if any(v is None for v in values):
      if not all(v is None for v in values):
        raise ValueError(f"field {field!r} present in some batches only")
      return None
    return np.concatenate(values, axis=0)
  return Representation(*(cat(field) for field in Representation._fields))


def encode_in_batches(representation_fn: Callable[[np.ndarray], Any], images: np.ndarray,
                      batch_size: int) -> Representation:
  """Applies `representation_fn` to `images` in batches and concatenates the results; the last
  batch is padded with copies of its last example, so that every call sees exactly
  `batch_size` rows (a jitted encoder then compiles once, whatever n is); the padded rows are
  dropped from the result.

  Args:
    representation_fn: maps observations [k, ...] to a `Representation` (or array) of k rows.
    images: observations [n, ...].
    batch_size: examples per call.

  Returns:
    The `Representation` of all n examples, numpy arrays (mean float64).
  """
  images = np.asarray(images)
  n = len(images)
  if n == 0:
    raise ValueError("no images to encode")
  parts = []
  for start in range(0, n, batch_size):
    batch = images[start:start + batch_size]
    k = len(batch)
    if k < batch_size:
      filler = np.repeat(batch[-1:], batch_size - k, axis=0)
      batch = np.concatenate([batch, filler], axis=0)
    out = as_representation(representation_fn(batch))
    if out.num_examples < k:
      raise ValueError(f"representation_fn returned {out.num_examples} rows for {k} inputs")
    parts.append(out.take(slice(0, k)))
  return concatenate(parts)


class MetricInputError(ValueError):
  """A metric cannot run on these inputs (no factors, too few points, NaN); one line of cause."""


def encode_factors(dataset, representation_fn: Callable[[np.ndarray], Any], factors: np.ndarray,
                   rng: np.random.Generator, batch_size: int) -> Representation:
  """Encodes the observations of the given factor rows, fetching `batch_size` at a time.

  Only one batch of observations is held in memory, so the whole of dSprites (737,280 images)
  can be encoded. The last batch is padded to `batch_size` (see `encode_in_batches`). Raises
  `MetricInputError` when a posterior mean is NaN or infinite.
  """
  factors = np.asarray(factors)
  parts = []
  for start in range(0, len(factors), batch_size):
    chunk = factors[start:start + batch_size]
    observations = dataset.sample_observations_from_factors(chunk, rng)
    parts.append(encode_in_batches(representation_fn, observations, batch_size))
  rep = concatenate(parts)
  bad = ~np.isfinite(rep.mean)
  if bad.any():
    dims = sorted({int(j) for j in np.nonzero(bad)[1]})
    raise MetricInputError(f"the representation has NaN or inf on the sampled points "
                           f"(dims {dims})")
  return rep


def dataset_size(dataset) -> Optional[int]:
  """Number of stored examples: `num_examples`, else `len(dataset)`, else None."""
  n = getattr(dataset, "num_examples", None)
  if n is None and hasattr(dataset, "__len__"):
    n = len(dataset)
  return None if n is None else int(n)


def enumerate_factors(dataset) -> Optional[np.ndarray]:
  """Factor rows of every stored example, or None when the dataset cannot be enumerated.

  Uses the dataset's `factors` array [N, K] when it has one (e.g. `InMemoryGroundTruth`);
  otherwise, when the dataset is a complete grid (prod(factor_sizes) == number of examples, as
  dSprites), every combination in C order (last factor fastest).
  """
  factors = getattr(dataset, "factors", None)
  if factors is not None:
    return np.asarray(factors, dtype=np.int64)
  sizes = tuple(int(s) for s in dataset.factor_sizes)
  n = dataset_size(dataset)
  if n is not None and int(np.prod(sizes)) == n:
    return np.indices(sizes).reshape(len(sizes), -1).T.astype(np.int64)
  return None
