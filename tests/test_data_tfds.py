"""dataset.source='tfds': tiny array_record builders prepared in the test, read without TensorFlow.

The raw-file source built from the same arrays is the reference: the TFDS source must give the
same batches (images, targets) for the same (seed, step); the ground-truth protocol is checked
against the factors written into each image's pixels.
"""
import json
import subprocess
import sys

import numpy as np
from PIL import Image
import pytest
import tensorflow_datasets as tfds

from disentangle import config as config_lib
from disentangle import data
from disentangle.data import build
from disentangle.data.datasets import mnist
from disentangle.data.datasets import synthetic
from disentangle.data.labels import batch_spec
from disentangle.data.tfds import builders
from disentangle.data.tfds import source as tfds_source
from disentangle.metrics import factor_vae_score
from disentangle.train import input_pipeline
from disentangle.train import trainer
from tests import helpers

TRAIN_IMAGES, TRAIN_LABELS = helpers.TRAIN_IMAGES, helpers.TRAIN_LABELS
TEST_IMAGES = helpers.TEST_IMAGES
TinyMnist, prepare = helpers.TinyMnist, helpers.prepare


_Builder = builders._ArrayBuilder  # pylint: disable=protected-access
_tensor = builders._tensor  # pylint: disable=protected-access


class ImagesOnly(_Builder, skip_registration=True):
  """MNIST-shaped images and no label."""

  def _features(self):
    return {"image": builders._tensor((28, 28, 1), np.uint8)}  # pylint: disable=protected-access

  def _generate_examples(self, split):
    for i, img in enumerate(TRAIN_IMAGES[:10]):
      yield i, {"image": img}


SHAPES3D = tfds_source.LAYOUTS["shapes3d"].factors
# Two values of every factor (its first and last class), each combination carried by 2 examples:
# not a full grid of (10, 10, 10, 8, 4, 15), but closed under fixing one factor of a row.
COMBOS = np.indices((2,) * 6).reshape(6, -1).T * (np.array([s for _, _, s in SHAPES3D]) - 1)
ROWS = np.concatenate([COMBOS, COMBOS])[np.random.default_rng(1).permutation(2 * len(COMBOS))]


def shapes3d_image(factors, copy: int) -> np.ndarray:
  """Factor k in pixel (0, k) of the red channel (x16), the copy number in pixel (1, 0)."""
  img = np.zeros((64, 64, 3), np.uint8)
  img[0, :6, 0] = np.asarray(factors) * 16
  img[1, 0, 0] = 100 * copy
  return img


def decode(images: np.ndarray) -> np.ndarray:
  """The identity representation: the factors written into the pixels."""
  return np.rint(np.asarray(images)[:, 0, :6, 0] * 255.0 / 16.0)


class TinyShapes3d(_Builder, skip_registration=True):
  """shapes3d's layout over ROWS."""

  def _features(self):
    feats = {"image": builders._tensor((64, 64, 3), np.uint8)}  # pylint: disable=protected-access
    feats.update({f: _tensor((), np.int64) for f, _, _ in SHAPES3D})
    return feats

  def _generate_examples(self, split):
    seen = set()
    for i, row in enumerate(ROWS):
      copy = int(tuple(row) in seen)
      seen.add(tuple(row))
      example = {"image": shapes3d_image(row, copy)}
      example.update({f: int(v) for (f, _, _), v in zip(SHAPES3D, row)})
      yield i, example


SMALLNORB = tfds_source.LAYOUTS["smallnorb"].factors
# smallNORB's layout over a few factor rows (category, elevation, azimuth, lighting), each carried
# by two instances per chunk as in the real set (training chunk instances 4, 6, 7, 8, 9; testing
# 0, 1, 2, 3, 5), one row only in the training chunk; random 96x96 images.
NORB_ROWS = np.array([[0, 0, 0, 0], [4, 8, 17, 5], [2, 3, 9, 1]])
NORB_INSTANCES = {"train": (4, 9), "test": (0, 5)}


