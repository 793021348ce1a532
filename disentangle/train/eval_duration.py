"""How long an evaluation will take, known before it starts: so that none crosses a deadline.

An evaluation's time is mostly its encoding: the images it encodes, in batches of the encoder's
size, each batch taking what one batch took when timed just before (`time_batch`: one call that
compiles, then one timed call of the same shape, so the rate excludes the compilation). The
metrics' own time (``metric_s``) is added when it is known: the metric share of the command's
previous evaluation (`disentangle.reproduce.run`); before the first one it is taken as 0, so the
first estimate is a lower bound (on dSprites and MNIST the papers' protocols spend most of it
encoding: the whole set, 737,280 or 10,000 images, once).

The callers: `disentangle.train.trainer` (the first in-training evaluation of a process under a
deadline, `of_evaluators`; later ones take the previous one's duration,
`train.background.Evaluations.expected_seconds`) and `evaluation.evaluate_run` (``deadline``:
every evaluation of a saved run; `images_of_run` counts what it encodes).
"""
from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Callable, Sequence

import jax
import numpy as np


@dataclasses.dataclass(frozen=True)
class Estimate:
  """``images`` encoded ``batch_size`` at a time, ``batch_s`` a batch, plus ``metric_s``."""
  images: int
  batch_size: int
  batch_s: float
  metric_s: float = 0.0

  @property
  def batches(self) -> int:
    return math.ceil(self.images / max(1, self.batch_size))

  @property
  def seconds(self) -> float:
    return self.batches * self.batch_s + self.metric_s

  def words(self) -> str:
    metric = f" + {self.metric_s:.1f} s of metrics" if self.metric_s else ""
    return (f"about {self.seconds:,.0f} s ({self.images:,} images in {self.batches:,} batches of "
            f"{self.batch_size} at {self.batch_s * 1e3:.1f} ms each{metric})")


def time_batch(encode: Callable[[np.ndarray], Any], images: np.ndarray,
               clock: Callable[[], float] = time.perf_counter) -> float:
  """Seconds of one ``encode(images)``: a first call compiles, the second is timed."""
  jax.block_until_ready(encode(images))
  began = clock()
  jax.block_until_ready(encode(images))
  return clock() - began


_ENCODES = ("indices", "batch_size", "dataset", "represent_fn")


def of_evaluators(evaluators: Sequence, params, take: Callable[[Any, int], Any],
                  timer: Callable | None = None) -> Estimate | None:
  """The encoding of an in-training evaluation (`evaluation.evaluator.Evaluator`, or any with its
  ``indices``, ``batch_size``, ``dataset`` and ``represent_fn``): each run's eval points, one
  batch of the first run timed with its parameters ``take(params, 0)`` (the runs share a network
  shape). None when an evaluator does not say what it encodes (its duration unknown)."""
  if not evaluators or not all(all(hasattr(ev, a) for a in _ENCODES) for ev in evaluators):
    return None
  first = evaluators[0]
  n = len(first.indices)
  size = min(first.batch_size, n)
  images = first.dataset.get_images(first.indices[:size])
  batch_s = (timer or time_batch)(first.represent_fn(take(params, 0)), images)
  return Estimate(n * len(evaluators), size, batch_s)
