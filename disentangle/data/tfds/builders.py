"""The project's sets as TFDS builders that prepare without TensorFlow.

Every builder has ``tfds.features.Tensor`` features only (``tfds.features.Image`` needs
TensorFlow to encode PNGs), is prepared in the ``array_record`` format (random access through
``tfds.data_source``), keeps its examples in generation order (``disable_shuffling``) and has the
feature layout of the catalog set it stands for (``layouts.LAYOUTS``), so that
``dataset.source='tfds'`` with ``dataset.tfds_name=<builder>`` reads it as that set.

The builders are ``tfds.core.ShardBasedBuilder``: each shard's examples go straight into its
array_record file. ``GeneratorBasedBuilder`` would pass them through TFDS's shuffler, which spills
to bucket files through ``tf.io.gfile`` (TensorFlow) once a split outgrows its 1 GB in-memory
buffer (``tensorflow_datasets.core.shuffle.MAX_MEM_BUFFER_SIZE``), as the 737280 rendered dSprites
(3 GB) do, even with shuffling disabled.

====================== ============ ===============================================================
builder                read as      content
====================== ============ ===============================================================
dsprites_rendered      dsprites     the full 737280 grid drawn by ``dsprites_render``, in the
                                    official order (minutes to prepare; scores NOT comparable
                                    with published numbers)
synthetic_dsprites     dsprites     the 2048-image rendered subset of ``synthetic`` (seed 0)
synthetic_mnist        mnist        the IDX stand-ins of ``synthetic`` (2000 train, 500 test)
synthetic_fashion_mnist fashion_mnist as synthetic_mnist, Fashion's glyphs
synthetic_celeb_a      celeba       the 48 JPEG stand-ins of ``synthetic`` with their attributes
                                    and partition (train / validation / test)
synthetic_shapes3d     shapes3d     4096 rows of the shapes3d factor grid (seed 0), drawn as a
                                    floor, a wall and an object: not a full grid
====================== ============ ===============================================================

Prepare one with ``python -m disentangle.data.build --name=<builder> --data_dir=<folder>``
(:func:`prepare`). Nothing downloads. DSpritesUnfair is a view over dSprites
(``data.datasets.dsprites_unfair``) and has no builder of its own.
"""
from __future__ import annotations

import itertools
import os
import pathlib
import tempfile

import numpy as np
from PIL import Image
from PIL import ImageDraw
import tensorflow_datasets as tfds

from disentangle.data.datasets import dsprites
from disentangle.data.datasets import mnist
from disentangle.data.datasets import synthetic
from disentangle.data.tfds import layouts

_CHUNK = 4096
_SHARD_BYTES = 128 << 20  # bytes of raw features per array_record shard


def _tensor(shape, dtype):
  return tfds.features.Tensor(shape=shape, dtype=dtype)


def _labels(names) -> dict:
  return {n: _tensor((), np.int64) for n in names}


