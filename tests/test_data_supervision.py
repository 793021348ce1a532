"""Named supervision of the datasets (targets, attributes), the names check, labelled subsets."""
import gzip
import itertools
import warnings

import numpy as np
import pytest

from disentangle import config as config_lib
from disentangle import data
from disentangle.data import BatchSpec
from disentangle.data import LabelledSpec
from disentangle.data.datasets import celeba
from disentangle.data.datasets import chairs
from disentangle.data.datasets import mnist
from disentangle.data.datasets import synthetic
from disentangle.data.labels import labelled

DSPRITES_SIZES = (3, 6, 40, 32, 32)


def _raw_idx_labels(path):
  """Labels straight from the IDX bytes: 8-byte header (magic, count), then one byte each."""
  raw = gzip.decompress(path.read_bytes())
  assert raw[:4] == b"\x00\x00\x08\x01"
  return np.frombuffer(raw[8:], np.uint8).astype(np.int64)


@pytest.fixture(scope="module")
def rendered_dsprites():
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    return data.DSprites(source="render")


# --- targets and attributes against the raw files ------------------------------------------------
def test_mnist_digit_targets_equal_the_label_file(shared_data_dir):
  ds = mnist.load_mnist(shared_data_dir, "test", allow_download=False)
  raw = _raw_idx_labels(shared_data_dir / "mnist/t10k-labels-idx1-ubyte.gz")
  assert ds.target_names == ("digit",) and ds.target_sizes == {"digit": 10}
  assert ds.attribute_names == ()
  idx = np.array([9999, 0, 17, 4242])
  got = ds.targets_of(idx, ["digit"])
  assert got.dtype == np.int32 and got.shape == (4, 1)
  np.testing.assert_array_equal(got[:, 0], raw[idx])
  assert ds.attributes_of(idx, []).shape == (4, 0)
  with pytest.raises(KeyError, match="digit"):
    ds.targets_of(idx, ["class"])


def test_fashion_class_targets_equal_the_label_file(tmp_path):
  synthetic.write_mnist_like(tmp_path, "fashion_mnist", num_train=40, num_test=10)
  ds = mnist.load_fashion_mnist(tmp_path, "train", verify=False)
  raw = _raw_idx_labels(tmp_path / "fashion_mnist/train-labels-idx1-ubyte.gz")
  assert ds.target_names == ("class",) and ds.target_sizes == {"class": 10}
  np.testing.assert_array_equal(ds.targets_of(np.arange(40), ["class"])[:, 0], raw)


def test_dsprites_targets_are_the_factor_classes(rendered_dsprites, tmp_path):
  ds = rendered_dsprites
  assert ds.target_names == ("shape", "scale", "orientation", "pos_x", "pos_y")
  assert ds.target_sizes == dict(zip(ds.target_names, DSPRITES_SIZES))
  idx = np.array([0, 1, 737279, 123456, 500000])
  want = np.stack(np.unravel_index(idx, DSPRITES_SIZES), axis=1)  # pos_y fastest
  np.testing.assert_array_equal(ds.targets_of(idx, ds.target_names), want)
  np.testing.assert_array_equal(ds.targets_of(idx, ["pos_y", "shape"]), want[:, [4, 0]])
  assert ds.attribute_names == ()
  # A file's rows: the targets are its latents_classes (columns 1..5).
  path = synthetic.write_dsprites_subset(tmp_path, num_images=30)
  sample = data.DSprites(path=path)
  with np.load(path) as npz:
    classes = npz["latents_classes"]
  np.testing.assert_array_equal(sample.targets_of(np.arange(30), sample.target_names),
                                classes[:, 1:])


def test_celeba_attributes_by_official_names(tmp_path):
  synthetic.write_celeba(tmp_path, num_images=12)
  lines = (tmp_path / "celeba" / "list_attr_celeba.txt").read_text().splitlines()
  header = tuple(lines[1].split())
  raw = {row.split()[0]: row.split()[1:] for row in lines[2:]}
  ds = data.load_dataset("celeba", data_dir=tmp_path, split="train")
  assert len(header) == 40 and ds.attribute_names == header
  # CelebA's targets are PartedVAE's eight derived variables (celeba.PARTED_VARIABLES).
  assert ds.target_names == tuple(name for name, _ in celeba.PARTED_VARIABLES)
  names = ["Smiling", "Male", "Eyeglasses"]
  got = ds.attributes_of(np.arange(12), names)
  want = np.array([[raw[p.name][header.index(n)] == "1" for n in names] for p in ds.paths])
  assert got.dtype == np.int32
  np.testing.assert_array_equal(got, want.astype(np.int32))
  # The official partition keeps each image's own attributes.
  valid = data.load_dataset("celeba", data_dir=tmp_path, split="official_valid")
  part = dict(line.split() for line in
              (tmp_path / "celeba" / "list_eval_partition.txt").read_text().splitlines())
  assert [p.name for p in valid.paths] == sorted(n for n, k in part.items() if k == "1")
  want = np.array([[raw[p.name][header.index(n)] == "1" for n in names] for p in valid.paths])
  np.testing.assert_array_equal(valid.attributes_of(np.arange(valid.num_examples), names), want)


