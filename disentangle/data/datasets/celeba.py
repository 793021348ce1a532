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
from disentangle.data.datasets import image_folder

CELEBA_URL = "https://mmlab.ie.cuhk.edu.hk/projects/CelebA.html"
CROP_SIZE = 148
SPLITS = {"train": 0, "valid": 1, "test": 2}

# PartedVAE's eight CelebA variables (App. B), in the authors' order (their priors' magnitudes:
# sizes (4, 3, 2, 3, 2, 2, 2, 2)), as target columns derived from the 40 attributes (the authors'
# 800 hand labels, ``warm_up_labels.csv``, are not public). -1 = unknown.
# - hair_colour: black, brown, blond, gray = Black/Brown/Blond/Gray_Hair, exactly one set, else -1;
# - skin_tone: white, brown, black: -1 everywhere unless ``celeba/parted_labels.csv`` is present;
# - bangs: Bangs; receding_hairline: Receding_Hairline; smiling: Smiling; eyeglasses: Eyeglasses;
#   gender: Male (0 female, 1 male);
# - beard (our mapping): none = No_Beard and not 5_o_Clock_Shadow; stubble = 5_o_Clock_Shadow;
#   beard = otherwise.
PARTED_VARIABLES = (("hair_colour", 4), ("skin_tone", 3), ("bangs", 2), ("beard", 3),
                    ("receding_hairline", 2), ("smiling", 2), ("eyeglasses", 2), ("gender", 2))
HAIR_ATTRIBUTES = ("Black_Hair", "Brown_Hair", "Blond_Hair", "Gray_Hair")
_BINARY_VARIABLES = {"bangs": "Bangs", "receding_hairline": "Receding_Hairline",
                     "smiling": "Smiling", "eyeglasses": "Eyeglasses", "gender": "Male"}
PARTED_LABELS_FILE = "parted_labels.csv"


def parted_labels_path(data_dir: str | os.PathLike) -> pathlib.Path:
  """Where the optional hand labels are read: ``<data_dir>/celeba/parted_labels.csv``."""
  return pathlib.Path(data_dir) / "celeba" / PARTED_LABELS_FILE


def read_parted_labels(path: str | os.PathLike) -> np.ndarray:
  """The authors' label rows -> int32 [n, 8] class per variable (-1 where a block is all 0).

  Format of their ``warm_up_labels.csv``: no header, one row per training image from the first,
  comma-separated 0 / 1 columns, the one-hot blocks of ``PARTED_VARIABLES`` (sum L_i = 20 columns).
  """
  rows = np.atleast_2d(np.genfromtxt(path, delimiter=","))
  width = sum(size for _, size in PARTED_VARIABLES)
  if rows.shape[1] != width or not np.all(np.isin(rows, (0, 1))):
    raise files.DataFileError(f"{path}: expected rows of {width} 0/1 columns (one-hot blocks of "
                              f"{[n for n, _ in PARTED_VARIABLES]}), got shape {rows.shape}")
  out, start = [], 0
  for name, size in PARTED_VARIABLES:
    block = rows[:, start:start + size]
    if np.any(block.sum(axis=1) > 1):
      raise files.DataFileError(f"{path}: more than one class set for {name!r}")
    out.append(np.where(block.sum(axis=1) == 1, block.argmax(axis=1), -1))
    start += size
  return np.stack(out, axis=1).astype(np.int32)


