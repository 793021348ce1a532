"""TensorFlow Datasets as a data source: prepared array_record sets read by index, no TensorFlow.

``dataset.source = "tfds"`` reads ``tfds.data_source(<builder>, split=..., data_dir=...)``: random
access by index, so the deterministic (seed, step) batches, the per-process shares (each process
asks for the rows of its share only, see ``train.input_pipeline.BatchSource``) and bitwise resume
work as with the raw files. ``tfds_data_dir`` may be a bucket (``gs://...``); TFDS's own path
layer reads it. Nothing here downloads: sets are read with ``download=False`` (prepare them first,
see :func:`prepare_command`), so ``DISENTANGLE_NO_DOWNLOAD`` holds trivially.

Each ``dataset.name`` has a :class:`Layout`: the TFDS features it reads and how they map onto
the fields of the raw-file loaders (same image shape, dtype, resizing, splits, target /
attribute / factor names):

============= =============== ==================================================================
name          TFDS builder    fields
============= =============== ==================================================================
mnist         mnist           28x28 -> 32x32 PIL bilinear (as ``data.datasets.mnist``); target "digit"
fashion_mnist fashion_mnist   as MNIST; target "class"
dsprites      dsprites        64x64x1 in {0, 1}; the five factors (``data.datasets.dsprites``), targets too
celeba        celeb_a         148 centre crop -> 64x64x3 Lanczos (as ``data.datasets.celeba``); the 40
                              attributes; 'train' / 'all' = train+validation+test (202599)
shapes3d      shapes3d        64x64x3; factors floor_hue 10, wall_hue 10, object_hue 10, scale 8,
                              shape 4, orientation 15 (Burgess & Kim 2018), a full grid of 480000
smallnorb     smallnorb       96x96 -> 64x64 Lanczos (as disentanglement_lib); factors category 5,
                              elevation 9, azimuth 18, lighting 6; the instance (5 per split) is
                              a nuisance, so each factor row is carried by 5 examples: NOT a grid;
                              'all' = TFDS train+test, the training rows then the testing rows
                              (48600; 10 examples per factor row), as disentanglement_lib reads
                              both chunks (``data/ground_truth/norb.py``, lines 34-37, 89-94)
============= =============== ==================================================================

``dataset.tfds_name`` reads another builder with the same layout, e.g. the project's own
(``data.tfds.builders``: ``dsprites_rendered``, ``synthetic_mnist``, ...). The official catalog's
order is TFDS's (hashed keys), not the raw files'; the project's builders keep generation order.

Ground-truth sets (a layout with factors) implement ``ground_truth.GroundTruthData``: the factor
table of all rows is read once (cached under ``files.resolve_cache_dir()/tfds``); on a full grid
every factor row is one example; otherwise ``sample_observations_from_factors`` draws among the
examples that carry the requested factors (logged once), and a factor row no example carries is a
``KeyError``.
"""
from __future__ import annotations

import hashlib
import logging
import os
from typing import Callable, Sequence

import numpy as np
from PIL import Image

from disentangle import atomic
from disentangle import config as config_lib
from disentangle.data import arrays
from disentangle.data import files
from disentangle.data.datasets import image_folder
from disentangle.data.datasets import mnist
from disentangle.data.labels import supervision
from disentangle.data.tfds.layouts import LAYOUTS
from disentangle.data.tfds.layouts import PROCEDURAL_BUILDERS
from disentangle.data.tfds.layouts import Layout
from disentangle.data.tfds.layouts import prepare_command
from disentangle.data.tfds.layouts import resolve_tfds_data_dir

_LOG = logging.getLogger(__name__)

class TfdsNotPreparedError(files.MissingDataError):
  """The TFDS set is not prepared (in array_record) under the data folder."""


def _is_prepared(tfds_name: str, data_dir: str) -> bool:
  from etils import epath  # pylint: disable=g-import-not-at-top  (TFDS's path layer)
  root = epath.Path(data_dir) / tfds_name
  try:
    return root.exists() and (any(root.glob("*/dataset_info.json"))
                              or any(root.glob("*/*/dataset_info.json")))
  except OSError:
    return False