class _ArrayBuilder(tfds.core.ShardBasedBuilder, skip_registration=True):
  """Tensor features, array_record, examples kept in generation order.

  A subclass writes ``_features``, ``_splits`` and ``_generate_examples(split)`` (``(key,
  example)`` pairs in order). A split whose size ``_num_examples(split)`` declares is written
  shard by shard as it is generated (memory bounded by one shard); any other split is held in
  memory once to be counted (the small stand-ins).
  """

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "First version."}
  DESCRIPTION = ""

  @tfds.core.utils.classproperty
  @classmethod
  def code_path(cls):
    """None: no checksum or metadata files next to the code (TFDS's lookup of them through
    ``importlib_resources`` fails for an editable install, and nothing is downloaded)."""
    return None

  def _log_download_bytes(self) -> None:
    """Nothing: TFDS prints "Downloading and preparing dataset ..." here, but nothing is
    downloaded; the command that prepares (`disentangle.data.build`) prints its own line."""

  def _log_download_done(self) -> None:
    """Nothing: TFDS prints "Dataset ... downloaded and prepared to ..." here."""

  def _features(self) -> dict:
    raise NotImplementedError

  def _info(self) -> tfds.core.DatasetInfo:
    return tfds.core.DatasetInfo(builder=self, description=self.DESCRIPTION,
                                 features=tfds.features.FeaturesDict(self._features()),
                                 disable_shuffling=True)

  def _shard_iterators_per_split(self, dl_manager):
    del dl_manager  # nothing is downloaded
    return {split: self._shards(split) for split in self._splits()}

  def _shards(self, split: str) -> list:
    """Generators of consecutive slices of ``_generate_examples(split)``, one per shard.

    They share one generator, so they must run in order (``prepare`` runs them in this process,
    one after the other); the last one checks that the split had its declared size."""
    num = self._num_examples(split)
    examples = self._generate_examples(split)
    if num is None:
      examples = list(examples)
      num = len(examples)
    examples = iter(examples)
    if num == 0:
      raise ValueError(f"{self.name}: split {split!r} has no examples")
    row_bytes = sum(int(np.prod(t.shape)) * np.dtype(t.np_dtype).itemsize
                    for t in tfds.core.utils.flatten_nest_dict(
                        self.info.features.get_tensor_info()).values())
    per_shard = max(1, _SHARD_BYTES // max(row_bytes, 1))
    bounds = list(range(0, num, per_shard)) + [num]

    def shard(k):
      def gen():
        count = 0
        for item in itertools.islice(examples, bounds[k + 1] - bounds[k]):
          count += 1
          yield item
        last = k == len(bounds) - 2
        if count < bounds[k + 1] - bounds[k] or (last and next(examples, None) is not None):
          raise ValueError(f"{self.name}: split {split!r} does not have the {num} examples "
                           "_num_examples declares")
      return gen
    return [shard(k) for k in range(len(bounds) - 1)]

  def _num_examples(self, split: str) -> int | None:
    """The size of ``split`` if known before generating it (None: count it in memory)."""
    del split
    return None

  def _splits(self) -> tuple[str, ...]:
    return ("train",)


_DSPRITES_FEATURES = [f for f, _, _ in layouts.LAYOUTS["dsprites"].factors]


def _dsprites_example(image: np.ndarray, factors: np.ndarray) -> dict:
  out = {"image": image[..., None].astype(np.uint8)}
  out.update({f: int(v) for f, v in zip(_DSPRITES_FEATURES, factors)})
  return out


class DspritesRendered(_ArrayBuilder):
  """The full dSprites grid drawn by the procedural renderer (official order)."""

  DESCRIPTION = ("dSprites' 737280 factor combinations drawn by disentangle.data.datasets.dsprites_render "
                 "(RENDERED, not the official images; scores are not comparable).")

  def _features(self):
    return {"image": _tensor((64, 64, 1), np.uint8), **_labels(_DSPRITES_FEATURES)}

  def _num_examples(self, split):
    del split
    return dsprites.NUM_EXAMPLES

  def _generate_examples(self, split):
    del split
    for start in range(0, dsprites.NUM_EXAMPLES, _CHUNK):
      idx = np.arange(start, min(start + _CHUNK, dsprites.NUM_EXAMPLES))
      factors = dsprites.index_to_factors(idx)
      for i, img, f in zip(idx, dsprites.render_factors(factors), factors):
        yield int(i), _dsprites_example(img, f)


class SyntheticDsprites(_ArrayBuilder):
  """The rendered dSprites subset of ``synthetic.write_dsprites_subset``."""

  DESCRIPTION = "SYNTHETIC: 2048 rendered dSprites combinations (disentangle.data.datasets.synthetic)."

  def _features(self):
    return {"image": _tensor((64, 64, 1), np.uint8), **_labels(_DSPRITES_FEATURES)}

  def _generate_examples(self, split):
    del split
    with tempfile.TemporaryDirectory() as tmp:
      with np.load(synthetic.write_dsprites_subset(tmp)) as npz:
        imgs, classes = npz["imgs"], npz["latents_classes"]
    for i, (img, c) in enumerate(zip(imgs, classes)):
      yield i, _dsprites_example(img, c[1:])


def read_mnist_like(folder: str, split: str) -> tuple[np.ndarray, np.ndarray]:
  """Raw uint8 [N, 28, 28, 1] images and int64 labels of a stand-in written by ``synthetic``."""
  prefix = {"train": "train", "test": "t10k"}[split]
  images = mnist.read_idx(os.path.join(folder, f"{prefix}-images-idx3-ubyte.gz"), 3)
  labels = mnist.read_idx(os.path.join(folder, f"{prefix}-labels-idx1-ubyte.gz"), 1)
  return images[..., None], labels.astype(np.int64)


class SyntheticMnist(_ArrayBuilder):
  """The MNIST stand-in of ``synthetic.write_mnist_like`` (raw 28x28, as TFDS's mnist)."""

  DESCRIPTION = "SYNTHETIC MNIST-format glyphs (disentangle.data.datasets.synthetic), not MNIST."
  FOLDER = "mnist"

  def _features(self):
    return {"image": _tensor((28, 28, 1), np.uint8), "label": _tensor((), np.int64)}

  def _splits(self):
    return ("train", "test")

  def _generate_examples(self, split):
    with tempfile.TemporaryDirectory() as tmp:
      folder = synthetic.write_mnist_like(tmp, self.FOLDER)
      images, labels = read_mnist_like(str(folder), split)
    for i, (img, label) in enumerate(zip(images, labels)):
      yield i, {"image": img, "label": int(label)}


class SyntheticFashionMnist(SyntheticMnist):
  DESCRIPTION = "SYNTHETIC Fashion-MNIST-format glyphs (disentangle.data.datasets.synthetic)."
  FOLDER = "fashion_mnist"


class SyntheticCelebA(_ArrayBuilder):
  """The CelebA stand-in of ``synthetic.write_celeba`` (178x218 JPEGs, 40 attributes)."""

  DESCRIPTION = "SYNTHETIC CelebA-format faces (disentangle.data.datasets.synthetic), not CelebA."

  def _features(self):
    return {"image": _tensor((218, 178, 3), np.uint8),
            "attributes": {n: _tensor((), np.bool_) for n in synthetic.CELEBA_ATTRIBUTES}}

  def _splits(self):
    return ("train", "validation", "test")

  def _generate_examples(self, split):
    part = {"train": "0", "validation": "1", "test": "2"}[split]
    with tempfile.TemporaryDirectory() as tmp:
      root = pathlib.Path(synthetic.write_celeba(tmp))
      lines = (root / "list_attr_celeba.txt").read_text().splitlines()[2:]
      parts = dict(l.split() for l in (root / "list_eval_partition.txt").read_text().splitlines())
      rows = []
      for line in lines:
        name, *values = line.split()
        if parts[name] == part:
          with Image.open(root / "img_align_celeba" / name) as img:
            rows.append((name, np.asarray(img.convert("RGB"), np.uint8),
                         {a: v == "1" for a, v in zip(synthetic.CELEBA_ATTRIBUTES, values)}))
    for name, img, attrs in rows:
      yield name, {"image": img, "attributes": attrs}


_SHAPES3D = layouts.LAYOUTS["shapes3d"].factors


def draw_shapes3d(factors: np.ndarray) -> np.ndarray:
  """A shapes3d-like uint8 [64, 64, 3] image of one factor row (floor, wall, object hues, scale,
  shape, orientation): hues on the HSV circle, the object's size and horizontal place by scale
  and orientation. Only the format resembles shapes3d."""
  floor, wall, obj, scale, shape, orient = (int(v) for v in factors)
  hue = lambda k: tuple(int(255 * c) for c in _hsv(k / 10.0))  # noqa: E731
  img = Image.new("RGB", (64, 64), hue(wall))
  draw = ImageDraw.Draw(img)
  draw.rectangle([0, 44, 63, 63], fill=hue(floor))
  r = 5 + scale
  cx, cy = 14 + 36 * orient / 14, 44 - r
  box = [cx - r, cy - r, cx + r, cy + r]
  if shape == 0:
    draw.rectangle(box, fill=hue(obj))
  elif shape == 1:
    draw.ellipse(box, fill=hue(obj))
  elif shape == 2:
    draw.polygon([(cx, cy - r), (cx + r, cy + r), (cx - r, cy + r)], fill=hue(obj))
  else:
    draw.rectangle([cx - r, cy - r / 2, cx + r, cy + r / 2], fill=hue(obj))
  return np.asarray(img, np.uint8)


def _hsv(h: float) -> tuple[float, float, float]:
  import colorsys  # pylint: disable=g-import-not-at-top
  return colorsys.hsv_to_rgb(h, 0.8, 0.9)


class SyntheticShapes3d(_ArrayBuilder):
  """4096 rows of the shapes3d factor grid, drawn by :func:`draw_shapes3d` (not a full grid)."""

  DESCRIPTION = "SYNTHETIC shapes3d-format scenes (disentangle.data.tfds.builders), not 3D Shapes."
  NUM_EXAMPLES = 4096

  def _features(self):
    return {"image": _tensor((64, 64, 3), np.uint8), **_labels(f for f, _, _ in _SHAPES3D)}

  def _generate_examples(self, split):
    del split
    rng = np.random.default_rng(0)
    sizes = [s for _, _, s in _SHAPES3D]
    factors = np.stack([rng.integers(0, s, self.NUM_EXAMPLES) for s in sizes], axis=1)
    for i, f in enumerate(factors):
      example = {"image": draw_shapes3d(f)}
      example.update({feat: int(v) for (feat, _, _), v in zip(_SHAPES3D, f)})
      yield i, example


BUILDERS = {"dsprites_rendered": DspritesRendered, "synthetic_dsprites": SyntheticDsprites,
            "synthetic_mnist": SyntheticMnist, "synthetic_fashion_mnist": SyntheticFashionMnist,
            "synthetic_celeb_a": SyntheticCelebA, "synthetic_shapes3d": SyntheticShapes3d}
assert set(BUILDERS) == set(layouts.PROJECT_BUILDERS)


def prepare(name: str, data_dir: str | os.PathLike) -> pathlib.Path:
  """Prepares builder ``name`` under ``data_dir`` (array_record); returns its version folder."""
  if name not in BUILDERS:
    raise ValueError(f"unknown builder {name!r}; valid names: {', '.join(BUILDERS)}")
  data_dir = layouts.resolve_tfds_data_dir(data_dir)
  builder = BUILDERS[name](data_dir=data_dir, file_format="array_record")
  builder.download_and_prepare(
      download_config=tfds.download.DownloadConfig(try_download_gcs=False))
  return pathlib.Path(str(builder.data_dir))