def parted_targets(columns: dict, hand_labels: np.ndarray | None = None) -> dict:
  """The ``PARTED_VARIABLES`` columns (int32 [N], -1 unknown) from the attribute columns.

  ``hand_labels``: rows of :func:`read_parted_labels` for the first rows of the set; their known
  entries replace the derived ones (skin tone is only known there).
  """
  n = len(next(iter(columns.values())))
  hair = np.stack([columns[a] for a in HAIR_ATTRIBUTES], axis=1)
  out = {"hair_colour": np.where(hair.sum(axis=1) == 1, hair.argmax(axis=1), -1),
         "skin_tone": np.full(n, -1)}
  stubble = columns["5_o_Clock_Shadow"] == 1
  out["beard"] = np.where(stubble, 1, np.where(columns["No_Beard"] == 1, 0, 2))
  for name, attr in _BINARY_VARIABLES.items():
    out[name] = columns[attr]
  out = {name: np.asarray(out[name], np.int32).copy() for name, _ in PARTED_VARIABLES}
  if hand_labels is not None:
    m = min(len(hand_labels), n)
    for k, (name, _) in enumerate(PARTED_VARIABLES):
      known = hand_labels[:m, k] >= 0
      out[name][:m][known] = hand_labels[:m, k][known]
  return out


class CelebAImages(image_folder.FolderImages):
  """``FolderImages`` with ``attributes`` (int64 [N, 40] in {0, 1}) and, as binary attribute
  columns named by the header of ``list_attr_celeba.txt`` (``attribute_names``,
  ``attributes_of``), the 40 attributes; as target columns PartedVAE's ``PARTED_VARIABLES``."""

  def __init__(self, paths, attributes: np.ndarray | None, attribute_names: tuple[str, ...],
               *, hand_labels: np.ndarray | None = None, **kwargs):
    columns = None
    if attributes is not None:
      attributes = np.asarray(attributes)
      if attributes.shape != (len(paths), len(attribute_names)):
        raise ValueError(f"attributes {attributes.shape} do not match {len(paths)} images and "
                         f"{len(attribute_names)} names")
      columns = {n: attributes[:, k] for k, n in enumerate(attribute_names)}
    super().__init__(paths, attributes=columns, **kwargs)
    self.attributes = attributes
    if columns is not None and all(a in columns for a in (*HAIR_ATTRIBUTES, "No_Beard",
                                                          "5_o_Clock_Shadow",
                                                          *_BINARY_VARIABLES.values())):
      # PartedVAE's variables as target columns (``PARTED_VARIABLES``).
      self._set_supervision(len(paths), parted_targets(columns, hand_labels),
                            target_sizes=dict(PARTED_VARIABLES), attributes=columns)
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
  """``<image> <0|1|2>`` per line (train / validation / test); a malformed line is an error."""
  out = {}
  for i, line in enumerate(path.read_text().splitlines(), 1):
    parts = line.split()
    if not parts:
      continue
    if len(parts) != 2 or parts[1] not in ("0", "1", "2"):
      raise files.DataFileError(f"{path}: line {i} must be '<image> <0|1|2>', got {line[:80]!r}")
    out[parts[0]] = int(parts[1])
  return out


def load_celeba(data_dir: str | os.PathLike, split: str = "all") -> CelebAImages:
  """CelebA from ``<data_dir>/celeba``: the central `CROP_SIZE` square of each aligned image,
  resized to 64x64.

  Args:
    data_dir: the data folder.
    split: 'all', or 'train' / 'valid' / 'test' (official partition; needs
      ``list_eval_partition.txt``).

  Raises:
    MissingDataError: the image folder (or a needed text file) is missing.
  """
  if split not in ("all", *SPLITS):
    raise ValueError(f"split must be 'all', 'train', 'valid' or 'test', got {split!r}")
  root = pathlib.Path(data_dir) / "celeba"
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
  hand_labels = None  # the authors' label rows cover the first training images
  if split in ("all", "train") and parted_labels_path(data_dir).is_file():
    hand_labels = read_parted_labels(parted_labels_path(data_dir))
  paths = [img_dir / n for n in names_in_order]
  if not paths or not paths[0].is_file() or not paths[-1].is_file():
    raise files.MissingDataError(f"CelebA images listed in {attr_path} are missing from "
                                 f"{img_dir}. {how}")
  return CelebAImages(paths, attributes, attribute_names, size=64, channels=3,
                      crop_size=CROP_SIZE, hand_labels=hand_labels)
