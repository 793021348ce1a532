"""Deterministic, resumable minibatches: the batch of step s is a pure function of (seed, s).

Each epoch is a permutation of the training set drawn from ``PCG64([seed, epoch])``; the global
batch of step s is the slice [s*B, (s+1)*B) of the concatenated epochs. Resuming at any step gives
the same batches without saving iterator state. In multi-process runs each process loads only its
contiguous share of the global batch (``process_index``-th of ``process_count``).
"""
from __future__ import annotations

import queue
import threading
from typing import Iterator

import numpy as np


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

  def local_batch(self, step: int) -> dict:
    idx = self.global_indices(step)[self.offset:self.offset + self.local]
    return {"image": self.dataset.get_images(idx)}


class MultiSeedSource:
  """N seeds' batches stacked on a leading axis (for vmapped multi-seed training)."""

  def __init__(self, sources: list[BatchSource]):
    self.sources = sources

  def local_batch(self, step: int) -> dict:
    batches = [s.local_batch(step) for s in self.sources]
    return {k: np.stack([b[k] for b in batches]) for k in batches[0]}


def prefetch(source, start_step: int, end_step: int, depth: int = 2) -> Iterator[tuple[int, dict]]:
  """Yield (step, local batch) for steps [start, end), loading ``depth`` batches ahead on a thread."""
  q: queue.Queue = queue.Queue(maxsize=depth)
  stop = threading.Event()

  def worker():
    try:
      for step in range(start_step, end_step):
        if stop.is_set():
          return
        q.put((step, source.local_batch(step)))
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