def _norb_chunk(split):
  """(images [n, 96, 96, 1] uint8, factors [n, 4], instances [n]) of a chunk, in its order."""
  rows = NORB_ROWS if split == "train" else NORB_ROWS[:2]
  factors = np.repeat(rows, 2, axis=0)
  instances = np.tile(NORB_INSTANCES[split], len(rows))
  rng = np.random.default_rng(7 if split == "train" else 8)
  return rng.integers(0, 256, (len(factors), 96, 96, 1), dtype=np.uint8), factors, instances


class TinySmallnorb(_Builder, skip_registration=True):
  """smallNORB's features (96x96 ``image``, the four factors and ``instance``), two chunks."""

  def _features(self):
    feats = {"image": _tensor((96, 96, 1), np.uint8), "instance": _tensor((), np.int64)}
    feats.update({f: _tensor((), np.int64) for f, _, _ in SMALLNORB})
    return feats

  def _splits(self):
    return ("train", "test")

  def _generate_examples(self, split):
    images, factors, instances = _norb_chunk(split)
    for i, (img, row, inst) in enumerate(zip(images, factors, instances)):
      example = {"image": img, "instance": int(inst)}
      example.update({f: int(v) for (f, _, _), v in zip(SMALLNORB, row)})
      yield i, example


@pytest.fixture(scope="module")
def tfds_dir(tmp_path_factory):
  root = tmp_path_factory.mktemp("tfds")
  for cls in (TinyMnist, ImagesOnly, TinyShapes3d, TinySmallnorb):
    prepare(cls, root)
  return str(root)


@pytest.fixture(scope="module")
def raw_mnist(tmp_path_factory):
  """The raw-file source of the same arrays (IDX files, read as dataset 'mnist')."""
  root = tmp_path_factory.mktemp("raw")
  for prefix, images, labels in (("train", TRAIN_IMAGES, TRAIN_LABELS),
                                 ("t10k", TEST_IMAGES, np.zeros(len(TEST_IMAGES)))):
    mnist.write_idx(root / "mnist" / f"{prefix}-images-idx3-ubyte.gz", images[..., 0])
    mnist.write_idx(root / "mnist" / f"{prefix}-labels-idx1-ubyte.gz", labels.astype(np.uint8))
  return mnist.load_mnist(root, "train", verify=False)


def test_tfds_batches_equal_raw_file_batches(tfds_dir, raw_mnist):
  ds = data.load_dataset("mnist", data_dir=None, source="tfds", tfds_data_dir=tfds_dir,
                         tfds_name="tiny_mnist")
  assert (ds.num_examples, ds.image_shape) == (raw_mnist.num_examples, raw_mnist.image_shape)
  assert ds.target_names == ("digit",) and ds.target_sizes == {"digit": 10}
  np.testing.assert_array_equal(ds.labels, raw_mnist.labels)
  spec = batch_spec.BatchSpec(targets=("digit",))
  for s in (batch_spec.IMAGES_ONLY, spec):
    a = input_pipeline.make_source(ds, s, global_batch=16, seed=3)
    b = input_pipeline.make_source(raw_mnist, s, global_batch=16, seed=3)
    for step in (0, 1, 2, 5):  # 40 rows: steps 2 and 5 straddle epochs
      got, want = a.local_batch(step), b.local_batch(step)
      assert sorted(got) == sorted(want)
      for k in want:
        assert got[k].dtype == want[k].dtype
        np.testing.assert_array_equal(got[k], want[k])
  test = data.load_dataset("mnist", data_dir=None, source="tfds", tfds_data_dir=tfds_dir,
                           tfds_name="tiny_mnist", split="test")
  np.testing.assert_array_equal(test.get_images(np.arange(8)),
                                data.to_float_images(mnist.resize_bilinear(
                                    TEST_IMAGES[..., 0], 32)[..., None]))
  assert "tensorflow" not in sys.modules


@pytest.mark.slow
def test_two_training_steps_from_tfds_config(tfds_dir, tmp_path):
  config = helpers.tiny_config(**{"num_steps": 2, "log_every": 1, "checkpoint_every": 2,
                                  "mesh.num_devices": 1, "dataset.source": "tfds",
                                  "dataset.tfds_data_dir": tfds_dir,
                                  "dataset.tfds_name": "tiny_mnist"})
  state = trainer.train(config, tmp_path)  # the trainer loads the set itself
  assert int(state.step) == 2
  assert (tmp_path / "checkpoints" / "2").exists()


