"""Loading a dataset by name: the registry of names and splits, the checks of a config's
``dataset`` section, and ``load_dataset``, which picks the loader of ``data/datasets`` (or the
TFDS reader, ``data/tfds``) and the data folder, with synthetic stand-ins when asked.

A dSprites-based set with ``source='auto'`` falls back on the procedural renderer when the
official file is missing, unless the caller forbids it (``render_if_missing=False``: the training
of a config that is no smoke variant, `disentangle.train.trainer.load_training_data`); then
:func:`require_official_dsprites` stops in one line saying where the file was looked for, how to
get it, and how to train on the renderer on purpose.

The dataset names are the config's (``config.DATASETS``, ``config.DLIB_DATASETS``,
``config.TFDS_ONLY_DATASETS``: the allowed values of ``dataset.name``) and so are the splits
each set takes (``config.SPLITS``); what each name loads is here.
"""
from __future__ import annotations

import logging
import os
import pathlib

from disentangle import config as config_lib
from disentangle import paths
from disentangle.data import files
from disentangle.data.datasets import cars3d
from disentangle.data.datasets import celeba
from disentangle.data.datasets import chairs
from disentangle.data.datasets import dsprites_draws
from disentangle.data.datasets import dsprites_variants
from disentangle.data.datasets import mnist
from disentangle.data.datasets import mpi3d
from disentangle.data.datasets import synthetic
from disentangle.data.datasets.dsprites import DSprites
from disentangle.data.datasets.dsprites_unfair import DSpritesUnfair
from disentangle.data.files import DataFileError
from disentangle.data.files import MissingDataError

_LOG = logging.getLogger(__name__)

# The names (config.py, where dataset.name is checked): disentanglement_lib's sets beyond
# dSprites and the TFDS ones, the sets read from files, those read only from TFDS.
DLIB_SETS = config_lib.DLIB_DATASETS
DATASETS = config_lib.DATASETS
TFDS_ONLY = config_lib.TFDS_ONLY_DATASETS
# Datasets drawn from the dSprites images (file or renderer): they take source='render'.
DSPRITES_BASED = ("dsprites", "dsprites_unfair", *dsprites_variants.VARIANTS)
# (H, W, C) of each set's images as its loader gives them: a trained model's shape without its data.
IMAGE_SHAPES = {**dict.fromkeys(DATASETS + TFDS_ONLY, (64, 64, 3)),
                **dict.fromkeys(("mnist", "fashion_mnist"), (32, 32, 1)),
                **dict.fromkeys(("dsprites", "dsprites_unfair", "dsprites_noshape", "chairs",
                                 "smallnorb"), (64, 64, 1))}
# The sets whose files `files.fetch` reads, so that their data folder may be a bucket URL.
BUCKET_READABLE = tuple(n for n in DSPRITES_BASED if n != "scream_dsprites") + ("mnist",
                                                                               "fashion_mnist")

# load_dataset's CelebA splits -> load_celeba's: the papers train on all 202599 images.
_CELEBA_SPLITS = {"train": "all", "all": "all", "official_train": "train",
                  "official_valid": "valid", "official_test": "test"}

# The splits each dataset accepts (config.py, beside the names): ``SPLITS[name]``.
SPLITS = config_lib.SPLITS
ALL_SPLITS = config_lib.ALL_SPLITS
# Held-out validation (``eval.select='best_validation'``): dataset -> (training part,
# validation part), both cut from its training file (MNIST / Fashion-MNIST: the first 50000 and
# the last 10000 of the 60000 training images, `mnist.HELD_OUT`). The test split never selects.
VALIDATION_SPLITS: dict[str, tuple[str, str]] = {
    "mnist": ("train50k", "valid10k"),
    "fashion_mnist": ("train50k", "valid10k"),
}


def check_split(name: str, split: str, field: str = "dataset.train_split") -> None:
  """Raise ``ConfigError`` naming ``field`` unless ``split`` is one of ``SPLITS[name]``."""
  if name in SPLITS and split not in SPLITS[name]:
    raise config_lib.ConfigError(f"config field {field!r}: {name} has no split {split!r}; valid "
                                 f"splits of {name}: {list(SPLITS[name])}")


def unfair_settings(dataset_config) -> dict:
  """``DSpritesUnfair`` keyword arguments from ``config.dataset``'s ``unfair_*`` fields (their
  defaults: ``config.UNFAIR_DEFAULTS``)."""
  d = dataset_config
  return {"q_shape": float(d.unfair_q_shape), "q_x": float(d.unfair_q_x),
          "index_base": int(d.unfair_index_base), "num_examples": int(d.unfair_size),
          "seed": int(d.unfair_seed)}


def check_variant_draw(dataset_config) -> None:
  """``ConfigError`` naming ``dataset.variant_draw`` when it asks for per-sample draws of a
  training set without them: only the colour, noisy and scream dSprites built here
  (``dsprites_draws.NAMES``, not read from TFDS) draw (``dsprites_variants``)."""
  d = dataset_config
  if d.variant_draw == "per_sample" and (d.name not in dsprites_draws.NAMES or d.source == "tfds"):
    raise config_lib.ConfigError(
        f"config field 'dataset.variant_draw' is 'per_sample', which only the sets "
        f"{', '.join(dsprites_draws.NAMES)} have (read from their files, not TFDS); "
        f"dataset.name is {d.name!r} with source {d.source!r}: use 'per_image'")


