"""3D Chairs (Aubry et al. 2014, "Seeing 3D chairs"), as a folder of images.

The official ``rendered_chairs.tar`` holds 86366 renders (1393 chair models x 62 views) of
600x600 pixels, ``rendered_chairs/<model>/renders/image_XXX_pYYY_tZZZ_rRRR.png``. The
disentanglement papers train on all of them at 64x64 in **grayscale**: JointVAE (Dupont 2018,
``utils/dataloaders.py``) reads a pre-resized ``rendered_chairs_64`` folder through
``transforms.Grayscale()``, disentangling-vae declares ``img_size = (1, 64, 64)`` and
center-crops 400x400 of the 600x600 renders before resizing. We do the same: images larger than
64x64 are center-cropped to 2/3 of their side (400 of 600) and resized to 64x64 with Lanczos;
images already 64x64 are used as they are. Every image file below ``<data_dir>/chairs`` is
used, in sorted path order; there are no labels.
"""
from __future__ import annotations

import os
import pathlib

from disentangle.data import files
from disentangle.data.datasets import image_folder

CHAIRS_URL = "https://www.di.ens.fr/willow/research/seeing3Dchairs/data/rendered_chairs.tar"
CROP_FRACTION = 400 / 600


def load_chairs(data_dir: str | os.PathLike) -> image_folder.FolderImages:
  """3D Chairs from ``<data_dir>/chairs`` (png/jpg files, any nesting) as the papers read it:
  the central `CROP_FRACTION` square of each render, resized to 64x64, one grey channel.

  Raises:
    MissingDataError: the folder is missing or holds no images (the message says where to get them).
  """
  root = pathlib.Path(data_dir) / "chairs"
  how = (f"Download {CHAIRS_URL} (Aubry et al. 2014; ~2.4 GB), extract it with "
         f"`tar -xf rendered_chairs.tar -C {root}` so the renders lie below {root} "
         f"(any nesting, png or jpg), or point DISENTANGLE_DATA_DIR at a folder holding "
         "'chairs/'.")
  if not root.is_dir():
    raise files.MissingDataError(f"3D Chairs folder {root} not found. {how}")
  paths = image_folder.list_images(root)
  if not paths:
    raise files.MissingDataError(f"3D Chairs folder {root} holds no png/jpg images. {how}")
  return image_folder.FolderImages(paths, 64, 1, crop_fraction=CROP_FRACTION)