def test_each_process_reads_only_its_share(tfds_dir):
  """Two process indices of one global batch, in one process: each reads exactly its contiguous
  share, nothing else (the real two-process loopback run: tests/test_distributed.py)."""
  shares = []
  for p in range(2):
    ds = data.load_dataset("mnist", data_dir=None, source="tfds", tfds_data_dir=tfds_dir,
                           tfds_name="tiny_mnist")
    read = []
    inner = ds._source  # pylint: disable=protected-access

    class Recording:
      dataset_info = inner.dataset_info

      def __len__(self):
        return len(inner)

      def __getitems__(self, keys):
        read.extend(keys)
        return inner.__getitems__(keys)

    ds._source = Recording()  # pylint: disable=protected-access
    source = input_pipeline.make_source(ds, batch_spec.BatchSpec(targets=("digit",)),
                                        global_batch=16, seed=0, process_index=p,
                                        process_count=2)
    source.local_batch(1)
    want = source.images.global_indices(1)[8 * p:8 * p + 8]
    assert read == want.tolist()  # images and targets of the share: one read
    shares.append(set(read))
  assert not shares[0] & shares[1] and len(shares[0] | shares[1]) == 16


def test_ground_truth_protocol_on_shapes3d_format(tfds_dir):
  ds = data.load_dataset("shapes3d", data_dir=None, source="tfds", tfds_data_dir=tfds_dir,
                         tfds_name="tiny_shapes3d")
  assert ds.factor_sizes == (10, 10, 10, 8, 4, 15) and not ds.full_grid
  assert ds.factor_names == ("floor_hue", "wall_hue", "object_hue", "scale", "shape",
                             "orientation")
  np.testing.assert_array_equal(ds.factors, ROWS)
  rng = np.random.default_rng(0)
  factors = ds.sample_factors(300, rng)
  assert {tuple(f) for f in factors} <= {tuple(r) for r in ROWS}
  images = ds.sample_observations_from_factors(factors, rng)
  assert images.shape == (300, 64, 64, 3) and images.dtype == np.float32
  np.testing.assert_array_equal(decode(images), factors)  # exactly those factors
  copies = np.rint(images[:, 1, 0, 0] * 255 / 100)
  assert set(copies.tolist()) == {0.0, 1.0}  # drawn among both examples carrying them
  np.testing.assert_array_equal(ds.targets_of([0, 1], ["scale", "shape"]), ROWS[:2, [3, 4]])
  with pytest.raises(KeyError, match="no example"):
    ds.sample_observations_from_factors([[1, 0, 0, 0, 0, 0]], rng)
  # The identity representation scores 1: votes from the whole set and from fresh samples.
  assert factor_vae_score(ds, decode, np.random.default_rng(0))["score"] == 1.0
  out = factor_vae_score(ds, decode, np.random.default_rng(1), num_variance_points=100,
                         num_votes=60, batch_size=20, encode_batch_size=50)
  assert out["vote_source"] == "fresh_samples" and out["score"] == 1.0


def test_smallnorb_all_is_both_chunks_as_disentanglement_lib_reads_them(tfds_dir):
  """``split='all'``: the training chunk's rows then the testing chunk's, each 96x96 image
  Lanczos-resized to 64x64 / 255 (norb.py lines 89-94, 135-141, written out in numpy / PIL)."""
  chunks = [_norb_chunk(split) for split in ("train", "test")]
  want_images = np.concatenate([
      np.stack([np.asarray(Image.fromarray(img[..., 0]).resize((64, 64), Image.LANCZOS))
                for img in images]) for images, _, _ in chunks])[..., None] / 255.0
  want_factors = np.concatenate([factors for _, factors, _ in chunks])
  ds = data.load_dataset("smallnorb", data_dir=None, source="tfds", tfds_data_dir=tfds_dir,
                         tfds_name="tiny_smallnorb", split="all")
  assert ds.num_examples == len(want_factors) == 10
  assert ds.factor_sizes == (5, 9, 18, 6) and not ds.full_grid
  np.testing.assert_array_equal(ds.factors, want_factors)
  np.testing.assert_allclose(ds.get_images(np.arange(10)), want_images, atol=1e-7)
  # the instance is a nuisance: a factor row's observation is drawn among every example that
  # carries it, in both chunks (norb.py lines 58-60, 83-86)
  rng = np.random.default_rng(0)
  row = np.repeat(NORB_ROWS[1:2], 200, axis=0)
  drawn = set(ds.indices_of_factors(row, rng).tolist())
  assert drawn == set(np.flatnonzero((want_factors == NORB_ROWS[1]).all(1)).tolist()) == \
      {2, 3, 8, 9}
  train = data.load_dataset("smallnorb", data_dir=None, source="tfds", tfds_data_dir=tfds_dir,
                            tfds_name="tiny_smallnorb", split="train")
  np.testing.assert_array_equal(train.factors, chunks[0][1])  # the training chunk alone