def open_source(tfds_name: str, split: str, data_dir: str):
  """``tfds.data_source`` of a prepared set; never downloads.

  Raises:
    TfdsNotPreparedError: one line naming the set, the folder and the command preparing it.
  """
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

  # For its side effect: defining the builders registers them with tfds, which finds them by name.
  from disentangle.data.tfds import builders  # noqa: F401  # pylint: disable=g-import-not-at-top
  if not _is_prepared(tfds_name, data_dir):
    raise TfdsNotPreparedError(f"TFDS set {tfds_name!r} is not prepared under {data_dir}; "
                               f"prepare it with: {prepare_command(tfds_name, data_dir)}")
  try:
    return tfds.data_source(tfds_name, split=split, data_dir=data_dir, download=False,
                            try_gcs=False)
  except NotImplementedError as e:  # prepared, but as tfrecord: no random access
    raise TfdsNotPreparedError(
        f"TFDS set {tfds_name!r} under {data_dir} is not prepared in the array_record format "
        f"that random access needs; prepare it with: {prepare_command(tfds_name, data_dir)}"
    ) from e


def _fit(images: np.ndarray, layout: Layout) -> np.ndarray:
  """Raw TFDS images [n, h, w, c] uint8 -> the raw-file loader's uint8 [n, H, W, C]."""
  size, _, channels = layout.image_shape
  if layout.preprocess == "mnist":
    return mnist.resize_bilinear(images[..., 0], size)[..., None]
  if layout.preprocess in ("celeba", "lanczos"):
    crop = dict(crop_size=148) if layout.preprocess == "celeba" else {}
    out = [image_folder.fit_square(Image.fromarray(img[..., 0] if channels == 1 else img), size,
                                   channels, **crop) for img in images]
    return np.stack(out) if out else np.zeros((0,) + layout.image_shape, np.uint8)
  return images


