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

Every source also gives the rows of its batch without loading them (``local_rows``: "index",
and "labelled_index" for a labelled spec, int32); :class:`RowSource` yields those instead of the
batch, for a training set held on the device (`disentangle.train.device_data`).
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Iterator

import numpy as np

from disentangle import config as config_lib
from disentangle.data.labels import batch_spec as batch_spec_lib
from disentangle.data.labels import labelled as labelled_lib

LABELLED_STREAM = 0x1ABE1  # PCG64 key word of the labelled stream (the image stream has 2 words)


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
    """{"index": int32 rows of this process's share of the batch of ``step``}."""
    return {"index": self.local_indices(step).astype(np.int32)}

  def local_batch(self, step: int) -> dict:
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
    with a labelled spec, "labelled_index"."""
    rows = self.images.local_rows(step)
    if self.subset is not None:
      rows["labelled_index"] = self.labelled_indices(step)[
          self.labelled_offset:self.labelled_offset + self.labelled_local].astype(np.int32)
    return rows

  def local_batch(self, step: int) -> dict:
    rows = self.local_rows(step)
    idx = rows["index"]
    batch = {"image": self.dataset.get_images(idx)}
    if self.spec.targets:
      batch["targets"] = self.dataset.targets_of(idx, self.spec.targets)
    if self.spec.attributes:
      batch["attributes"] = self.dataset.attributes_of(idx, self.spec.attributes)
    if self.subset is not None:
      lidx = rows["labelled_index"]
      batch["labelled_image"] = self.dataset.get_images(lidx)
      batch["labelled_targets"] = self.dataset.targets_of(lidx, self.spec.targets)
    return batch


def make_source(dataset, spec: batch_spec_lib.BatchSpec = batch_spec_lib.IMAGES_ONLY, *,
                global_batch: int, seed: int, process_index: int = 0, process_count: int = 1):
  """The batch source ``spec`` asks for; checks the spec's names against ``dataset`` first.

  ``IMAGES_ONLY`` gives the :class:`BatchSource` of before side information ({"image"}, the same
  rows bit for bit); any other spec a :class:`SideInfoSource`.

  Raises:
    ConfigError: a name the dataset lacks, or an impossible labelled subset (naming the field).
  """
  labelled_lib.check_batch_spec(dataset, spec)
  kwargs = dict(global_batch=global_batch, seed=seed, process_index=process_index,
                process_count=process_count)
  if spec.images_only:
    return BatchSource(dataset, **kwargs)
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
  dispatched on inputs that are already on the device. On XLA:CPU, dispatching the step on a
  batch whose host-to-device copy is still pending cost 30-40 ms more CPU time per dSprites
  CascadeVAE step (~200 ms of CPU work) than on a ready one, measured interleaved under load
  (``benchmarks/loop.py``; see benchmarks/README.md).
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