def test_missing_set_is_one_line_naming_set_folder_and_command(tmp_path, monkeypatch):
  monkeypatch.setenv("DISENTANGLE_NO_DOWNLOAD", "1")
  with pytest.raises(tfds_source.TfdsNotPreparedError) as e:
    data.load_dataset("shapes3d", data_dir=None, source="tfds", tfds_data_dir=str(tmp_path))
  msg = str(e.value)
  assert "\n" not in msg and "'shapes3d'" in msg and str(tmp_path) in msg
  assert f"tfds build shapes3d --data_dir={tmp_path} --file_format=array_record" in msg
  with pytest.raises(tfds_source.TfdsNotPreparedError,
                     match=f"python -m disentangle.data.build --name=synthetic_mnist "
                           f"--data_dir={tmp_path}"):
    data.load_dataset("mnist", data_dir=None, source="tfds", tfds_data_dir=str(tmp_path),
                      tfds_name="synthetic_mnist")
  assert not any(tmp_path.iterdir())  # nothing was downloaded or created


def test_wrong_features_are_config_errors_naming_the_field(tfds_dir):
  with pytest.raises(config_lib.ConfigError, match=r"'dataset.tfds_name'.*tiny_mnist.*"
                                                   r"label_floor_hue"):
    data.load_dataset("shapes3d", data_dir=None, source="tfds", tfds_data_dir=tfds_dir,
                      tfds_name="tiny_mnist")
  no_labels = data.load_dataset("mnist", data_dir=None, source="tfds", tfds_data_dir=tfds_dir,
                                tfds_name="images_only")
  assert no_labels.target_names == () and no_labels.labels is None
  spec = batch_spec.BatchSpec(targets=("digit",), fields=(("targets", "parted.targets"),))
  with pytest.raises(config_lib.ConfigError, match="'parted.targets'.*has no targets"):
    input_pipeline.make_source(no_labels, spec, global_batch=4, seed=0)
  with pytest.raises(config_lib.ConfigError, match="'dataset.source'"):
    data.load_dataset("shapes3d", data_dir=None, source="file")


@pytest.mark.slow
def test_build_cli_prepares_the_synthetic_stand_in(tmp_path, capsys):
  assert build.main(["--name=synthetic_mnist", f"--data_dir={tmp_path / 'tfds'}"]) == 0
  assert "prepared synthetic_mnist" in capsys.readouterr().out
  ds = data.load_dataset("mnist", data_dir=None, source="tfds",
                         tfds_data_dir=str(tmp_path / "tfds"), tfds_name="synthetic_mnist")
  raw = mnist.load_mnist(synthetic.write_mnist_like(tmp_path / "raw").parent, verify=False)
  idx = np.random.default_rng(0).permutation(raw.num_examples)[:32]
  np.testing.assert_array_equal(ds.get_images(idx), raw.get_images(idx))
  np.testing.assert_array_equal(ds.targets_of(idx, ["digit"]), raw.targets_of(idx, ["digit"]))
  assert ds.source == "render"  # procedural: scores flagged as not comparable
  assert tfds.data_source  # the data came back through TFDS's random access, without TF
  assert "tensorflow" not in sys.modules