class TfdsDataset(supervision.Supervision):
  """A prepared TFDS set read by index, with the raw-file loader's fields (``arrays`` protocol).

  ``targets_of`` / ``attributes_of`` / ``get_images`` read the rows asked for only; ``labels``
  and the factor table read every row once.
  """

  def __init__(self, name: str, split: str, source, *, layout: Layout, tfds_name: str,
               data_dir: str, field: str = "dataset.tfds_name"):
    self.name = f"{name}/{split}"
    self.dataset_name, self.split, self.layout = name, split, layout
    self.tfds_name, self.data_dir = tfds_name, data_dir
    self.source = "render" if tfds_name in PROCEDURAL_BUILDERS else "tfds"
    self._source = source
    self._n = len(source)
    features = source.dataset_info.features
    keys = set(features.keys())

    def need(feature_names, what):
      missing = [f for f in feature_names if f not in keys]
      if missing:
        raise config_lib.ConfigError(
            f"config field {field!r}: TFDS set {tfds_name!r} lacks the feature(s) {missing} "
            f"({what} of dataset.name={name!r}); its features: {sorted(keys)}")

    need(["image"], "the images")
    need([f for f, _, _ in layout.factors], "the factors")
    channels = features["image"].shape[-1]
    if channels != layout.image_shape[-1]:
      raise config_lib.ConfigError(
          f"config field {field!r}: TFDS set {tfds_name!r} has {channels}-channel images; "
          f"dataset.name={name!r} has {layout.image_shape[-1]}")
    # Named supervision: the label and the factors are targets, the attribute dict attributes.
    self._target_features: dict[str, str] = {}
    self._target_sizes: dict[str, int] = {}
    if layout.label is not None and layout.label[0] in keys:
      feature, target, classes = layout.label
      self._target_features[target], self._target_sizes[target] = feature, classes
    for feature, factor, size in layout.factors:
      self._target_features[factor], self._target_sizes[factor] = feature, size
    self._attribute_names: tuple[str, ...] = ()
    if layout.attributes is not None and layout.attributes in keys:
      self._attribute_names = tuple(features[layout.attributes].keys())
    self._last: tuple[bytes, list] | None = None
    self._columns: dict[str, np.ndarray] = {}

  def __repr__(self) -> str:
    return (f"TfdsDataset({self.name!r}, builder={self.tfds_name!r}, n={self._n}, "
            f"data_dir={self.data_dir!r})")

  # --- reading rows -----------------------------------------------------------------------------
  def _records(self, indices) -> list:
    idx = np.asarray(indices, np.int64).reshape(-1)
    if np.any(idx < 0) or np.any(idx >= self._n):
      raise IndexError(f"indices must lie in [0, {self._n})")
    key = idx.tobytes()
    if self._last is not None and self._last[0] == key:  # get_images then targets_of
      return self._last[1]
    records = list(self._source.__getitems__(idx.tolist())) if len(idx) else []
    self._last = (key, records)
    return records

  def columns(self, features: Sequence[str], chunk: int = 4096) -> np.ndarray:
    """int64 [N, len(features)]: scalar ``features`` of every row (one pass over the set; each
    column kept in memory)."""
    todo = [f for f in dict.fromkeys(features) if f not in self._columns]
    if todo:
      out = np.empty((self._n, len(todo)), np.int64)
      for start in range(0, self._n, chunk):
        rows = self._source.__getitems__(list(range(start, min(start + chunk, self._n))))
        out[start:start + len(rows)] = [[int(r[f]) for f in todo] for r in rows]
      self._columns.update({f: out[:, j] for j, f in enumerate(todo)})
    return np.stack([self._columns[f] for f in features], axis=1).reshape(self._n, len(features))

  # --- training-set interface ---------------------------------------------------------------------
  @property
  def num_examples(self) -> int:
    return self._n

  def __len__(self) -> int:
    return self._n

  @property
  def image_shape(self) -> tuple[int, int, int]:
    return self.layout.image_shape

  @property
  def labels(self) -> np.ndarray | None:
    label = self.layout.label
    if label is None or label[1] not in self._target_features:
      return None
    return self.columns([label[0]])[:, 0]

  def get_images(self, indices) -> np.ndarray:
    """float32 [n, H, W, C] in [0, 1], as the raw-file loader of ``dataset.name`` gives them."""
    records = self._records(indices)
    if not records:
      return np.zeros((0,) + self.image_shape, np.float32)
    raw = np.stack([np.asarray(r["image"], np.uint8) for r in records])
    images = _fit(raw, self.layout)
    if self.layout.binary:
      return images.astype(np.float32)
    return arrays.to_float_images(images)

  # --- named supervision --------------------------------------------------------------------------
  @property
  def target_names(self) -> tuple[str, ...]:
    return tuple(self._target_features)

  @property
  def target_sizes(self) -> dict[str, int]:
    return dict(self._target_sizes)

  def targets_of(self, indices, names: Sequence[str]) -> np.ndarray:
    """int32 [n, K]: the target columns ``names`` of rows ``indices`` (read for those rows)."""
    return self._columns_of(indices, names, "target", self._target_features,
                            lambda r, n: int(r[self._target_features[n]]))

  @property
  def attribute_names(self) -> tuple[str, ...]:
    return self._attribute_names

  def attributes_of(self, indices, names: Sequence[str]) -> np.ndarray:
    """int32 [n, A] in {0, 1}: the attributes ``names`` of rows ``indices``."""
    return self._columns_of(indices, names, "attribute", self._attribute_names,
                            lambda r, n: int(bool(r[self.layout.attributes][n])))

  def _columns_of(self, indices, names: Sequence[str], kind: str, valid,
                  value: Callable[[dict, str], int]) -> np.ndarray:
    """int32 [n, len(names)]: ``value(record, name)`` of rows ``indices`` (read for those rows);
    a ``KeyError`` lists the ``valid`` names of this ``kind`` when a name is not among them."""
    names = tuple(names)
    unknown = [n for n in names if n not in valid]
    if unknown:
      raise KeyError(f"{self.name} has no {kind} {unknown}; valid names: "
                     f"{list(valid) or 'none'}")
    records = self._records(indices)
    out = np.zeros((len(records), len(names)), np.int32)
    for j, n in enumerate(names):
      out[:, j] = [value(r, n) for r in records]
    return out


