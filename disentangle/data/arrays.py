"""The dataset interface shared by every loader, and an in-memory implementation.

Every object returned by ``disentangle.data.load_dataset`` has

- ``num_examples: int`` and ``image_shape: tuple[int, int, int]`` (H, W, C);
- ``get_images(indices) -> float32 [n, H, W, C]`` in [0, 1];
- ``labels``: int64 array [num_examples] or ``None``;
- the named supervision of ``supervision.Supervision``: ``target_names``, ``target_sizes``,
  ``targets_of(indices, names)``, ``attribute_names``, ``attributes_of(indices, names)``.

A set that can be held whole in memory also has ``compact_images() -> CompactImages``: its
images in their stored form (uint8, bit-packed), which the trainer may place on the device once
and gather from inside the compiled step (`disentangle.train.device_data`).
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from disentangle.data.labels import supervision


@runtime_checkable
class ImageDataset(Protocol):
  """What trainers and evaluators use from a dataset."""

  @property
  def num_examples(self) -> int:
    """The number of examples."""
    ...

  @property
  def image_shape(self) -> tuple[int, int, int]:
    """(H, W, C) of every image."""
    ...

  @property
  def labels(self) -> np.ndarray | None:
    """int64 [num_examples], or None for a set without labels."""
    ...

  def get_images(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
    """float32 images [n, H, W, C] in [0, 1] of rows ``indices``."""
    ...


# How a compact array becomes the float32 images of ``get_images`` (the same values, bit for bit):
# 'uint8': each byte's value looked up in ``CompactImages.levels`` (the dataset's own conversion
# of the 256 levels); 'bits': binary images packed with ``np.packbits`` along the last pixel
# axis, unpacked to {0., 1.}; 'float32': the values themselves.
ENCODINGS = ("uint8", "bits", "float32")


@dataclasses.dataclass(frozen=True)
class CompactImages:
  """A training set's images in the compact form they are stored in.

  Attributes:
    encoding: one of ``ENCODINGS``.
    shape: of the stored array (``[N, H, W // 8]`` for 'bits', else ``[N, H, W, C]`` or
      ``[N, H, W]`` for one channel).
    load: ``() -> array`` of ``shape`` (uint8, or float32 for 'float32'); may render or decode
      every image (``in_memory`` False).
    in_memory: whether ``load`` only hands over arrays already held (no rendering, no decoding).
    rows: optional int [num_examples]: row r of the set is row ``rows[r]`` of the array.
    levels: 'uint8': float32 [256], the image value of each byte (``levels_of``).
  """
  encoding: str
  shape: tuple[int, ...]
  load: Callable[[], np.ndarray]
  in_memory: bool = True
  rows: np.ndarray | None = None
  levels: np.ndarray | None = None

  @property
  def nbytes(self) -> int:
    itemsize = 4 if self.encoding == "float32" else 1
    extra = 0 if self.rows is None else 4 * len(self.rows)
    return int(np.prod(self.shape, dtype=np.int64)) * itemsize + extra


def levels_of(convert: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
  """float32 [256]: ``convert`` (a dataset's uint8 -> float32 image conversion) of each byte."""
  return np.asarray(convert(np.arange(256, dtype=np.uint8).reshape(256, 1, 1, 1)),
                    np.float32).reshape(256)


def compact_of(images: np.ndarray, convert: Callable[[np.ndarray], np.ndarray]
               ) -> CompactImages | None:
  """The ``CompactImages`` of images held in memory, converted by ``convert`` in
  ``get_images``: uint8 as they are, floats as float32; None for other dtypes."""
  if images.dtype == np.uint8:
    return CompactImages("uint8", tuple(images.shape), lambda: images,
                         levels=levels_of(convert))
  if np.issubdtype(images.dtype, np.floating):
    return CompactImages("float32", tuple(images.shape),
                         lambda: np.asarray(convert(images), np.float32))
  return None


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
    """N, the number of images."""
    return len(self.images)

  @property
  def image_shape(self) -> tuple[int, int, int]:
    """(H, W, C) of the stored images."""
    return tuple(int(s) for s in self.images.shape[1:])

  @property
  def labels(self) -> np.ndarray | None:
    """int64 [N], also the target column ``label_name``; None without labels."""
    return self._labels

  def get_images(self, indices) -> np.ndarray:
    """float32 images [n, H, W, C] in [0, 1] of rows ``indices`` (``to_float_images``)."""
    return to_float_images(self.images[np.asarray(indices, dtype=np.int64)])

  def compact_images(self) -> CompactImages | None:
    """The images as stored (``compact_of``): uint8 as they are, floats as float32; None for
    other dtypes."""
    return compact_of(self.images, to_float_images)

  def __len__(self) -> int:
    return self.num_examples

  def __repr__(self) -> str:
    return f"ArrayImages({self.name!r}, n={self.num_examples}, shape={self.image_shape})"
