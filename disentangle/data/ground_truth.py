"""The ground-truth dataset protocol of disentanglement_lib, for factor-labelled data.

A ground-truth dataset exposes its factors of variation as integer classes. Metrics
(`disentangle.metrics`) only talk to this protocol, never to a concrete dataset:

- ``factor_sizes``: tuple of ints, the number of values of each factor (K factors);
- ``sample_factors(num, rng)``: int array [num, K] of factor classes drawn from the data
  distribution (uniform over the stored examples);
- ``sample_observations_from_factors(factors, rng)``: float32 images [num, H, W, C] in [0, 1]
  showing those factors (when several examples share the factors, one is drawn with ``rng``).

``rng`` is a ``numpy.random.Generator`` everywhere.
"""
from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from disentangle.data import arrays
from disentangle.data.labels import supervision


@runtime_checkable
class GroundTruthData(Protocol):
  """Factor-labelled dataset (disentanglement_lib's `GroundTruthData`)."""

  @property
  def factor_sizes(self) -> Sequence[int]:
    """The number of values of each of the K factors."""
    ...

  def sample_factors(self, num: int, rng: np.random.Generator) -> np.ndarray:
    """int array [num, K] of factor classes drawn from the data distribution."""
    ...

  def sample_observations_from_factors(self, factors: np.ndarray,
                                       rng: np.random.Generator) -> np.ndarray:
    """float32 images [num, H, W, C] in [0, 1] showing ``factors`` [num, K] (one drawn with
    ``rng`` where several examples share them)."""
    ...


def _as_images(observations: np.ndarray) -> np.ndarray:
  """uint8 [0, 255] or float [0, 1] images, [N, H, W] or [N, H, W, C] -> float32 NHWC."""
  x = np.asarray(observations)
  if x.ndim == 3:
    x = x[..., None]
  if x.ndim != 4:
    raise ValueError(f"observations must be [N, H, W] or [N, H, W, C], got shape {x.shape}")
  if x.dtype == np.uint8:
    return x.astype(np.float32) / 255.0
  return x.astype(np.float32)


