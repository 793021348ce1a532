"""MNIST (LeCun et al. 1998) and Fashion-MNIST (Xiao et al. 2017) from the original IDX gzip files.

Images are resized 28 -> 32 with PIL bilinear interpolation and kept as uint8, exactly what
JointVAE (Dupont 2018, ``utils/dataloaders.py``: ``transforms.Resize(32)`` then ``ToTensor()``) and
disentangling-vae feed their models; ``get_images`` returns float32 NHWC [n, 32, 32, 1] in [0, 1].
The split is the official one: 60000 training and 10000 test images. For model selection
(``eval.select='best_validation'``) the training file is cut in two: ``'train50k'``, its
first 50000 images (the paper's training set), and ``'valid10k'``, its last 10000 (the held-out
validation set); both are views of the one training file (`HELD_OUT`). A stand-in file of another
size is cut at the same fraction (its last sixth is the validation part).

IDX format (http://yann.lecun.com/exdb/mnist/): two zero bytes, a type code (0x08 = uint8), the
number of dimensions, then each dimension as a big-endian uint32, then the data, row-major.
"""
from __future__ import annotations

import gzip
import os
import pathlib
import zlib

import numpy as np
from PIL import Image

from disentangle.data import arrays
from disentangle.data import files

_IDX_TYPES = {0x08: np.dtype(np.uint8), 0x09: np.dtype(np.int8), 0x0B: np.dtype(">i2"),
              0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}
_SPLIT_PREFIX = {"train": "train", "test": "t10k"}
NUM_EXAMPLES = {"train": 60000, "test": 10000, "train50k": 50000, "valid10k": 10000}
# Splits cut from the training file: name -> (file split, part); the validation part is the last
# sixth (10000 of 60000), the training part the rest (`held_out_rows`).
HELD_OUT = {"train50k": ("train", "train"), "valid10k": ("train", "valid")}
VALIDATION_FRACTION = (1, 6)
# The target column of each set's labels (``targets_of(indices, [name])``).
LABEL_NAMES = {"mnist": "digit", "fashion_mnist": "class"}
FASHION_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                   "Sneaker", "Bag", "Ankle boot")


def read_idx(path: str | os.PathLike, expected_ndim: int | None = None) -> np.ndarray:
  """Reads an IDX file (gzip-compressed or not) into a numpy array of its stored type.

  Raises:
    DataFileError: naming the file, when the header or the length is invalid.
  """
  path = pathlib.Path(path)
  raw = path.read_bytes()
  if raw[:2] == b"\x1f\x8b":
    try:
      raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:
      raise files.DataFileError(f"{path}: not a valid gzip file ({e})") from e
  if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_TYPES:
    raise files.DataFileError(
        f"{path}: not an IDX file (magic bytes {raw[:4].hex() or 'missing'}; expected 0000 then a "
        f"type code in {sorted(hex(t) for t in _IDX_TYPES)} and the number of dimensions)")
  dtype, ndim = _IDX_TYPES[raw[2]], raw[3]
  if expected_ndim is not None and ndim != expected_ndim:
    raise files.DataFileError(f"{path}: IDX magic 0x{raw[:4].hex()} says {ndim} dimensions, "
                              f"expected {expected_ndim} (magic 0x{0x800 + expected_ndim:08x})")
  header = 4 + 4 * ndim
  if len(raw) < header:
    raise files.DataFileError(f"{path}: truncated IDX header")
  dims = tuple(int(d) for d in np.frombuffer(raw, ">u4", ndim, 4))
  expected = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
  if len(raw) - header != expected:
    raise files.DataFileError(f"{path}: IDX header says shape {dims} ({expected} data bytes) but "
                              f"the file holds {len(raw) - header} data bytes")
  return np.frombuffer(raw, dtype, offset=header).reshape(dims).astype(dtype.newbyteorder("="))


def write_idx(path: str | os.PathLike, array: np.ndarray, compress: bool | None = None) -> None:
  """Writes ``array`` as an IDX file (gzip-compressed when the name ends in .gz)."""
  path = pathlib.Path(path)
  array = np.asarray(array)
  codes = {v.newbyteorder("=").str: k for k, v in _IDX_TYPES.items()}
  key = array.dtype.newbyteorder("=").str
  if key not in codes:
    raise ValueError(f"IDX cannot store dtype {array.dtype}")
  code = codes[key]
  header = bytes([0, 0, code, array.ndim]) + np.asarray(array.shape, ">u4").tobytes()
  payload = header + np.ascontiguousarray(array, _IDX_TYPES[code]).tobytes()
  if compress if compress is not None else path.suffix == ".gz":
    payload = gzip.compress(payload, compresslevel=6, mtime=0)
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_bytes(payload)


def resize_bilinear(images: np.ndarray, size: int) -> np.ndarray:
  """uint8 [N, h, w] -> uint8 [N, size, size] with PIL bilinear (torchvision ``Resize`` on PIL).

  PIL resamples rows, then columns, each row (column) on its own: every image's rows are
  resampled as one tall image, then every image's columns, transposed (the bytes of one
  ``Image.resize`` per image, several times faster)."""
  images = np.asarray(images, np.uint8)
  if images.shape[1:] == (size, size):
    return images.copy()
  rows = _resize_rows(images, size)
  return _resize_rows(rows.transpose(0, 2, 1), size).transpose(0, 2, 1).copy()