def test_celeba_splits_are_validated(tmp_path):
  synthetic.write_celeba(tmp_path, num_images=12)
  with pytest.raises(ValueError, match="official_valid"):
    data.load_dataset("celeba", data_dir=tmp_path, split="valid")
  with pytest.raises(config_lib.ConfigError, match="'dataset.eval_split'.*official_test"):
    data.check_split("celeba", "test", "dataset.eval_split")
  data.check_split("celeba", "official_test", "dataset.eval_split")
  with pytest.raises(config_lib.ConfigError, match="'dataset.train_split'.*mnist"):
    data.check_split("mnist", "all")


def test_chairs_has_no_supervision(tmp_path):
  synthetic.write_chairs(tmp_path, num_models=1, num_views=2)
  ds = chairs.load_chairs(tmp_path)
  assert ds.target_names == () and ds.attribute_names == () and ds.target_sizes == {}


def test_in_memory_helpers_carry_targets_and_attributes():
  rng = np.random.default_rng(0)
  images = rng.integers(0, 256, (20, 4, 4, 1), dtype=np.uint8)
  labels = rng.integers(0, 3, 20)
  extra = np.where(np.arange(20) % 4 == 0, -1, rng.integers(0, 5, 20))
  flag = rng.integers(0, 2, 20)
  ds = data.ArrayImages(images, labels, label_name="digit", num_classes=10,
                        targets={"extra": extra}, attributes={"flag": flag})
  assert ds.target_names == ("extra", "digit") and ds.attribute_names == ("flag",)
  assert ds.target_sizes == {"extra": int(extra.max()) + 1, "digit": 10}
  idx = np.array([3, 0, 19])
  np.testing.assert_array_equal(ds.targets_of(idx, ["digit", "extra"]),
                                np.stack([labels[idx], extra[idx]], 1))
  assert ds.targets_of([0], ["extra"])[0, 0] == -1
  np.testing.assert_array_equal(ds.attributes_of(idx, ["flag"])[:, 0], flag[idx])
  with pytest.raises(ValueError, match="0 / 1"):
    data.ArrayImages(images, attributes={"bad": np.full(20, 2)})
  factors = np.stack(np.unravel_index(np.arange(24), (2, 3, 4)), 1)
  gt = data.InMemoryGroundTruth(factors, np.zeros((24, 4, 4), np.uint8), (2, 3, 4),
                                factor_names=("a", "b", "c"), attributes={"flag": factors[:, 0]})
  assert gt.target_sizes == {"a": 2, "b": 3, "c": 4} and gt.num_examples == 24
  np.testing.assert_array_equal(gt.targets_of([23, 5], ["c", "a"]), [[3, 1], [1, 0]])
  assert gt.get_images([0, 1]).shape == (2, 4, 4, 1)


# --- the names check ------------------------------------------------------------------------------
def _digits(n=40, seed=0):
  rng = np.random.default_rng(seed)
  return data.ArrayImages(rng.integers(0, 256, (n, 4, 4, 1), dtype=np.uint8),
                          np.arange(n) % 4, name="digits", label_name="digit",
                          attributes={"odd": np.arange(n) % 2})


def test_unknown_names_raise_config_error_naming_field_and_valid_names():
  ds = _digits()
  data.check_batch_spec(ds, BatchSpec(targets=("digit",), attributes=("odd",)))
  spec = BatchSpec(targets=("digits",), fields=(("targets", "ffvae.targets"),))
  with pytest.raises(config_lib.ConfigError, match=r"'ffvae.targets'.*'digits'.*\['digit'\]"):
    data.check_batch_spec(ds, spec)
  with pytest.raises(config_lib.ConfigError, match=r"'attributes'.*\['odd'\]"):
    data.check_batch_spec(ds, BatchSpec(attributes=("Smiling",)))


def test_asking_a_set_without_targets_or_attributes_says_so(rendered_dsprites):
  with pytest.raises(config_lib.ConfigError, match="'ffvae.sensitive'.*has no attributes"):
    data.check_batch_spec(rendered_dsprites, BatchSpec(
        attributes=("Male",), fields=(("attributes", "ffvae.sensitive"),)))
  images = data.ArrayImages(np.zeros((4, 2, 2, 1), np.uint8))
  with pytest.raises(config_lib.ConfigError, match="has no targets"):
    data.check_batch_spec(images, BatchSpec(targets=("label",)))
  with pytest.raises(config_lib.ConfigError, match="labelled stream.*needs target"):
    data.check_batch_spec(_digits(), BatchSpec(labelled=LabelledSpec("first", 8, 4)))