def _load(name, data_dir, split, source, allow_download, verify, unfair=None, painting=None,
          variant_draw="per_image"):
  if split not in SPLITS[name]:
    raise ValueError(f"{name} has no {split!r} split; valid splits: {list(SPLITS[name])}")
  if name in dsprites_variants.VARIANTS:  # disentanglement_lib's views of the dSprites rows
    base = _load("dsprites", data_dir, split, source, allow_download, verify)
    draw = {"draw": variant_draw} if name in dsprites_draws.NAMES else {}
    return dsprites_variants.make(name, base, painting=painting, **draw)
  if name == "cars3d":
    return cars3d.load_cars3d(data_dir)
  if name in mpi3d.NAMES:
    return mpi3d.load_mpi3d(name, data_dir)
  if name == "dsprites_unfair":  # FFVAE App. B: an unfair draw of rows of the dSprites base
    base = _load("dsprites", data_dir, split, source, allow_download, verify)
    return DSpritesUnfair(base, **(unfair or {}))
  if name in ("mnist", "fashion_mnist"):
    loader = mnist.load_mnist if name == "mnist" else mnist.load_fashion_mnist
    return loader(data_dir, split, allow_download=allow_download, verify=verify)
  if name == "celeba":
    return celeba.load_celeba(data_dir, _CELEBA_SPLITS[split])
  if name == "chairs":
    return chairs.load_chairs(data_dir)
  if verify:
    return DSprites(data_dir, source=source, allow_download=allow_download)
  return DSprites(path=pathlib.Path(data_dir) / synthetic.DSPRITES_SUBSET)


def require_official_dsprites(data_dir, allow_download: bool) -> None:
  """The official dSprites file fetched (and verified) into ``data_dir``, downloaded if allowed;
  `MissingDataError` in one line otherwise: where it was looked for, why it is not there, the URL
  it comes from, and the option that trains on the procedural renderer on purpose."""
  spec = files.FILES[files.DSPRITES_FILE]
  try:
    files.fetch(spec, data_dir, allow_download)
  except MissingDataError as e:
    where = (paths.as_path(data_dir) if paths.is_remote(data_dir)
             else pathlib.Path(data_dir)) / spec.relpath
    if paths.is_remote(data_dir):
      why = "it is not in the bucket"
    elif files.downloads_disabled():
      why = f"downloads are disabled by ${files.NO_DOWNLOAD_ENV}"
    elif not allow_download:
      why = "downloads are off: dataset.allow_download is false"
    else:  # the failures, one per mirror, are on the error's later lines
      failures = [line.strip() for line in str(e).splitlines()[1:] if line.startswith("  ")]
      why = "its download failed" + (f": {failures[0]}" if failures else "")
    raise MissingDataError(
        f"the official dSprites file is missing: looked for {where} ({why}); download it from "
        f"{spec.urls[0]} into that folder (or point ${files.DATA_DIR_ENV} at a folder holding "
        f"{spec.relpath}), or train on the procedural stand-in on purpose, its scores not "
        f"comparable with published numbers: --config.dataset.source=render "
        f"(experiments.reproduce, experiments.slot: --dataset_source=render)") from None


def tfds_kwargs(dataset_config) -> dict:
  """``load_dataset``'s TFDS arguments from a config's ``dataset`` section ({} unless
  ``source='tfds'``)."""
  if dataset_config.source != "tfds":
    return {}
  return {"tfds_data_dir": dataset_config.tfds_data_dir, "tfds_name": dataset_config.tfds_name}


