"""Encode a dataset once and serve the encodings to the ground-truth metrics.

The disentanglement metrics (`disentangle.metrics`) talk to a ground-truth dataset and a
representation function. On data that can be enumerated (dSprites: 737,280 images on a complete
factor grid) the CascadeVAE protocol needs the encodings of the whole dataset (global variances;
the authors draw the votes from those encodings too), and MIG and the shape accuracy can read the
same encodings. `encode_streamed` encodes in batches, fetching the device's output of batch i only
after producing the images of batch i+1 on the host, so rendering or reading overlaps encoding;
`EncodedGroundTruth` serves the encodings through the ground-truth protocol (observations are row
numbers), so no image is encoded twice.
"""
from __future__ import annotations

import time
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from disentangle import metrics
from disentangle.metrics import representation as rep_lib
from disentangle.train import host

WHOLE_DATASET_MAX = 1_000_000  # largest ground-truth set encoded whole (as the metrics)
# Images per encoder call, and rows per step of `micro_batched` inside it (a row-wise
# ``represent``): one size on every backend. On XLA:CPU cache-sized micro-batches inside one
# program run fastest: 192 / 32 as fast as 384 / 32 and faster than 96 or 1000 per call and 16,
# 48, 64 or no micro-batches (benchmarks/HISTORY.md, "Evaluation batches"). No other backend
# has measured a size of its own.
ENCODE_BATCH = 192
MICRO_BATCH = 32