# --- labelled subsets ----------------------------------------------------------------------------
def test_first_is_the_first_rows():
  np.testing.assert_array_equal(labelled.labelled_subset(_digits(), "first", 7, 123), np.arange(7))


def test_random_is_distinct_seeded_and_in_range():
  ds = _digits(100)
  a = labelled.labelled_subset(ds, "random", 30, 5)
  assert len(np.unique(a)) == 30 and a.min() >= 0 and a.max() < 100
  np.testing.assert_array_equal(a, labelled.labelled_subset(ds, "random", 30, 5))
  assert not np.array_equal(a, labelled.labelled_subset(ds, "random", 30, 6))


def test_balanced_has_equal_counts_per_class():
  ds = _digits(100)  # classes 0..3, 25 each
  rows = labelled.labelled_subset(ds, "balanced", 40, 3, ["digit"])
  assert len(np.unique(rows)) == 40
  assert np.bincount(np.arange(100)[rows] % 4, minlength=4).tolist() == [10] * 4
  np.testing.assert_array_equal(rows, labelled.labelled_subset(ds, "balanced", 40, 3, ["digit"]))
  with pytest.raises(config_lib.ConfigError, match="multiple of the 4 classes"):
    labelled.labelled_subset(ds, "balanced", 42, 3, ["digit"])
  skewed = data.ArrayImages(np.zeros((200, 1, 1, 1), np.uint8),
                           np.r_[np.zeros(25, int), np.ones(175, int)])
  with pytest.raises(config_lib.ConfigError, match="needs 26 rows of class 0"):
    labelled.labelled_subset(skewed, "balanced", 52, 0, ["label"])


def test_subset_errors_name_the_fields():
  ds = _digits(40)
  spec = LabelledSpec("first", 8, 4, field="parted",
                      fields=(("batch_size", "parted.labelled_batch_size"),))
  with pytest.raises(config_lib.ConfigError, match=r"'parted.rule'.*'firts'.*dsprites_stratified"):
    labelled.labelled_subset(ds, "firts", 8, 0, field_of=spec.field_of)
  with pytest.raises(config_lib.ConfigError, match="'parted.num_labelled'.*41.*has 40"):
    labelled.labelled_subset(ds, "first", 41, 0, field_of=spec.field_of)
  with pytest.raises(config_lib.ConfigError,
                     match="'parted.num_labelled' \\(8\\).*'parted.labelled_batch_size' \\(9\\)"):
    labelled.labelled_subset(ds, "first", 8, 0, batch_size=9, field_of=spec.field_of)
  with pytest.raises(config_lib.ConfigError, match="dSprites targets"):
    labelled.labelled_subset(ds, "dsprites_stratified", 8, 0)


def _cell_tuples(factors):
  f = np.asarray(factors)
  return [tuple(r) for r in np.stack([f[:, 0], f[:, 1], f[:, 2] >= 20, f[:, 3] >= 16,
                                      f[:, 4] >= 16], 1).astype(int)]


def test_dsprites_stratified_covers_the_144_cells_before_repeating(rendered_dsprites):
  ds = rendered_dsprites
  # The rule's visiting order: shape fastest, then scale, then the o / x / y halves.
  order = [(s, c, o, x, y) for y, x, o, c, s in
           itertools.product(range(2), range(2), range(2), range(6), range(3))]
  for n in (144, 288, 150):
    rows = labelled.labelled_subset(ds, "dsprites_stratified", n, 7)
    assert len(np.unique(rows)) == n
    counts = {}
    for t in _cell_tuples(np.stack(np.unravel_index(rows, DSPRITES_SIZES), 1)):
      counts[t] = counts.get(t, 0) + 1
    want = {t: n // 144 + (i < n % 144) for i, t in enumerate(order)}
    assert counts == want, n
  a = labelled.labelled_subset(ds, "dsprites_stratified", 288, 7)
  np.testing.assert_array_equal(a, labelled.labelled_subset(ds, "dsprites_stratified", 288, 7))
  b = labelled.labelled_subset(ds, "dsprites_stratified", 288, 8)
  assert not np.array_equal(a, b)
  # Inside a half the class is uniform: over 144 * 20 draws every orientation class appears.
  many = labelled.labelled_subset(ds, "dsprites_stratified", 144 * 20, 0)
  assert len(np.unique(np.unravel_index(many, DSPRITES_SIZES)[2])) == 40
