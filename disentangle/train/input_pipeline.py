"""Deterministic, resumable minibatches: the batch of step s is a pure function of (seed, s).

Each epoch is a permutation of the training set drawn from ``PCG64([seed, epoch])``; the global
batch of step s is the slice [s*B, (s+1)*B) of the concatenated epochs. Resuming at any step gives
the same batches without saving iterator state. In multi-process runs each process loads only its
contiguous share of the global batch (``process_index``-th of ``process_count``).

:func:`make_source` builds the source a method's ``BatchSpec`` asks for
(``disentangle.data.labels.batch_spec``): the image-only :class:`BatchSource` (today's batch, bit for
bit), or :class:`SideInfoSource`, which adds "targets" / "attributes" of the same rows and, for a
labelled spec, the second stream "labelled_image" / "labelled_targets": at step s, the first B_l
entries of a permutation of the labelled subset drawn from ``PCG64([seed, LABELLED_STREAM, s])``
(B_l distinct members; the authors take the first 64 of a fresh shuffle each iteration). The
subset itself comes from ``LabelledSpec.seed`` (``data.labels.labelled``), the order from the run seed.

A spec with ``pairs`` gives a :class:`PairSource`: each row of the image stream is the first
observation of a pair, the second ("image_pair") shares all its factors but the ones marked in
"changed" (`disentangle.data.labels.pairs`), drawn from ``PCG64([seed, PAIR_STREAM, step])`` for
the global batch, so that a process's share does not depend on how many processes split it.

Every source also gives the rows of its batch without loading them (``local_rows``: "index",
"labelled_index" for a labelled spec, "pair_index" and "changed" for pairs, int32);
:class:`RowSource` yields those instead of the batch, for a training set held on the device
(`disentangle.train.device_data`).

A set that draws every image anew (``draws_per_sample``: the colour, noisy and scream dSprites
under ``dataset.variant_draw='per_sample'``, `disentangle.data.datasets.dsprites_variants`) is
painted with the keys of (run seed, step, stream, place in the global batch)
(`dsprites_draws.batch_keys`; streams ``IMAGE``, ``LABELLED``, ``PAIR``): the rows then also
carry them, uint32 [B, 2] ("image_key", "labelled_key", "pair_key"), so that the device paints
the same images, and a process's share does not depend on how many processes split the batch.
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Iterator

import numpy as np

from disentangle import config as config_lib
from disentangle.data.datasets import dsprites_draws
from disentangle.data.labels import batch_spec as batch_spec_lib
from disentangle.data.labels import labelled as labelled_lib
from disentangle.data.labels import pairs as pairs_lib

LABELLED_STREAM = 0x1ABE1  # PCG64 key word of the labelled stream (the image stream has 2 words)
PAIR_STREAM = 0x9A125      # PCG64 key word of the pairs' second observations


def draws_per_sample(dataset) -> bool:
  """Whether ``dataset`` paints each image with a draw of its own (module docstring)."""
  return bool(getattr(dataset, "draws_per_sample", False))


def images_of(dataset, index, keys=None) -> np.ndarray:
  """The images of rows ``index``: ``get_images``, or painted with the draws of ``keys``."""
  return dataset.get_images(index) if keys is None else dataset.drawn_images(index, keys)


def _keys(seed: int, step: int, stream: int, start: int, count: int) -> np.ndarray:
  return dsprites_draws.batch_keys(seed, step, stream, np.arange(start, start + count))


class BatchSource:
  """Index arithmetic and loading of the global batch of each step."""

  def __init__(self, dataset, *, global_batch: int, seed: int, process_index: int = 0,
               process_count: int = 1):
    if global_batch % process_count:
      raise ValueError(f"batch_size {global_batch} is not divisible by the {process_count} "
                       f"processes")
    self.dataset = dataset
    self.n = int(dataset.num_examples)
    if self.n < 1:
      raise ValueError("the training set is empty")
    self.global_batch = global_batch
    self.seed = seed
    self.local = global_batch // process_count
    self.offset = process_index * self.local
    self.drawn = draws_per_sample(dataset)
    self._cache: dict[int, np.ndarray] = {}

  def _perm(self, epoch: int) -> np.ndarray:
    if epoch not in self._cache:
      if len(self._cache) > 2:
        self._cache.pop(min(self._cache))
      rng = np.random.Generator(np.random.PCG64([self.seed, epoch]))
      self._cache[epoch] = rng.permutation(self.n)
    return self._cache[epoch]

  def global_indices(self, step: int) -> np.ndarray:
    """Dataset indices of the global batch of ``step`` (all processes)."""
    start = step * self.global_batch
    pos = np.arange(start, start + self.global_batch, dtype=np.int64)
    epochs, within = np.divmod(pos, self.n)
    out = np.empty(self.global_batch, np.int64)
    for e in np.unique(epochs):
      sel = epochs == e
      out[sel] = self._perm(int(e))[within[sel]]
    return out

  def local_indices(self, step: int) -> np.ndarray:
    """This process's share of ``global_indices(step)``."""
    return self.global_indices(step)[self.offset:self.offset + self.local]

  def local_rows(self, step: int) -> dict:
    """{"index": int32 rows of this process's share of the batch of ``step``} (and their
    "image_key" for a set drawn per sample)."""
    rows = {"index": self.local_indices(step).astype(np.int32)}
    if self.drawn:
      rows["image_key"] = _keys(self.seed, step, dsprites_draws.IMAGE, self.offset, self.local)
    return rows

  def local_batch(self, step: int) -> dict:
    if self.drawn:
      rows = self.local_rows(step)
      return {"image": images_of(self.dataset, rows["index"], rows["image_key"])}
    return {"image": self.dataset.get_images(self.local_indices(step))}