def load_dataset(name: str, *, data_dir: str | os.PathLike | None, split: str = "train",
                 source: str = "auto", synthetic_if_missing: bool = False,
                 allow_download: bool = True, synthetic_dir: str | os.PathLike | None = None,
                 tfds_data_dir: str | os.PathLike | None = None, tfds_name: str = "",
                 unfair: dict | None = None, variant_draw: str = "per_image",
                 render_if_missing: bool = True):
  """Loads dataset ``name`` from the data folder.

  Args:
    name: one of ``DATASETS``: 'dsprites', 'mnist', 'fashion_mnist', 'chairs', 'celeba',
      'dsprites_unfair', or one of ``DLIB_SETS`` (no synthetic stand-ins for Cars3D, MPI3D).
    data_dir: the configured data folder; ``''`` / ``None``: ``$DISENTANGLE_DATA_DIR`` if set,
      else ``~/disentangle_data`` (``files.data_dir_origin``).
    split: one of ``SPLITS[name]``. MNIST / Fashion-MNIST: 'train' (60000) or 'test' (10000),
      'train50k' / 'valid10k' (the first 50000 / last 10000 of 'train', `VALIDATION_SPLITS`).
      dSprites, Chairs and CelebA: 'train' (= 'all' images, as the papers train on). CelebA also
      takes 'official_train' / 'official_valid' / 'official_test' (needs
      list_eval_partition.txt).
    source: dSprites: 'auto' (official file, else the procedural renderer with a warning),
      'file' or 'render'. Other datasets: 'auto' or 'file' (both read the files). Any set of
      ``tfds_source.LAYOUTS`` (all but chairs, plus ``TFDS_ONLY``): 'tfds', a prepared TFDS set
      read by index (never downloaded; ``data_dir``, ``synthetic_if_missing`` unused).
    synthetic_if_missing: when the real files are missing, load small synthetic stand-ins
      (``synthetic.ensure_synthetic``; logged loudly). For dSprites this applies only with
      ``source='file'`` (with 'auto' the renderer already stands in for the missing file).
    render_if_missing: dSprites-based sets (``DSPRITES_BASED``) with ``source='auto'``: the
      renderer stands in for a missing official file, with a warning. False: the file is
      required (`require_official_dsprites`: a `MissingDataError` of one line); the trainer
      passes the config's ``dataset.synthetic_if_missing``, so that only smoke variants train
      on the renderer without asking for it (``source='render'``).
    allow_download: download missing canonical files (MNIST, Fashion-MNIST, dSprites).
    synthetic_dir: where stand-ins are written (``resolve_synthetic_dir``; never the data folder).
    unfair: 'dsprites_unfair' only: ``DSpritesUnfair`` keyword arguments (``unfair_settings``
      of ``config.dataset``) over the dSprites base loaded for ``source``.
    tfds_data_dir: source 'tfds': the TFDS data folder (``gs://`` too); '' / None: TFDS's default.
    tfds_name: source 'tfds': the builder to read ('' = the catalog set of ``name``).
    variant_draw: the colour, noisy and scream dSprites (``dsprites_draws.NAMES``): 'per_image'
      (one draw per row) or 'per_sample' (a new draw for every image, disentanglement_lib's;
      ``dsprites_variants``); the other sets draw nothing and ignore it.

  Returns:
    An object with ``num_examples``, ``image_shape``, ``get_images(indices)`` and ``labels``.
  """
  if name not in DATASETS + TFDS_ONLY:
    raise ValueError(f"unknown dataset {name!r}; valid names: {', '.join(DATASETS + TFDS_ONLY)}")
  if source not in config_lib.SOURCES:
    raise ValueError(f"source must be one of {list(config_lib.SOURCES)}, got {source!r}")
  if variant_draw not in config_lib.VARIANT_DRAWS:
    raise ValueError(f"variant_draw must be one of {list(config_lib.VARIANT_DRAWS)}, got "
                     f"{variant_draw!r}")
  if source == "tfds" and split in {s for pair in VALIDATION_SPLITS.values() for s in pair}:
    raise config_lib.ConfigError(f"config field 'dataset.source': the held-out split {split!r} "
                                 f"is cut from the IDX files (source 'auto' or 'file'), not TFDS")
  if source == "tfds":
    from disentangle.data.tfds import source as tfds_source  # pylint: disable=g-import-not-at-top
    if name == "dsprites_unfair":  # a view over the dSprites set read from TFDS
      return DSpritesUnfair(tfds_source.load("dsprites", split, tfds_data_dir=tfds_data_dir,
                                             tfds_name=tfds_name), **(unfair or {}))
    return tfds_source.load(name, split, tfds_data_dir=tfds_data_dir, tfds_name=tfds_name)
  if name in TFDS_ONLY:
    raise config_lib.ConfigError(f"config field 'dataset.source': {name} is read only from TFDS "
                                 f"(source='tfds'), not {source!r}")
  if source == "render" and name not in DSPRITES_BASED:
    raise ValueError(f"source='render' only exists for dsprites, not {name}")
  root = files.resolve_data_dir(data_dir)
  if paths.is_remote(root) and name not in BUCKET_READABLE:
    raise DataFileError(f"{name} is read from a folder of files on a disk, not from {root}: copy "
                        f"its folder to a local data folder, or read it from TFDS "
                        f"(dataset.source='tfds', dataset.tfds_data_dir may be a gs:// URL); "
                        f"from a bucket: {', '.join(sorted(BUCKET_READABLE))}")
  # The painting first: a missing one stops before dSprites is read or downloaded.
  painting = dsprites_variants.read_scream(root) if name == "scream_dsprites" else None
  if name in DSPRITES_BASED and source == "auto" and not render_if_missing:
    require_official_dsprites(root, allow_download)
  try:
    return _load(name, root, split, source, allow_download, verify=True, unfair=unfair,
                 painting=painting, variant_draw=variant_draw)
  except MissingDataError as e:
    if not synthetic_if_missing or name == "cars3d" or name in mpi3d.NAMES:
      raise
    folder = synthetic.ensure_synthetic("dsprites" if name in DSPRITES_BASED else name,
                              files.resolve_synthetic_dir(synthetic_dir))
    _LOG.warning("%s is missing (%s); loading the SYNTHETIC stand-in from %s instead", name,
                 str(e).splitlines()[0], folder)
    return _load(name, folder, split, source, allow_download, verify=False, unfair=unfair,
                 painting=painting, variant_draw=variant_draw)
