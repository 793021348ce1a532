"""The dataset interface shared by every loader, and an in-memory implementation.

Every object returned by ``disentangle.data.load_dataset`` has

- ``num_examples: int`` and ``image_shape: tuple[int, int, int]`` (H, W, C);
- ``get_images(indices) -> float32 [n, H, W, C]`` in [0, 1];
- ``labels``: int64 array [num_examples] or ``None``;
- the named supervision of ``supervision.Supervision``: ``target_names``, ``target_sizes``,
  ``targets_of(indices, names)``, ``attribute_names``, ``attributes_of(indices, names)``.
"""
from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from disentangle.data.labels import supervision


@runtime_checkable
class ImageDataset(Protocol):
  """What trainers and evaluators use from a dataset."""

  @property
  def num_examples(self) -> int:
    ...

  @property
  def image_shape(self) -> tuple[int, int, int]:
    ...

  @property
  def labels(self) -> np.ndarray | None:
    ...

  def get_images(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
    ...


def to_float_images(images: np.ndarray) -> np.ndarray:
  """uint8 [0, 255] (or float [0, 1]) -> float32 in [0, 1], shape kept."""
  if images.dtype == np.uint8:
    return images.astype(np.float32) * np.float32(1.0 / 255.0)
  return images.astype(np.float32, copy=False)


class ArrayImages(supervision.Supervision):
  """Images held in memory (uint8 NHWC, converted to float32 in ``get_images``).

  Args:
    images: uint8 [N, H, W, C] (or float in [0, 1]).
    labels: optional int array [N]; also the target column ``label_name``.
    name: for messages.
    label_name: the target name of ``labels`` (MNIST "digit", Fashion-MNIST "class").
    num_classes: class count of ``labels`` (default: max + 1).
    targets: more target columns, name -> int [N] (-1 = unknown).
    target_sizes: their class counts, name -> int (default: max + 1).
    attributes: binary columns, name -> int [N] in {0, 1}.
  """

  def __init__(self, images: np.ndarray, labels: np.ndarray | None = None, name: str = "", *,
               label_name: str = "label", num_classes: int | None = None,
               targets: dict[str, np.ndarray] | None = None,
               target_sizes: dict[str, int] | None = None,
               attributes: dict[str, np.ndarray] | None = None):
    images = np.asarray(images)
    if images.ndim != 4:
      raise ValueError(f"images must be [N, H, W, C], got {images.shape}")
    if labels is not None:
      labels = np.asarray(labels, dtype=np.int64)
      if labels.shape != (len(images),):
        raise ValueError(f"labels {labels.shape} do not match {len(images)} images")
    self.images = images
    self._labels = labels
    self.name = name
    targets, sizes = dict(targets or {}), dict(target_sizes or {})
    if labels is not None:
      if label_name in targets:
        raise ValueError(f"target {label_name!r} given twice (labels and targets)")
      targets[label_name] = labels
      if num_classes is not None:
        sizes[label_name] = num_classes
    self._set_supervision(len(images), targets, sizes, attributes)

  @property
  def num_examples(self) -> int:
    return len(self.images)

  @property
  def image_shape(self) -> tuple[int, int, int]:
    return tuple(int(s) for s in self.images.shape[1:])

  @property
  def labels(self) -> np.ndarray | None:
    return self._labels

  def get_images(self, indices) -> np.ndarray:
    return to_float_images(self.images[np.asarray(indices, dtype=np.int64)])

  def __len__(self) -> int:
    return self.num_examples

  def __repr__(self) -> str:
    return f"ArrayImages({self.name!r}, n={self.num_examples}, shape={self.image_shape})"