def _resize_rows(images: np.ndarray, width: int) -> np.ndarray:
  """uint8 [N, h, w] -> [N, h, width]: PIL's bilinear resampling of each row alone."""
  n, h, w = images.shape
  tall = Image.fromarray(np.ascontiguousarray(images).reshape(n * h, w))
  return np.asarray(tall.resize((width, n * h), Image.BILINEAR)).reshape(n, h, width)


# ((path, size, mtime) of both files, image_size) -> (images, labels): read and resized once.
_CACHE: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}


def _load_idx_pair(folder: str, split: str, data_dir, allow_download: bool, verify: bool,
                   image_size: int, name: str) -> arrays.ArrayImages:
  if split in HELD_OUT:  # a view of the training file: rows held_out_rows(n, part)
    whole = _load_idx_pair(folder, HELD_OUT[split][0], data_dir, allow_download, verify,
                           image_size, name)
    rows = held_out_rows(whole.num_examples, HELD_OUT[split][1])
    return _wrap(whole.images[rows], whole.labels[rows], name, split)
  if split not in _SPLIT_PREFIX:
    raise ValueError(f"split must be one of {sorted(_SPLIT_PREFIX) + sorted(HELD_OUT)}, got "
                     f"{split!r}")
  data_dir = pathlib.Path(data_dir)
  paths = []
  for kind in ("images-idx3", "labels-idx1"):
    relpath = f"{folder}/{_SPLIT_PREFIX[split]}-{kind}-ubyte.gz"
    if verify:
      paths.append(files.fetch(relpath, data_dir, allow_download))
    else:
      path = data_dir / relpath
      if not path.is_file():
        raise files.MissingDataError(f"missing data file {path}")
      paths.append(path)
  key = tuple((str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in paths)
  if (key, image_size) in _CACHE:
    images, labels = _CACHE[(key, image_size)]
    return _wrap(images, labels, name, split)
  images = read_idx(paths[0], expected_ndim=3)
  labels = read_idx(paths[1], expected_ndim=1)
  if images.dtype != np.uint8 or labels.dtype != np.uint8:
    raise files.DataFileError(f"{paths[0]}, {paths[1]}: expected uint8 IDX data")
  if len(images) != len(labels):
    raise files.DataFileError(f"{paths[0]} has {len(images)} images but {paths[1]} has "
                              f"{len(labels)} labels")
  images = resize_bilinear(images, image_size)[..., None]
  labels = labels.astype(np.int64)
  images.setflags(write=False)  # shared through the cache below
  labels.setflags(write=False)
  if len(_CACHE) >= 4:
    _CACHE.pop(next(iter(_CACHE)))
  _CACHE[(key, image_size)] = (images, labels)
  return _wrap(images, labels, name, split)


def held_out_rows(num_train: int, part: str) -> slice:
  """Rows of the training file in ``part``: 'valid' the last ``num_train / 6`` (50000:60000 of
  MNIST's 60000), 'train' the rows before them (0:50000); disjoint, together the whole file."""
  num, den = VALIDATION_FRACTION
  cut = num_train - num_train * num // den
  if part == "valid":
    return slice(cut, num_train)
  if part == "train":
    return slice(0, cut)
  raise ValueError(f"part must be 'train' or 'valid', got {part!r}")


def _wrap(images, labels, name, split) -> arrays.ArrayImages:
  if labels.max(initial=0) > 9:
    raise files.DataFileError(f"{name}/{split}: labels must lie in 0..9, got {labels.max()}")
  return arrays.ArrayImages(images, labels, name=f"{name}/{split}", label_name=LABEL_NAMES[name],
                            num_classes=10)


def load_mnist(data_dir: str | os.PathLike, split: str = "train", *, allow_download: bool = True,
               verify: bool = True, image_size: int = 32) -> arrays.ArrayImages:
  """MNIST ``split`` ('train' 60000 or 'test' 10000; 'train50k' / 'valid10k' the first 50000 /
  last 10000 of 'train') as [N, 32, 32, 1] images with labels 0..9.

  The labels are also the target column "digit" (10 classes).

  Args:
    data_dir: the data folder holding ``mnist/*.gz``.
    split: 'train', 'test', 'train50k' or 'valid10k' (`HELD_OUT`).
    allow_download: download missing files (see ``files.fetch``).
    verify: check the sha256 of the canonical files (turn off only for synthetic stand-ins).
    image_size: output side; 32 as in JointVAE, 28 keeps the original pixels.
  """
  return _load_idx_pair("mnist", split, data_dir, allow_download, verify, image_size, "mnist")


def load_fashion_mnist(data_dir: str | os.PathLike, split: str = "train", *,
                       allow_download: bool = True, verify: bool = True,
                       image_size: int = 32) -> arrays.ArrayImages:
  """Fashion-MNIST ``split``, as ``load_mnist`` (files under ``fashion_mnist/``); the labels are the
  target column "class" (10 classes, ``FASHION_CLASSES``)."""
  return _load_idx_pair("fashion_mnist", split, data_dir, allow_download, verify, image_size,
                        "fashion_mnist")