class SideInfoSource:
  """The image batch of a :class:`BatchSource` plus the side information a ``BatchSpec`` names.

  Keys: "image"; "targets" int32 [B, K] and "attributes" int32 [B, A] of the same rows when the
  spec names them; with ``spec.labelled``, "labelled_image" and "labelled_targets" (int32
  [B_l, K], the columns of ``spec.targets``) of B_l distinct members of the labelled subset.
  Both streams are split over processes the same way (contiguous shares).
  """

  def __init__(self, dataset, spec: batch_spec_lib.BatchSpec, *, global_batch: int, seed: int,
               process_index: int = 0, process_count: int = 1):
    self.images = BatchSource(dataset, global_batch=global_batch, seed=seed,
                              process_index=process_index, process_count=process_count)
    self.dataset, self.spec, self.seed = dataset, spec, seed
    self.subset = None
    if spec.labelled is not None:
      lab = spec.labelled
      if lab.batch_size % process_count:
        raise config_lib.ConfigError(
            f"config field {lab.field_of('batch_size')!r} ({lab.batch_size}) must be divisible "
            f"by the {process_count} processes")
      self.subset = labelled_lib.subset_for(dataset, spec)
      self.labelled_local = lab.batch_size // process_count
      self.labelled_offset = process_index * self.labelled_local

  def labelled_indices(self, step: int) -> np.ndarray:
    """Dataset rows of the global labelled batch of ``step`` (all processes): B_l distinct
    members of the subset, a pure function of (run seed, step)."""
    rng = np.random.Generator(np.random.PCG64([self.seed, LABELLED_STREAM, step]))
    return self.subset[rng.permutation(len(self.subset))[:self.spec.labelled.batch_size]]

  def local_rows(self, step: int) -> dict:
    """This process's rows of the batch of ``step`` (int32): "index" (the image stream) and,
    with a labelled spec, "labelled_index" (and their keys for a set drawn per sample)."""
    rows = self.images.local_rows(step)
    if self.subset is not None:
      rows["labelled_index"] = self.labelled_indices(step)[
          self.labelled_offset:self.labelled_offset + self.labelled_local].astype(np.int32)
      if self.images.drawn:
        rows["labelled_key"] = _keys(self.seed, step, dsprites_draws.LABELLED,
                                     self.labelled_offset, self.labelled_local)
    return rows

  def local_batch(self, step: int) -> dict:
    return self._side_batch(self.local_rows(step))

  def _side_batch(self, rows: dict) -> dict:
    """The images and side information of ``rows`` (``local_rows``)."""
    idx = rows["index"]
    batch = {"image": images_of(self.dataset, idx, rows.get("image_key"))}
    if self.spec.targets:
      batch["targets"] = self.dataset.targets_of(idx, self.spec.targets)
    if self.spec.attributes:
      batch["attributes"] = self.dataset.attributes_of(idx, self.spec.attributes)
    if self.subset is not None:
      lidx = rows["labelled_index"]
      batch["labelled_image"] = images_of(self.dataset, lidx, rows.get("labelled_key"))
      batch["labelled_targets"] = self.dataset.targets_of(lidx, self.spec.targets)
    return batch


