"""CelebA (Liu et al. 2015), aligned and cropped faces with 40 binary attributes.

Expected under ``<data_dir>/celeba/``: ``img_align_celeba/`` (202599 JPEGs of 178x218),
``list_attr_celeba.txt`` (line 1: the image count; line 2: the 40 attribute names; then
``000001.jpg -1 1 ...``) and, to select the official partition, ``list_eval_partition.txt``
(``000001.jpg 0`` with 0 train, 1 valid, 2 test).

Images are center-cropped to 148x148 and resized to 64x64x3 (Lanczos): the usual VAE
preprocessing (e.g. the 148 crop of PyTorch-VAE; JointVAE reads a pre-resized ``celeba_64``
folder without saying how it was made, disentangling-vae resizes the whole 178x218 frame).
Images already 64x64 are used as they are. Attributes are mapped from {-1, 1} to {0, 1}.
"""
from __future__ import annotations

import os
import pathlib

import numpy as np

from disentangle.data import files
from disentangle.data import image_folder

CELEBA_URL = "https://mmlab.ie.cuhk.edu.hk/projects/CelebA.html"
CROP_SIZE = 148
SPLITS = {"train": 0, "valid": 1, "test": 2}


class CelebAImages(image_folder.FolderImages):
  """``FolderImages`` with ``attributes`` (int64 [N, 40] in {0, 1}) and, as binary attribute
  columns named by the header of ``list_attr_celeba.txt`` (``attribute_names``,
  ``attributes_of``), the 40 attributes. No target columns."""

  def __init__(self, paths, attributes: np.ndarray | None, attribute_names: tuple[str, ...],
               **kwargs):
    columns = None
    if attributes is not None:
      attributes = np.asarray(attributes)
      if attributes.shape != (len(paths), len(attribute_names)):
        raise ValueError(f"attributes {attributes.shape} do not match {len(paths)} images and "
                         f"{len(attribute_names)} names")
      columns = {n: attributes[:, k] for k, n in enumerate(attribute_names)}
    super().__init__(paths, attributes=columns, **kwargs)
    self.attributes = attributes
    self.name = "celeba"


def read_attributes(path: str | os.PathLike) -> tuple[list[str], tuple[str, ...], np.ndarray]:
  """Parses ``list_attr_celeba.txt`` -> (file names, attribute names, int64 [N, K] in {0, 1})."""
  path = pathlib.Path(path)
  lines = [line.split() for line in path.read_text().splitlines() if line.strip()]
  try:
    count, names = int(lines[0][0]), tuple(lines[1])
  except (IndexError, ValueError) as e:
    raise files.DataFileError(f"{path}: expected the image count on line 1 and the attribute "
                              f"names on line 2") from e
  rows = lines[2:]
  if len(rows) != count:
    raise files.DataFileError(f"{path}: header says {count} images but {len(rows)} rows follow")
  bad = [r[0] for r in rows if len(r) != len(names) + 1]
  if bad:
    raise files.DataFileError(f"{path}: row {bad[0]!r} does not have {len(names)} attributes")
  values = np.array([r[1:] for r in rows], np.int64) if rows else np.zeros((0, len(names)), int)
  if not np.all(np.isin(values, (-1, 1))):
    raise files.DataFileError(f"{path}: attribute values must be -1 or 1")
  return [r[0] for r in rows], names, (values > 0).astype(np.int64)


def _read_partition(path: pathlib.Path) -> dict[str, int]:
  out = {}
  for line in path.read_text().splitlines():
    parts = line.split()
    if len(parts) == 2:
      out[parts[0]] = int(parts[1])
  return out


def load_celeba(data_dir: str | os.PathLike, split: str = "all", *, folder: str = "celeba",
                size: int = 64, crop_size: int = CROP_SIZE) -> CelebAImages:
  """CelebA from ``<data_dir>/<folder>``.

  Args:
    data_dir: the data folder.
    split: 'all', or 'train' / 'valid' / 'test' (official partition; needs
      ``list_eval_partition.txt``).
    folder: sub-folder holding ``img_align_celeba/`` and the text files.
    size: output side (64).
    crop_size: side of the central square cut out before resizing.

  Raises:
    MissingDataError: the image folder (or a needed text file) is missing.
  """
  if split not in ("all", *SPLITS):
    raise ValueError(f"split must be 'all', 'train', 'valid' or 'test', got {split!r}")
  root = pathlib.Path(data_dir) / folder
  img_dir = root / "img_align_celeba"
  how = (f"Download 'img_align_celeba.zip' and 'list_attr_celeba.txt' (and "
         f"'list_eval_partition.txt') from {CELEBA_URL} (non-commercial research use only; no "
         f"redistribution), unzip the images to {img_dir}/ and put the text files in {root}/.")
  if not img_dir.is_dir():
    raise files.MissingDataError(f"CelebA image folder {img_dir} not found. {how}")
  attr_path = root / "list_attr_celeba.txt"
  if attr_path.is_file():
    names_in_order, attribute_names, attributes = read_attributes(attr_path)
  else:
    names_in_order = [p.name for p in image_folder.list_images(img_dir)]
    attribute_names, attributes = (), None
  if split != "all":
    part_path = root / "list_eval_partition.txt"
    if not part_path.is_file():
      raise files.MissingDataError(f"{part_path} is needed for split={split!r}. {how}")
    partition = _read_partition(part_path)
    keep = np.array([partition.get(n, -1) == SPLITS[split] for n in names_in_order], bool)
    names_in_order = [n for n, k in zip(names_in_order, keep) if k]
    attributes = None if attributes is None else attributes[keep]
  paths = [img_dir / n for n in names_in_order]
  if not paths or not paths[0].is_file() or not paths[-1].is_file():
    raise files.MissingDataError(f"CelebA images listed in {attr_path} are missing from "
                                 f"{img_dir}. {how}")
  return CelebAImages(paths, attributes, attribute_names, size=size, channels=3,
                      crop_size=crop_size)