_NO_TF_BUILD = r"""
import importlib.machinery, json, sys

class NoTensorFlow(importlib.machinery.PathFinder):  # as where TensorFlow is not installed
  @classmethod
  def find_spec(cls, name, path=None, target=None):
    if name.split(".")[0] == "tensorflow":
      return None
    return importlib.machinery.PathFinder.find_spec(name, path, target)

sys.meta_path = [NoTensorFlow if f is importlib.machinery.PathFinder else f for f in sys.meta_path]
sys.path_importer_cache.clear()
import itertools, tempfile
import numpy as np
from tensorflow_datasets.core import shuffle
from disentangle.data.datasets import dsprites, synthetic
from disentangle.data.tfds import builders

shuffle.MAX_MEM_BUFFER_SIZE = 1 << 20  # 1 MB: both sets below outgrow it
builders._SHARD_BYTES = 1 << 20  # 256 dSprites rows a shard
spill = shuffle.Shuffler(sys.argv[1] + "/spill", "train", disable_shuffling=True)
try:
  for i in range(300):
    spill.add(i, bytes(4096))
  spilled = "no error"
except ImportError as e:  # TFDS's own writer path needs TensorFlow here
  spilled = type(e).__name__

class RenderedHead(builders.DspritesRendered, skip_registration=True):
  SIZE = 1000
  def _num_examples(self, split):
    return self.SIZE
  def _generate_examples(self, split):
    return itertools.islice(super()._generate_examples(split), 1000)

class RenderedWrongSize(RenderedHead, skip_registration=True):
  SIZE = 1001

out = {"spilled": spilled}
folder = builders.prepare("synthetic_dsprites", sys.argv[1])
src = builders.SyntheticDsprites(data_dir=sys.argv[1]).as_data_source(split="train")
with tempfile.TemporaryDirectory() as tmp, np.load(synthetic.write_dsprites_subset(tmp)) as npz:
  imgs, classes = npz["imgs"], npz["latents_classes"]
out["counted_rows"] = len(src)
out["counted_shards"] = len([f for f in folder.glob("*.array_record*") if "index" not in f.name])
out["counted_equal"] = all(
    np.array_equal(src[i]["image"][..., 0], imgs[i])
    and [int(src[i][f]) for f in builders._DSPRITES_FEATURES] == classes[i, 1:].tolist()
    for i in range(len(imgs)))
head = RenderedHead(data_dir=sys.argv[1], file_format="array_record")
head.download_and_prepare()
src = head.as_data_source(split="train")
idx = np.arange(1000)
ref = dsprites.render_factors(dsprites.index_to_factors(idx))
rows = src.__getitems__(list(idx))
out["declared_rows"] = len(src)
out["declared_equal"] = bool(np.array_equal(np.stack([r["image"][..., 0] for r in rows]), ref))
try:
  RenderedWrongSize(data_dir=sys.argv[1], file_format="array_record").download_and_prepare()
  out["wrong_size"] = "prepared"
except Exception as e:  # pylint: disable=broad-except
  out["wrong_size"] = str(e).splitlines()[-1]
out["tensorflow_imported"] = "tensorflow" in sys.modules
print(json.dumps(out))
"""


@pytest.mark.slow
def test_builds_past_the_shuffle_buffer_without_tensorflow(tmp_path):
  """With TensorFlow unimportable and TFDS's in-memory shuffle buffer shrunk below the sets, the
  shuffler itself needs TensorFlow to spill; the builders still prepare, in several shards, and
  read back by index the rows of the raw arrays (the counted stand-in) and of the renderer (a
  split of declared size, written as generated)."""
  proc = subprocess.run([sys.executable, "-c", _NO_TF_BUILD, str(tmp_path)], capture_output=True,
                        text=True, cwd=helpers.REPO, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert not helpers.library_log_lines(proc.stdout + proc.stderr), proc.stdout[-3000:]  # TFDS'
  out = json.loads(proc.stdout.strip().splitlines()[-1])
  assert out["spilled"] in ("ImportError", "ModuleNotFoundError")
  # 4096 image bytes and five int64 factors a row: 253 rows in each 1 MB shard, 9 shards.
  assert out["counted_rows"] == 2048 and out["counted_shards"] == 9
  assert out["counted_equal"]
  assert out["declared_rows"] == 1000 and out["declared_equal"]
  assert "does not have the 1001 examples" in out["wrong_size"]
  assert not out["tensorflow_imported"]