class PairSource(SideInfoSource):
  """A :class:`SideInfoSource` whose every row is the first observation of a pair.

  Keys besides the side information: "image_pair" (the second observations) and "changed"
  (int32 [B, K], 1 for the factors redrawn). The first observation is the image stream's row
  (today's batch); the second is drawn for the whole global batch from
  ``PCG64([seed, PAIR_STREAM, step])`` (`pairs.draw`, then the row among those that show the
  factors), and each process keeps its contiguous share.
  """

  def __init__(self, dataset, spec: batch_spec_lib.BatchSpec, **kwargs):
    super().__init__(dataset, spec, **kwargs)
    self.sizes = tuple(int(s) for s in dataset.factor_sizes)

  def global_pairs(self, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first rows, second rows, changed [B, K]) of the global batch of ``step``."""
    first = self.images.global_indices(step)
    rng = np.random.Generator(np.random.PCG64([self.seed, PAIR_STREAM, step]))
    partner, changed = pairs_lib.draw(self.dataset.factors_of(first), self.sizes,
                                      self.spec.pairs.k, rng, self.spec.pairs.dynamics)
    return first, np.asarray(self.dataset.indices_of_factors(partner, rng)), changed

  def local_rows(self, step: int) -> dict:
    """The rows of :meth:`SideInfoSource.local_rows` plus "pair_index" and "changed" (and
    "pair_key" for a set drawn per sample)."""
    rows = super().local_rows(step)
    _, second, changed = self.global_pairs(step)
    share = slice(self.images.offset, self.images.offset + self.images.local)
    rows["pair_index"] = second[share].astype(np.int32)
    rows["changed"] = changed[share].astype(np.int32)
    if self.images.drawn:
      rows["pair_key"] = _keys(self.seed, step, dsprites_draws.PAIR, self.images.offset,
                               self.images.local)
    return rows

  def local_batch(self, step: int) -> dict:
    rows = self.local_rows(step)
    batch = self._side_batch(rows)
    batch["image_pair"] = images_of(self.dataset, rows["pair_index"], rows.get("pair_key"))
    batch["changed"] = rows["changed"]
    return batch


def make_source(dataset, spec: batch_spec_lib.BatchSpec = batch_spec_lib.IMAGES_ONLY, *,
                global_batch: int, seed: int, process_index: int = 0, process_count: int = 1):
  """The batch source ``spec`` asks for; checks the spec's names against ``dataset`` first.

  ``IMAGES_ONLY`` gives the :class:`BatchSource` of before side information ({"image"}, the same
  rows bit for bit); a spec with pairs a :class:`PairSource`; any other a :class:`SideInfoSource`.

  Raises:
    ConfigError: a name the dataset lacks, an impossible labelled subset, or pairs of a set
      without ground-truth factors or with k out of range (naming the field).
  """
  labelled_lib.check_batch_spec(dataset, spec)
  if spec.pairs is not None:
    pairs_lib.check(dataset, spec.pairs)
  kwargs = dict(global_batch=global_batch, seed=seed, process_index=process_index,
                process_count=process_count)
  if spec.images_only:
    return BatchSource(dataset, **kwargs)
  if spec.pairs is not None:
    return PairSource(dataset, spec, **kwargs)
  return SideInfoSource(dataset, spec, **kwargs)


class MultiSeedSource:
  """N runs' batches stacked on a leading axis (for multi-seed / sweep training).

  ``index[r]``: the source of run r (default: run r reads ``sources[r]``); runs of one seed
  share a source, loaded once per step.
  """

  def __init__(self, sources: list, index: list[int] | None = None):
    self.sources = sources
    self.index = list(range(len(sources))) if index is None else list(index)

  def local_batch(self, step: int) -> dict:
    return self._stacked([s.local_batch(step) for s in self.sources])

  def local_rows(self, step: int) -> dict:
    return self._stacked([s.local_rows(step) for s in self.sources])

  def _stacked(self, batches: list[dict]) -> dict:
    return {k: np.stack([batches[i][k] for i in self.index]) for k in batches[0]}


class RowSource:
  """The rows of ``source``'s batches (``local_rows``) in place of the batches: the training set
  is on the device and the compiled step gathers the batch (`disentangle.train.device_data`)."""

  def __init__(self, source):
    self.source = source

  def local_batch(self, step: int) -> dict:
    return self.source.local_rows(step)


def prefetch(source, start_step: int, end_step: int, depth: int = 2,
             transfer: Callable[[dict], Any] | None = None) -> Iterator[tuple[int, Any]]:
  """Yield (step, batch) for steps [start, end), loading ``depth`` batches ahead on a thread.

  The batch is ``source.local_batch(step)``, or ``transfer(local_batch)`` when given: the
  trainer passes the device transfer (global arrays, waited for), so that the step is only
  dispatched on inputs that are already on the device: on XLA:CPU a step dispatched on a batch
  whose host-to-device copy is still pending costs more CPU time than on a ready one
  (``benchmarks.loop``; figures in benchmarks/HISTORY.md).
  """
  q: queue.Queue = queue.Queue(maxsize=depth)
  stop = threading.Event()

  def worker():
    try:
      for step in range(start_step, end_step):
        if stop.is_set():
          return
        batch = source.local_batch(step)
        q.put((step, batch if transfer is None else transfer(batch)))
    except BaseException as e:  # surfaced in the consumer
      q.put((None, e))
    q.put((None, None))

  thread = threading.Thread(target=worker, daemon=True)
  thread.start()
  try:
    while True:
      step, item = q.get()
      if step is None:
        if isinstance(item, BaseException):
          raise item
        return
      yield step, item
  finally:
    stop.set()
    while thread.is_alive():
      try:
        q.get_nowait()
      except queue.Empty:
        thread.join(timeout=0.05)
