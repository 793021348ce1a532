"""IDX reading/writing and the MNIST / Fashion-MNIST loaders."""
import gzip

import numpy as np
from PIL import Image
import pytest

from disentangle.data import files
from disentangle.data.datasets import mnist
from disentangle.data.datasets import synthetic

# Published class counts of the official split (e.g. the MNIST page / torchvision docs).
MNIST_TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
MNIST_TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


@pytest.mark.parametrize("dtype,shape", [(np.uint8, (5, 3, 4)), (np.uint8, (7,)),
                                         (np.int16, (2, 3)), (np.float32, (4, 2, 2, 1)),
                                         (np.float64, (3,))])
@pytest.mark.parametrize("suffix", [".gz", ""])
def test_idx_round_trip(tmp_path, dtype, shape, suffix):
  rng = np.random.default_rng(0)
  x = (rng.normal(size=shape) * 100).astype(dtype)
  path = tmp_path / f"a-idx{suffix}"
  mnist.write_idx(path, x)
  y = mnist.read_idx(path)
  assert y.dtype == x.dtype and y.shape == x.shape
  np.testing.assert_array_equal(x, y)


def test_idx_header_matches_the_published_format(tmp_path):
  path = tmp_path / "img.gz"
  mnist.write_idx(path, np.arange(2 * 28 * 28, dtype=np.uint8).reshape(2, 28, 28) % 251)
  raw = gzip.decompress(path.read_bytes())
  assert raw[:4] == bytes.fromhex("00000803")
  assert raw[4:16] == bytes.fromhex("00000002 0000001c 0000001c")
  assert len(raw) == 16 + 2 * 784


def test_bad_idx_files_raise_naming_the_file(tmp_path):
  bad_magic = tmp_path / "bad-magic.gz"
  bad_magic.write_bytes(gzip.compress(b"\x08\x00\x08\x01\x00\x00\x00\x01\x07"))
  with pytest.raises(files.DataFileError, match="bad-magic.gz"):
    mnist.read_idx(bad_magic)
  truncated = tmp_path / "truncated"
  truncated.write_bytes(bytes([0, 0, 8, 1, 0, 0, 0, 5, 1, 2]))
  with pytest.raises(files.DataFileError, match="truncated.*5.*2 data bytes"):
    mnist.read_idx(truncated)
  labels = tmp_path / "labels"
  mnist.write_idx(labels, np.zeros(3, np.uint8))
  with pytest.raises(files.DataFileError, match="expected 3"):
    mnist.read_idx(labels, expected_ndim=3)
  broken_gzip = tmp_path / "broken.gz"
  broken_gzip.write_bytes(gzip.compress(b"\x00" * 100)[:20])
  with pytest.raises(files.DataFileError, match="broken.gz"):
    mnist.read_idx(broken_gzip)


def _reference_bilinear(x: np.ndarray, size: int) -> np.ndarray:
  """Half-pixel-centre bilinear upsampling with edge clamping (what PIL does when enlarging)."""
  n = x.shape[-1]
  src = np.clip((np.arange(size) + 0.5) * n / size - 0.5, 0, n - 1)
  i0 = np.floor(src).astype(int)
  frac = src - i0
  w = np.zeros((size, n))
  w[np.arange(size), i0] += 1 - frac
  w[np.arange(size), np.minimum(i0 + 1, n - 1)] += frac
  return np.einsum("ij,njk,lk->nil", w, x.astype(np.float64), w)


def test_loader_on_synthetic_files(tmp_path):
  synthetic.write_mnist_like(tmp_path, "mnist", num_train=64, num_test=16)
  raw = mnist.read_idx(tmp_path / "mnist/train-images-idx3-ubyte.gz")
  labels = mnist.read_idx(tmp_path / "mnist/train-labels-idx1-ubyte.gz")
  ds = mnist.load_mnist(tmp_path, "train", verify=False)
  assert ds.num_examples == 64 and ds.image_shape == (32, 32, 1)
  np.testing.assert_array_equal(ds.labels, labels)
  assert ds.labels.dtype == np.int64
  x = ds.get_images(np.arange(64))
  assert x.dtype == np.float32 and x.shape == (64, 32, 32, 1)
  np.testing.assert_allclose(x[..., 0] * 255, _reference_bilinear(raw, 32), atol=1.0 + 1e-4)
  assert mnist.load_mnist(tmp_path, "test", verify=False).num_examples == 16
  with pytest.raises(files.ChecksumError):  # synthetic files are not the canonical ones
    mnist.load_mnist(tmp_path, "test")
  with pytest.raises(ValueError, match="split"):
    mnist.load_mnist(tmp_path, "valid", verify=False)


@pytest.mark.parametrize("shape,size", [((28, 28), 32), ((28, 28), 64), ((64, 64), 32),
                                        ((5, 7), 9)])
def test_resize_is_pils_bilinear_resize_of_each_image(shape, size):
  images = np.random.default_rng(size).integers(0, 256, (40, *shape), dtype=np.uint8)
  want = np.stack([np.asarray(Image.fromarray(img).resize((size, size), Image.BILINEAR))
                   for img in images])
  got = mnist.resize_bilinear(images, size)
  assert got.dtype == np.uint8 and got.flags.c_contiguous
  np.testing.assert_array_equal(got, want)


@pytest.mark.slow
def test_real_mnist(shared_data_dir):
  train = mnist.load_mnist(shared_data_dir, "train", allow_download=False)
  test = mnist.load_mnist(shared_data_dir, "test", allow_download=False)
  assert (train.num_examples, test.num_examples) == (60000, 10000)
  assert train.image_shape == test.image_shape == (32, 32, 1)
  assert train.labels[:10].tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]
  assert test.labels[0] == 7
  assert np.bincount(train.labels).tolist() == MNIST_TRAIN_COUNTS
  assert np.bincount(test.labels).tolist() == MNIST_TEST_COUNTS
  x = test.get_images(np.arange(1000))
  assert x.dtype == np.float32 and x.shape == (1000, 32, 32, 1)
  assert x.min() == 0.0 and x.max() == 1.0
  assert 0.08 < x.mean() < 0.2  # mostly black background with white strokes
  raw = mnist.read_idx(shared_data_dir / "mnist/t10k-images-idx3-ubyte.gz")[:50]
  np.testing.assert_allclose(x[:50, ..., 0] * 255, _reference_bilinear(raw, 32), atol=1.0 + 1e-4)
  original = mnist.load_mnist(shared_data_dir, "test", image_size=28).get_images([0])
  np.testing.assert_allclose(original[0, ..., 0], raw[0] / 255.0, atol=1e-6)


def test_real_fashion_labels_and_missing_images(shared_data_dir):
  train = mnist.read_idx(shared_data_dir / "fashion_mnist/train-labels-idx1-ubyte.gz", 1)
  test = mnist.read_idx(shared_data_dir / "fashion_mnist/t10k-labels-idx1-ubyte.gz", 1)
  assert np.bincount(train).tolist() == [6000] * 10  # Fashion-MNIST is balanced
  assert np.bincount(test).tolist() == [1000] * 10
  with pytest.raises(files.MissingDataError) as err:
    mnist.load_fashion_mnist(shared_data_dir, "test")
  assert "t10k-images-idx3-ubyte.gz" in str(err.value)
  assert files.FILES["fashion_mnist/t10k-images-idx3-ubyte.gz"].digest in str(err.value)
