"""MPI3D (Gondal et al. 2019, "On the Transfer of Inductive Bias from Simulation to the Real
World"): toy, realistic and real, as disentanglement_lib's ``data/ground_truth/mpi3d.py`` reads
them.

Factors: object colour (6), object shape (6), object size (2), camera height (3), background
colour (3), first DOF (40), second DOF (40); 1036800 images, uint8 64x64x3, in C order of the
factors (``images`` of ``<name>/<name>.npz``, from the rr-learning/disentanglement_dataset
release, ``URLS``).

Where we depart: disentanglement_lib gives toy and realistic the sizes [4, 4, 2, 3, 3, 40, 40]
(the challenge-time files without held-out colours and shapes); the published files hold all six
colours and shapes, [6, 6, 2, 3, 3, 40, 40] like its 'real'. The images are memory-mapped
straight out of the npz when it stores ``images.npy`` uncompressed (the published files do),
not loaded into memory (12.7 GB each).

Checksums: the authors publish none; ``MD5`` holds the md5 that the disent library pins for the
published files (its ``Mpi3dData``; the toy value agrees with a second, independent library), and
the loader also checks the array's shape and dtype.
"""
from __future__ import annotations

import os
import pathlib
import zipfile

import numpy as np

from disentangle import config as config_lib
from disentangle.data import files
from disentangle.data.ground_truth import InMemoryGroundTruth

NAMES = config_lib.MPI3D_DATASETS  # the names, with the config's other dataset names
FACTOR_NAMES = ("object_color", "object_shape", "object_size", "camera_height",
                "background_color", "first_dof", "second_dof")
FACTOR_SIZES = (6, 6, 2, 3, 3, 40, 40)
NUM_EXAMPLES = int(np.prod(FACTOR_SIZES))  # 1036800
_URL = "https://storage.googleapis.com/disentanglement_dataset/Final_Dataset/"
URLS = {name: f"{_URL}{name}.npz" for name in NAMES}
MD5 = {"mpi3d_toy": "55889cb7c7dfc655d6e0277beee88868",
       "mpi3d_realistic": "59a6225b88b635365f70c91b3e52f70f",
       "mpi3d_real": "0f33f609918fb5c97996692f91129802"}
SPECS = {name: files.DataFile(f"{name}/{name}.npz", "md5", MD5[name], (URLS[name],), None,
                              "Published by rr-learning/disentanglement_dataset (CC BY 4.0).")
         for name in NAMES}


def _npz_array(path: pathlib.Path, key: str) -> np.ndarray:
  """Array ``key`` of an npz: memory-mapped when stored uncompressed, else read into memory."""
  try:
    with zipfile.ZipFile(path) as zf:
      info = zf.getinfo(f"{key}.npy")
      if info.compress_type == zipfile.ZIP_STORED:
        with open(path, "rb") as f:
          f.seek(info.header_offset)
          local = f.read(30)
          if local[:4] != b"PK\x03\x04":
            raise ValueError("bad local file header")
          start = (info.header_offset + 30 + int.from_bytes(local[26:28], "little")
                   + int.from_bytes(local[28:30], "little"))
          f.seek(start)
          version = np.lib.format.read_magic(f)
          shape, fortran, dtype = (np.lib.format.read_array_header_1_0(f) if version == (1, 0)
                                   else np.lib.format.read_array_header_2_0(f))
          offset = f.tell()
        if not fortran:
          return np.memmap(path, dtype, "r", offset, shape)
    with np.load(path, allow_pickle=False) as npz:
      return npz[key]
  except (KeyError, OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
    raise files.DataFileError(f"{path}: not a readable npz with '{key}' ({e})") from e


def load_mpi3d(name: str, data_dir: str | os.PathLike | None = None, *,
               path: str | os.PathLike | None = None,
               factor_sizes: tuple[int, ...] = FACTOR_SIZES) -> InMemoryGroundTruth:
  """MPI3D ``name`` (one of ``NAMES``) from ``<data_dir>/<name>/<name>.npz``, md5-checked.

  Args:
    name: 'mpi3d_toy', 'mpi3d_realistic' or 'mpi3d_real'.
    data_dir: the data folder.
    path: an npz to read instead, without checksum (tests, stand-ins).
    factor_sizes: the grid the file must hold (the published one unless ``path`` is given).

  Raises:
    MissingDataError: the file is absent (one line: what to get, where to put it).
    ChecksumError: the file's md5 is not the published file's.
    DataFileError: ``images`` is not uint8 [prod(factor_sizes), 64, 64, 3].
  """
  if name not in NAMES:
    raise ValueError(f"unknown MPI3D set {name!r}; valid names: {', '.join(NAMES)}")
  if path is None:
    spec = SPECS[name]
    path = pathlib.Path(data_dir) / spec.relpath
    if not path.is_file():
      raise files.MissingDataError(
          f"missing data file {path}: get {URLS[name]} (md5 {spec.digest}) and put it at {path}")
    files.verify(path, spec)
  path = pathlib.Path(path)
  images = _npz_array(path, "images")
  n = int(np.prod(factor_sizes))
  if images.dtype != np.uint8 or images.shape != (n, 64, 64, 3):
    raise files.DataFileError(f"{path}: 'images' must be uint8 [{n}, 64, 64, 3] (factor sizes "
                              f"{list(factor_sizes)}), got {images.dtype} {images.shape}")
  factors = np.stack([g.reshape(-1) for g in np.indices(factor_sizes, np.int8)], axis=1)
  return InMemoryGroundTruth(factors.astype(np.int64), images, factor_sizes, FACTOR_NAMES,
                             name=name)