class InMemoryGroundTruth(supervision.Supervision):
  """A ground-truth dataset built from arrays; with image observations also a training set.

  Args:
    factors: int array [N, K]; factor classes of each observation, each column in
      ``[0, factor_sizes[k])``.
    observations: [N, ...] array; images (uint8 or float in [0, 1]) or any feature vectors.
    factor_sizes: optional; defaults to ``factors.max(0) + 1``.
    factor_names: optional names of the K factors (default ``factor_0``, ...): every factor is
      the target column of its name (``targets_of``), with its factor size as class count.
    attributes: optional binary columns, name -> int [N] in {0, 1} (``attributes_of``).

  ``sample_factors`` draws rows of ``factors`` uniformly (the empirical factor distribution);
  ``sample_observations_from_factors`` returns, for each requested factor row, a random stored
  observation with exactly those factors, and raises ``KeyError`` for a combination never seen.
  """

  def __init__(self, factors, observations, factor_sizes: Sequence[int] | None = None,
               factor_names: Sequence[str] | None = None,
               attributes: dict[str, np.ndarray] | None = None, name: str = ""):
    factors = np.asarray(factors)
    if factors.ndim != 2 or not np.issubdtype(factors.dtype, np.integer):
      raise ValueError(f"factors must be an int array [N, K], got {factors.dtype} {factors.shape}")
    observations = np.asarray(observations)
    if len(observations) != len(factors):
      raise ValueError(f"factors has {len(factors)} rows but observations has {len(observations)}")
    if factors.min(initial=0) < 0:
      raise ValueError("factors must be non-negative class indices")
    sizes = tuple(int(s) for s in (factors.max(0) + 1 if factor_sizes is None else factor_sizes))
    if len(sizes) != factors.shape[1] or np.any(factors.max(0) >= np.asarray(sizes)):
      raise ValueError(f"factor_sizes {sizes} do not cover factors with maxima {factors.max(0)}")
    self._factors = factors.astype(np.int64)
    self._observations = observations
    self._sizes = sizes
    # Mixed-radix code of each row -> indices of the rows with that code.
    self._radix = np.cumprod((1,) + sizes[:-1]).astype(np.int64)
    codes = self._factors @ self._radix
    order = np.argsort(codes, kind="stable")
    self._sorted_codes = codes[order]
    self._order = order
    names = (tuple(f"factor_{k}" for k in range(len(sizes))) if factor_names is None
             else tuple(str(n) for n in factor_names))
    if len(names) != len(sizes) or len(set(names)) != len(names):
      raise ValueError(f"factor_names {names} must be {len(sizes)} distinct names")
    self._names = names
    self.name = name
    self._set_supervision(len(factors), {n: self._factors[:, k] for k, n in enumerate(names)},
                          dict(zip(names, sizes)), attributes)

  @property
  def factor_names(self) -> tuple[str, ...]:
    """The names of the K factors, also their target names (``targets_of``)."""
    return self._names

  # --- training-set interface (image observations) ---------------------------------------------
  @property
  def num_examples(self) -> int:
    """N, the number of stored observations."""
    return len(self._factors)

  @property
  def image_shape(self) -> tuple[int, ...]:
    """The shape of one observation; [H, W] images read as (H, W, 1)."""
    shape = self._observations.shape[1:]
    return tuple(int(s) for s in (shape + (1,) if len(shape) == 2 else shape))

  @property
  def labels(self) -> None:
    """None: no label column (the factors are the target columns, ``targets_of``)."""
    return None

  def get_images(self, indices) -> np.ndarray:
    """float32 images [n, H, W, C] in [0, 1] of rows ``indices``."""
    return _as_images(self._observations[np.asarray(indices, np.int64)])

  def compact_images(self) -> arrays.CompactImages | None:
    """Image observations ([N, H, W] or [N, H, W, C]) as stored; None for feature vectors."""
    if self._observations.ndim not in (3, 4):
      return None
    return arrays.compact_of(self._observations, _as_images)

  @property
  def factor_sizes(self) -> tuple[int, ...]:
    """The number of values of each factor (those given, else ``factors.max(0) + 1``)."""
    return self._sizes

  @property
  def factors(self) -> np.ndarray:
    """int64 [N, K]: the factor classes of every stored observation."""
    return self._factors

  def __len__(self) -> int:
    return len(self._factors)

  def sample_factors(self, num: int, rng: np.random.Generator) -> np.ndarray:
    """int64 [num, K]: rows of ``factors`` drawn uniformly (the empirical factor distribution)."""
    return self._factors[rng.integers(0, len(self._factors), size=num)]

  def factors_of(self, indices) -> np.ndarray:
    """int64 [n, K]: the factor classes of rows ``indices``."""
    return self._factors[np.asarray(indices, np.int64)]

  def indices_of_factors(self, factors, rng: np.random.Generator | None = None) -> np.ndarray:
    """Rows showing ``factors`` [n, K] (uniform among several with ``rng``, else the first);
    ``KeyError`` for a combination never seen."""
    codes = np.asarray(factors, dtype=np.int64) @ self._radix
    lo = np.searchsorted(self._sorted_codes, codes, side="left")
    hi = np.searchsorted(self._sorted_codes, codes, side="right")
    if np.any(hi == lo):
      missing = np.asarray(factors)[hi == lo][0]
      raise KeyError(f"no stored observation has factors {missing.tolist()}")
    offset = 0 if rng is None else np.floor(rng.random(len(codes)) * (hi - lo)).astype(np.int64)
    return self._order[lo + offset]

  def sample_observations_from_factors(self, factors, rng: np.random.Generator) -> np.ndarray:
    """For each row of ``factors`` [n, K], a random stored observation with exactly those
    factors: images as float32 NHWC in [0, 1], feature vectors as float32; ``KeyError`` for a
    combination never seen."""
    obs = self._observations[self.indices_of_factors(factors, rng)]
    return _as_images(obs) if obs.ndim >= 3 else obs.astype(np.float32)