def micro_batched(method) -> Callable:
  """``method.represent(params, images)`` computed `MICRO_BATCH` rows at a time with ``lax.map``
  when it is row-wise (row i depends on image i alone; the same result up to float rounding).
  Batches that `MICRO_BATCH` does not divide, or no larger than it, are computed whole."""
  represent = method.represent
  if not method.rowwise_represent:
    return represent

  def fn(params, images):
    n = images.shape[0]
    if n <= MICRO_BATCH or n % MICRO_BATCH:
      return represent(params, images)
    chunks = images.reshape((n // MICRO_BATCH, MICRO_BATCH) + images.shape[1:])
    out = jax.lax.map(lambda x: represent(params, x), chunks)
    return jax.tree_util.tree_map(lambda a: a.reshape((n,) + a.shape[2:]), out)

  return fn


def jit_represent(method, config=None) -> Callable:
  """The jitted `micro_batched` ``method.represent`` of evaluation; ``config``: the run's
  (compiler options, `disentangle.train.host.jit`)."""
  return host.jit(micro_batched(method), config)


def is_ground_truth(dataset) -> bool:
  return all(hasattr(dataset, a) for a in ("factor_sizes", "sample_factors",
                                           "sample_observations_from_factors"))


# -- encoding ---------------------------------------------------------------------------------

def enumerate_rows(dataset) -> tuple[Optional[np.ndarray], bool]:
  """Factor rows [N, K] of every stored example, and whether row i is example ``get_images(i)``.

  A ``factors_of(indices)`` method (``DSprites``: row i is ``get_images(i)``), a ``factors``
  array (``InMemoryGroundTruth``), or every combination of a complete grid (C order);
  (None, False) when none applies, and for a set that draws every observation anew
  (``draws_per_sample``: the colour, noisy and scream dSprites as disentanglement_lib draws them,
  ``dsprites_variants``), which has no fixed image per row to encode once: the metrics sample.
  """
  if getattr(dataset, "draws_per_sample", False):
    return None, False
  n = rep_lib.dataset_size(dataset)
  factors_of = getattr(dataset, "factors_of", None)
  if factors_of is not None and n is not None:
    return np.asarray(factors_of(np.arange(n)), np.int64), hasattr(dataset, "get_images")
  factors = getattr(dataset, "factors", None)
  if factors is not None:
    return np.asarray(factors, np.int64), False
  sizes = tuple(int(s) for s in dataset.factor_sizes)
  if n is not None and int(np.prod(sizes)) == n:
    return np.indices(sizes).reshape(len(sizes), -1).T.astype(np.int64), False
  return None, False


def _fetch(out, k: int) -> metrics.Representation:
  return metrics.as_representation(jax.device_get(out)).take(slice(0, k))


def encode_streamed(get_batch: Callable[[int, int], np.ndarray], n: int, represent,
                    batch_size: int) -> tuple[metrics.Representation, dict]:
  """Encodes ``get_batch(start, stop)`` for every batch of ``range(n)``; (rep, timings).

  ``represent`` (jitted, images -> dict) is dispatched asynchronously and its result fetched one
  batch later, so producing batch i+1 on the host (reading, rendering) overlaps the device's
  work on batch i. Every call sees ``batch_size`` rows (the last batch is padded), so the encoder
  compiles once. Timings: ``images_s`` (host time producing images), ``total_s``.
  """
  t_start, t_images = time.perf_counter(), 0.0
  batch_size = min(batch_size, n)
  parts, pending = [], None
  for start in range(0, n, batch_size):
    t0 = time.perf_counter()
    images = np.asarray(get_batch(start, min(n, start + batch_size)), np.float32)
    k = len(images)
    if k < batch_size:
      images = np.concatenate([images, np.repeat(images[-1:], batch_size - k, axis=0)])
    t_images += time.perf_counter() - t0
    out = represent(jax.device_put(images))
    if pending is not None:
      parts.append(_fetch(*pending))
    pending = (out, k)
  parts.append(_fetch(*pending))
  rep = rep_lib.concatenate(parts)
  return rep, {"images_s": t_images, "total_s": time.perf_counter() - t_start,
               "num_images": n, "batch_size": batch_size}


class EncodedGroundTruth:
  """The ground-truth protocol over precomputed encodings: observations are row numbers.

  ``sample_observations_from_factors`` returns int64 row numbers [n] of stored examples with the
  requested factors (random among duplicates; no randomness is drawn when rows are unique) and
  `represent` maps row numbers to their stored `Representation`, so the metrics see the encodings
  of the dataset's own examples without running the encoder again.

  Args:
    rows: factor rows [N, K] of the encoded examples.
    rep: their `Representation` (N rows).
    factor_sizes: number of values of each factor.
    sample_factors: the encoded dataset's ``sample_factors`` (same distribution and random stream
      as calling a metric on that dataset directly); None draws rows of ``rows`` uniformly.
    part: what these rows are of the set when they are not all of it (`Part.record`); None:
      the set itself.
  """

  def __init__(self, rows: np.ndarray, rep: metrics.Representation, factor_sizes,
               sample_factors: Optional[Callable] = None, part: Optional[dict] = None):
    self.factors = np.asarray(rows, np.int64)
    self.part = part
    if rep.num_examples != len(self.factors):
      raise ValueError(f"{rep.num_examples} encodings for {len(self.factors)} rows")
    self.rep = rep
    self._sample = sample_factors
    self._sizes = tuple(int(s) for s in factor_sizes)
    self._radix = np.cumprod((1,) + self._sizes[:-1]).astype(np.int64)
    codes = self.factors @ self._radix
    self._order = np.argsort(codes, kind="stable")
    self._sorted = codes[self._order]
    self._unique = bool(np.all(np.diff(self._sorted) > 0))

  @property
  def factor_sizes(self) -> tuple[int, ...]:
    return self._sizes

  @property
  def num_examples(self) -> int:
    return len(self.factors)

  def __len__(self) -> int:
    return len(self.factors)

  def sample_factors(self, num: int, rng: np.random.Generator) -> np.ndarray:
    if self._sample is not None:
      return self._sample(num, rng)
    return self.factors[rng.integers(0, len(self.factors), size=num)]

  def sample_observations_from_factors(self, factors, rng: np.random.Generator) -> np.ndarray:
    codes = np.asarray(factors, np.int64) @ self._radix
    lo = np.searchsorted(self._sorted, codes, side="left")
    hi = np.searchsorted(self._sorted, codes, side="right")
    if np.any(hi == lo):
      raise KeyError(f"no encoded example has factors {np.asarray(factors)[hi == lo][0].tolist()}")
    if not self._unique:
      lo = lo + np.floor(rng.random(len(codes)) * (hi - lo)).astype(np.int64)
    return self._order[lo]

  def represent(self, rows) -> metrics.Representation:
    return self.rep.take(np.asarray(rows, np.int64))


def host_fn(represent_jit, params):
  def fn(images):
    return jax.device_get(represent_jit(params, jnp.asarray(images)))
  return fn


def thinned_sizes(factor_sizes, max_rows: int) -> tuple[int, ...]:
  """The values kept of each factor so that their grid holds at most ``max_rows`` rows: the
  factor with the most values kept is halved (rounded up) until the product fits; a factor keeps
  at least one value."""
  kept = [int(n) for n in factor_sizes]
  while int(np.prod(kept)) > max_rows and max(kept) > 1:
    i = int(np.argmax(kept))
    kept[i] = (kept[i] + 1) // 2
  return tuple(kept)


def thinned_grid(rows: np.ndarray, factor_sizes, max_rows: int):
  """(positions in ``rows``, their factor rows renumbered 0..k-1, the kept sizes k) of a thinned
  grid: `thinned_sizes` evenly spaced values of each factor, every combination of them; None
  when ``rows`` does not hold every combination once (not a complete grid)."""
  sizes = tuple(int(n) for n in factor_sizes)
  kept = thinned_sizes(sizes, max_rows)
  values = [np.unique(np.round(np.linspace(0, n - 1, k)).astype(np.int64))
            for n, k in zip(sizes, kept)]
  mask = np.ones(len(rows), bool)
  for j, v in enumerate(values):
    mask &= np.isin(rows[:, j], v)
  picked = np.flatnonzero(mask)
  renumbered = np.stack([np.searchsorted(v, rows[picked, j]) for j, v in enumerate(values)],
                        axis=1) if len(picked) else np.zeros((0, len(sizes)), np.int64)
  if len(picked) != int(np.prod(kept)) or len(np.unique(renumbered, axis=0)) != len(picked):
    return None
  return picked, renumbered.astype(np.int64), kept


class Part(NamedTuple):
  """The rows of a set that its metrics read in its place (`part_of`)."""
  picked: np.ndarray  # their positions in the set's rows
  factors: np.ndarray  # their factor rows as the metrics read them
  factor_sizes: tuple  # the factor sizes the metrics read
  record: dict  # what the results say of them


def part_of(rows: np.ndarray, factor_sizes, max_rows: int) -> Optional[Part]:
  """At most ``max_rows`` of a set's factor ``rows`` to encode in its place; None when the set
  fits (or ``max_rows`` is 0). A complete grid: its thinned grid (`thinned_grid`, renumbered,
  so that every combination the metrics draw is there); another set: a sample of its rows
  (seeded, in their order), read as the set itself is read."""
  if not max_rows or len(rows) <= max_rows:
    return None
  sizes = tuple(int(n) for n in factor_sizes)
  grid = thinned_grid(rows, sizes, max_rows)
  if grid is not None:
    picked, renumbered, kept = grid
    return Part(picked, renumbered, kept, {"kind": "thinned_grid", "factor_sizes": list(kept),
                                           "of_factor_sizes": list(sizes),
                                           "num_images": len(picked)})
  picked = np.sort(np.random.default_rng(0).choice(len(rows), max_rows, replace=False))
  return Part(picked, rows[picked], sizes, {"kind": "sampled_rows", "num_images": int(max_rows),
                                            "of_rows": len(rows)})


def encode_ground_truth(dataset, represent_jit, params, *, batch_size: Optional[int] = None,
                        whole_dataset_max: int = WHOLE_DATASET_MAX, max_rows: int = 0):
  """(EncodedGroundTruth, rows_are_indices, timings) of the whole dataset, or (None, False, {}).

  ``max_rows`` > 0 and a larger set: `part_of` it is encoded instead (at most that many images)
  and the metrics read it as the set, its factors drawn uniformly over its rows (``part``
  says what it is).
  """
  batch_size = batch_size or ENCODE_BATCH
  rows, are_indices = enumerate_rows(dataset)
  if rows is None or len(rows) > whole_dataset_max:
    return None, False, {}
  sizes, sample, picked = dataset.factor_sizes, dataset.sample_factors, None
  part = part_of(rows, sizes, max_rows)
  if part is not None:
    picked, factor_rows, sizes = part.picked, part.factors, part.factor_sizes
    sample = None  # uniform over the rows encoded, as the set's own draws are over its rows
  rng = np.random.default_rng(0)  # only used to pick among duplicate factor rows
  if picked is not None and are_indices:
    get = lambda a, b: dataset.get_images(picked[a:b])
  elif picked is not None:
    get = lambda a, b: dataset.sample_observations_from_factors(rows[picked[a:b]], rng)
  elif are_indices:
    get = lambda a, b: dataset.get_images(np.arange(a, b))
  else:
    get = lambda a, b: dataset.sample_observations_from_factors(rows[a:b], rng)
  n = len(rows) if picked is None else len(picked)
  rep, timings = encode_streamed(get, n, lambda x: represent_jit(params, x), batch_size)
  encoded = EncodedGroundTruth(rows if picked is None else factor_rows, rep, sizes, sample,
                               part=None if part is None else part.record)
  return encoded, are_indices and picked is None, timings