class TfdsGroundTruth(TfdsDataset):
  """A TFDS set with factor labels, as a ground-truth dataset (``ground_truth.GroundTruthData``)."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self._table = None
    self._warned = False

  @property
  def factor_names(self) -> tuple[str, ...]:
    return tuple(name for _, name, _ in self.layout.factors)

  @property
  def factor_sizes(self) -> tuple[int, ...]:
    return tuple(size for _, _, size in self.layout.factors)

  def _cache_path(self):
    key = hashlib.sha256(f"{self.data_dir}|{self.tfds_name}|{self.split}|{self._n}|"
                         f"{self._source.dataset_info.version}".encode()).hexdigest()[:16]
    return files.resolve_cache_dir() / "tfds" / f"{self.tfds_name}_{key}_factors.npy"

  def _factor_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(factors [N, K], mixed-radix bases, sorted codes, row order) of every stored row."""
    if self._table is None:
      path, factors = self._cache_path(), None
      if path.is_file():
        try:
          factors = np.load(path)
          factors = factors if factors.shape == (self._n, len(self.factor_sizes)) else None
        except (OSError, ValueError):
          factors = None
      if factors is None:
        _LOG.info("reading the factors of the %d rows of %s (once; cached in %s)", self._n,
                  self.name, path)
        factors = self.columns([f for f, _, _ in self.layout.factors])
        try:
          with atomic.replacing(path) as tmp, open(tmp, "wb") as f:
            np.save(f, factors)
        except OSError as e:
          _LOG.info("could not write the cache %s (%s)", path, e)
      sizes = np.asarray(self.factor_sizes)
      if np.any(factors < 0) or np.any(factors >= sizes):
        raise files.DataFileError(f"{self.name}: factor classes outside the sizes {tuple(sizes)}")
      bases = np.cumprod((1,) + tuple(sizes[:0:-1]))[::-1].astype(np.int64)  # last fastest
      codes = factors @ bases
      order = np.argsort(codes, kind="stable")
      self._table = (factors, bases, codes[order], order)
    return self._table

  @property
  def factors(self) -> np.ndarray:
    """int64 [N, K]: the factor classes of every stored row (``metrics.enumerate_factors``)."""
    return self._factor_table()[0]

  def factors_of(self, indices) -> np.ndarray:
    """int64 [n, K]: the factor classes of rows ``indices``."""
    return self.factors[np.asarray(indices, np.int64)]

  @property
  def full_grid(self) -> bool:
    """Every factor row is carried by exactly one example."""
    _, _, codes, _ = self._factor_table()
    return len(codes) == int(np.prod(self.factor_sizes)) and bool(np.all(np.diff(codes) > 0))

  def sample_factors(self, num: int, rng: np.random.Generator) -> np.ndarray:
    """Factor rows [num, K] of uniformly drawn stored examples (on a full grid: independent
    uniform factors)."""
    return self.factors[rng.integers(0, self._n, size=num)]

  def indices_of_factors(self, factors, rng: np.random.Generator | None = None) -> np.ndarray:
    """Rows carrying ``factors`` [n, K] (uniform among several); ``KeyError`` if none does."""
    _, bases, codes, order = self._factor_table()
    want = np.asarray(factors, np.int64) @ bases
    lo = np.searchsorted(codes, want, side="left")
    hi = np.searchsorted(codes, want, side="right")
    if np.any(hi == lo):
      raise KeyError(f"no example of {self.name} has the factors "
                     f"{np.asarray(factors)[hi == lo][0].tolist()}")
    if not self._warned and np.any(hi - lo > 1):
      self._warned = True
      _LOG.warning("%s: factors are not a full grid (%d examples); observations for given factors "
                   "are sampled among the examples that carry them", self.name, self._n)
    offset = 0 if rng is None else np.floor(rng.random(len(want)) * (hi - lo)).astype(np.int64)
    return order[lo + offset]

  def sample_observations_from_factors(self, factors, rng: np.random.Generator) -> np.ndarray:
    """float32 images [n, H, W, C] of examples carrying ``factors`` [n, K]."""
    return self.get_images(self.indices_of_factors(factors, rng))


def load(name: str, split: str, *, tfds_data_dir: str | os.PathLike | None = None,
         tfds_name: str = "") -> TfdsDataset:
  """Dataset ``name`` at ``split`` from a prepared TFDS set (``tfds_name`` or the catalog's).

  Raises:
    ConfigError: ``name`` has no TFDS layout, or the set lacks a feature the layout needs.
    TfdsNotPreparedError: the set is not prepared (in array_record) under the folder.
  """
  if name not in LAYOUTS:
    raise config_lib.ConfigError(
        f"config field 'dataset.source': 'tfds' serves {sorted(LAYOUTS)}, not {name!r}")
  layout = LAYOUTS[name]
  if split not in layout.splits:
    raise config_lib.ConfigError(f"config field 'dataset.train_split': {name} has no split "
                                 f"{split!r}; valid splits: {list(layout.splits)}")
  builder = tfds_name or layout.catalog
  data_dir = resolve_tfds_data_dir(tfds_data_dir)
  source = open_source(builder, layout.splits[split], data_dir)
  cls = TfdsGroundTruth if layout.factors else TfdsDataset
  return cls(name, split, source, layout=layout, tfds_name=builder, data_dir=data_dir,
             field="dataset.tfds_name" if tfds_name else "dataset.name")
