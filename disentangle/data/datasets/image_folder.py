"""Datasets stored as folders of image files (3D Chairs, CelebA), decoded lazily with PIL.

Preprocessing of one image (``load_image``): an image that already has the target size is used
as is (e.g. the pre-resized ``rendered_chairs_64`` or ``celeba_64`` folders of JointVAE);
otherwise the central square of side ``crop_fraction * min(width, height)`` (or of ``crop_size``
pixels) is cut out and resized to ``size x size`` with PIL Lanczos (``Image.ANTIALIAS`` in the
disentangling-vae preprocessing). Images with transparency are composited on white first.
"""
from __future__ import annotations

import os
import pathlib
from typing import Sequence

import numpy as np
from PIL import Image

from disentangle.data import arrays
from disentangle.data.labels import supervision

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg")


def list_images(folder: str | os.PathLike,
                extensions: Sequence[str] = IMAGE_EXTENSIONS) -> list[pathlib.Path]:
  """All image files below ``folder`` (any nesting), sorted by their path relative to it."""
  folder = pathlib.Path(folder)
  exts = tuple(e.lower() for e in extensions)
  found = [p for p in folder.rglob("*") if p.suffix.lower() in exts and p.is_file()]
  return sorted(found, key=lambda p: p.relative_to(folder).as_posix())


def load_image(path: str | os.PathLike, size: int, channels: int, *,
               crop_fraction: float | None = None, crop_size: int | None = None) -> np.ndarray:
  """Decodes, crops and resizes one image -> uint8 [size, size, channels] (channels 1 or 3)."""
  with Image.open(path) as img:
    img.load()
    if img.mode in ("RGBA", "LA", "P") and (img.mode != "P" or "transparency" in img.info):
      rgba = img.convert("RGBA")
      img = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
      img.alpha_composite(rgba)
    return fit_square(img, size, channels, crop_fraction=crop_fraction, crop_size=crop_size)


def fit_square(img: Image.Image, size: int, channels: int, *, crop_fraction: float | None = None,
               crop_size: int | None = None) -> np.ndarray:
  """The central square of ``img`` (see ``load_image``), Lanczos-resized -> uint8
  [size, size, channels]; an image already ``size x size`` is kept as it is."""
  img = img.convert("L" if channels == 1 else "RGB")
  if img.size != (size, size):
    w, h = img.size
    side = crop_size if crop_size is not None else round(min(w, h) * (crop_fraction or 1.0))
    side = min(side, w, h)
    left, top = (w - side) // 2, (h - side) // 2
    img = img.crop((left, top, left + side, top + side)).resize((size, size), Image.LANCZOS)
  out = np.asarray(img, np.uint8)
  return out[..., None] if channels == 1 else out


class FolderImages(supervision.Supervision):
  """Images decoded from files on each ``get_images`` call (or once, after ``preload()``).

  Args:
    paths: image files, in dataset order.
    size: output side in pixels.
    channels: 1 (grayscale, PIL 'L' as torchvision ``Grayscale``) or 3 (RGB).
    crop_fraction / crop_size: see ``load_image``.
    labels: optional int array [N] (also the target column "label").
    attributes: optional binary columns, name -> int [N] in {0, 1}.
  """

  def __init__(self, paths: Sequence[pathlib.Path], size: int, channels: int, *,
               crop_fraction: float | None = None, crop_size: int | None = None,
               labels: np.ndarray | None = None,
               attributes: dict[str, np.ndarray] | None = None):
    if channels not in (1, 3):
      raise ValueError(f"channels must be 1 or 3, got {channels}")
    self.paths = list(paths)
    self._size, self._channels = size, channels
    self._crop = dict(crop_fraction=crop_fraction, crop_size=crop_size)
    self._labels = None if labels is None else np.asarray(labels, np.int64)
    self._cache: np.ndarray | None = None
    self._set_supervision(len(self.paths), None if labels is None else {"label": self._labels},
                          attributes=attributes)

  @property
  def num_examples(self) -> int:
    return len(self.paths)

  @property
  def image_shape(self) -> tuple[int, int, int]:
    return (self._size, self._size, self._channels)

  @property
  def labels(self) -> np.ndarray | None:
    return self._labels

  def __len__(self) -> int:
    return self.num_examples

  def load_uint8(self, indices) -> np.ndarray:
    """uint8 [n, size, size, channels] of rows ``indices``."""
    indices = np.asarray(indices, np.int64).reshape(-1)
    if np.any(indices < 0) or np.any(indices >= self.num_examples):
      raise IndexError(f"indices must lie in [0, {self.num_examples})")
    if self._cache is not None:
      return self._cache[indices]
    out = np.empty((len(indices),) + self.image_shape, np.uint8)
    for k, i in enumerate(indices):
      out[k] = load_image(self.paths[i], self._size, self._channels, **self._crop)
    return out

  def get_images(self, indices) -> np.ndarray:
    """float32 [n, size, size, channels] in [0, 1]."""
    return arrays.to_float_images(self.load_uint8(indices))

  def compact_images(self) -> arrays.CompactImages:
    """uint8 [N, size, size, channels]; loading decodes every file once (``preload``)."""
    return arrays.CompactImages("uint8", (self.num_examples,) + self.image_shape,
                                lambda: self.preload()._cache, in_memory=self._cache is not None,
                                levels=arrays.levels_of(arrays.to_float_images))

  def preload(self) -> "FolderImages":
    """Decodes every image once into memory (uint8); later calls index the array."""
    if self._cache is None:
      self._cache = self.load_uint8(np.arange(self.num_examples))
    return self
