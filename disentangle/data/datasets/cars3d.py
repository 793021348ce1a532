"""Cars3D (Reed et al. 2015, "Deep Visual Analogy-Making"): 183 car models rendered at 4
elevations and 24 azimuths, as disentanglement_lib's ``data/ground_truth/cars3d.py`` reads it.

Factors (disentanglement_lib's order): elevation (4), azimuth (24), object type (183); the
17568 images (64x64x3) sit in C order of those factors, object type fastest. The source is the
folder ``cars/`` of ``nips2015-analogy-data.tar.gz`` (``URL``): one ``car_*_mesh.mat`` per model,
whose ``im`` is uint8 [128, 128, 3, 24 azimuths, 4 elevations]; each image is resized to 64x64
with PIL's Lanczos filter (disentanglement_lib: ``thumbnail((64, 64), ANTIALIAS)``, the same
filter) and kept as uint8 (disentanglement_lib keeps the same values as float64).

Where we depart: disentanglement_lib numbers the models in the order the folder lists them
(``gfile.ListDirectory``, unspecified); we sort the file names, so object type ``k`` is the
``k``-th ``.mat`` file by name. No checksum of the archive or of the ``.mat`` files is published
(neither disentanglement_lib nor the TFDS catalog, which has no Cars3D set, pins one), so the
loader checks the files instead: their count, and each ``im``'s shape and dtype.
"""
from __future__ import annotations

import os
import pathlib

import numpy as np
from PIL import Image

from disentangle.data import files
from disentangle.data.ground_truth import InMemoryGroundTruth

FOLDER = "cars"
URL = "http://www.scottreed.info/files/nips2015-analogy-data.tar.gz"
FACTOR_NAMES = ("elevation", "azimuth", "object_type")
NUM_MODELS = 183
FACTOR_SIZES = (4, 24, NUM_MODELS)


def _read_mesh(path: pathlib.Path) -> np.ndarray:
  """uint8 [4 elevations, 24 azimuths, 64, 64, 3] of one ``.mat`` file."""
  import scipy.io  # pylint: disable=g-import-not-at-top  (only this loader needs scipy.io)
  try:
    im = scipy.io.loadmat(path)["im"]
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise files.DataFileError(f"{path}: not a Cars3D .mat file with an 'im' array ({e})") from e
  if im.dtype != np.uint8 or im.ndim != 5 or im.shape[2:] != (3, 24, 4):
    raise files.DataFileError(f"{path}: 'im' must be uint8 [H, W, 3, 24, 4], got {im.dtype} "
                              f"{im.shape}")
  out = np.empty((4, 24, 64, 64, 3), np.uint8)
  for elevation in range(4):
    for azimuth in range(24):
      pic = Image.fromarray(np.ascontiguousarray(im[:, :, :, azimuth, elevation]))
      out[elevation, azimuth] = np.asarray(pic.resize((64, 64), Image.LANCZOS))
  return out


def load_cars3d(data_dir: str | os.PathLike, num_models: int = NUM_MODELS) -> InMemoryGroundTruth:
  """Cars3D from ``<data_dir>/cars/*.mat`` as a ground-truth set (uint8 images in memory).

  Args:
    data_dir: the data folder.
    num_models: how many ``.mat`` files the folder must hold (183 for the published set; tests
      use small stand-ins).

  Raises:
    MissingDataError: no ``.mat`` file in the folder (one line: what to get, where to put it).
    DataFileError: a file count other than ``num_models``, or a malformed file.
  """
  folder = pathlib.Path(data_dir) / FOLDER
  paths = sorted(folder.glob("*.mat")) if folder.is_dir() else []
  if not paths:
    raise files.MissingDataError(
        f"missing data files {folder}/*.mat: get {URL} and put the {NUM_MODELS} .mat files of "
        f"its data/cars/ folder into {folder}/")
  if len(paths) != num_models:
    raise files.DataFileError(f"{folder}: {len(paths)} .mat files, expected {num_models} (the "
                              f"data/cars/ folder of {URL})")
  images = np.empty((4, 24, num_models, 64, 64, 3), np.uint8)
  for k, path in enumerate(paths):
    images[:, :, k] = _read_mesh(path)
  sizes = (4, 24, num_models)
  factors = np.stack([g.reshape(-1) for g in np.indices(sizes)], axis=1)
  return InMemoryGroundTruth(factors, images.reshape(-1, 64, 64, 3), sizes, FACTOR_NAMES,
                             name="cars3d")
