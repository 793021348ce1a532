"""3D Chairs and CelebA folder loaders, synthetic stand-ins and ``load_dataset``."""
import numpy as np
from PIL import Image
import pytest

from disentangle import data
from disentangle.data import files
from disentangle.data.datasets import celeba
from disentangle.data.datasets import chairs
from disentangle.data.datasets import mnist
from disentangle.data.datasets import synthetic


def test_chairs_folder_any_nesting_sorted_grayscale(tmp_path):
  synthetic.write_chairs(tmp_path, num_models=3, num_views=4)
  flat = tmp_path / "chairs" / "zzz_flat.jpg"  # a file at the top level is found as well
  Image.new("RGB", (64, 64), (10, 200, 30)).save(flat, quality=100)
  ds = chairs.load_chairs(tmp_path)
  assert ds.num_examples == 13 and ds.image_shape == (64, 64, 1) and ds.labels is None
  rel = [p.relative_to(tmp_path / "chairs").as_posix() for p in ds.paths]
  assert rel == sorted(rel) and rel[-1] == "zzz_flat.jpg"
  x = ds.get_images(np.arange(13))
  assert x.dtype == np.float32 and x.shape == (13, 64, 64, 1)
  assert 0.0 <= x.min() and x.max() <= 1.0
  assert np.all(x[:12, :3, :3] == 1.0)  # white background in the corners
  # A 64x64 image is used as is; PIL's 'L' conversion is 0.299 R + 0.587 G + 0.114 B.
  assert abs(x[12].mean() * 255 - (0.299 * 10 + 0.587 * 200 + 0.114 * 30)) < 1.5
  np.testing.assert_array_equal(ds.preload().get_images([3, 12]), x[[3, 12]])


def test_chairs_crop_keeps_the_central_two_thirds(tmp_path):
  folder = tmp_path / "chairs" / "a" / "renders"
  folder.mkdir(parents=True)
  img = np.full((600, 600, 4), 255, np.uint8)
  img[150:450, 150:450, :3] = 0  # a black square of half the side, in the centre
  img[100:140, :, :3] = 0  # a transparent band inside the crop: black RGB under alpha 0 ...
  img[100:140, :, 3] = 0  # ... which must come out white (composited on white)
  Image.fromarray(img, "RGBA").save(folder / "image.png")
  x = chairs.load_chairs(tmp_path).get_images([0])[0, ..., 0]
  # 300 of the 400 cropped pixels -> 48 of 64: the square covers (48/64)^2 of the image.
  assert abs((x < 0.5).mean() - (300 / 400) ** 2) < 0.02
  assert x[0, 32] == 1.0 and x[32, 32] == 0.0


def test_chairs_missing_folder_names_it_and_the_source(tmp_path):
  with pytest.raises(files.MissingDataError) as err:
    chairs.load_chairs(tmp_path)
  assert str(tmp_path / "chairs") in str(err.value)
  assert "rendered_chairs.tar" in str(err.value)
  (tmp_path / "chairs").mkdir()
  with pytest.raises(files.MissingDataError, match="no png/jpg"):
    chairs.load_chairs(tmp_path)


def test_celeba_attributes_images_and_splits(tmp_path):
  root = synthetic.write_celeba(tmp_path, num_images=20, seed=1)
  lines = (root / "list_attr_celeba.txt").read_text().splitlines()
  expected = np.array([[int(v) for v in line.split()[1:]] for line in lines[2:]])
  ds = celeba.load_celeba(tmp_path)
  assert ds.num_examples == 20 and ds.image_shape == (64, 64, 3)
  assert ds.attribute_names == tuple(synthetic.CELEBA_ATTRIBUTES) and len(ds.attribute_names) == 40
  np.testing.assert_array_equal(ds.attributes, (expected + 1) // 2)
  assert ds.attributes.dtype == np.int64 and set(np.unique(ds.attributes)) <= {0, 1}
  x = ds.get_images([0, 19])
  assert x.dtype == np.float32 and x.shape == (2, 64, 64, 3) and 0 <= x.min() and x.max() <= 1
  sizes = [celeba.load_celeba(tmp_path, s).num_examples for s in ("train", "valid", "test")]
  assert sizes == [14, 3, 3]
  test = celeba.load_celeba(tmp_path, "test")
  np.testing.assert_array_equal(test.attributes, ds.attributes[17:])


def test_celeba_center_crop(tmp_path):
  img_dir = tmp_path / "celeba" / "img_align_celeba"
  img_dir.mkdir(parents=True)
  img = np.zeros((218, 178, 3), np.uint8)
  img[...] = (255, 0, 0)  # red outside the central 148 x 148 square
  top, left = (218 - 148) // 2, (178 - 148) // 2
  img[top:top + 148, left:left + 148] = (0, 0, 255)
  Image.fromarray(img).save(img_dir / "000001.png")
  (tmp_path / "celeba" / "list_attr_celeba.txt").write_text("1\nSmiling Young\n000001.png 1 -1\n")
  ds = celeba.load_celeba(tmp_path)
  np.testing.assert_array_equal(ds.attributes, [[1, 0]])
  x = ds.get_images([0])[0]
  np.testing.assert_allclose(x[..., 2], 1.0, atol=1e-6)
  np.testing.assert_allclose(x[..., 0], 0.0, atol=1e-6)


def test_celeba_errors(tmp_path):
  with pytest.raises(files.MissingDataError) as err:
    celeba.load_celeba(tmp_path)
  assert str(tmp_path / "celeba" / "img_align_celeba") in str(err.value)
  assert "list_attr_celeba.txt" in str(err.value)
  bad = tmp_path / "attr.txt"
  bad.write_text("3\nA B\nx.jpg 1 -1\ny.jpg 1 1\n")
  with pytest.raises(files.DataFileError, match="3 images but 2 rows"):
    celeba.read_attributes(bad)
  bad.write_text("1\nA B\nx.jpg 1 0\n")
  with pytest.raises(files.DataFileError, match="-1 or 1"):
    celeba.read_attributes(bad)


def test_ensure_synthetic_is_idempotent_and_learnable(tmp_path):
  root = synthetic.ensure_synthetic("mnist", tmp_path)
  marker = tmp_path / "mnist" / "SYNTHETIC.txt"
  stamp = marker.stat().st_mtime_ns
  assert synthetic.ensure_synthetic("mnist", tmp_path) == root
  assert marker.stat().st_mtime_ns == stamp  # not rewritten
  train = mnist.load_mnist(root, "train", verify=False)
  test = mnist.load_mnist(root, "test", verify=False)
  # Class structure: a nearest-class-mean classifier trained on 'train' does well on 'test'.
  xtr = train.get_images(np.arange(train.num_examples)).reshape(train.num_examples, -1)
  xte = test.get_images(np.arange(test.num_examples)).reshape(test.num_examples, -1)
  means = np.stack([xtr[train.labels == k].mean(0) for k in range(10)])
  pred = np.argmin(((xte[:, None] - means[None]) ** 2).sum(-1), axis=1)
  assert (pred == test.labels).mean() > 0.6
  with pytest.raises(ValueError, match="known"):
    synthetic.ensure_synthetic("cifar", tmp_path)


def test_load_dataset(monkeypatch, shared_data_dir, tmp_path):
  monkeypatch.delenv(files.DATA_DIR_ENV, raising=False)
  monkeypatch.delenv(files.SYNTHETIC_DIR_ENV, raising=False)
  with pytest.raises(ValueError, match="dsprites, mnist, fashion_mnist, chairs, celeba"):
    data.load_dataset("cifar10", data_dir=shared_data_dir)
  test = data.load_dataset("mnist", data_dir=shared_data_dir, split="test")
  assert (test.num_examples, test.image_shape, test.labels[0]) == (10000, (32, 32, 1), 7)
  with pytest.raises(files.MissingDataError):
    data.load_dataset("fashion_mnist", data_dir=shared_data_dir)
  fashion = data.load_dataset("fashion_mnist", data_dir=shared_data_dir,
                              synthetic_if_missing=True, synthetic_dir=tmp_path)
  assert fashion.num_examples == 2000 and (tmp_path / "fashion_mnist" / "SYNTHETIC.txt").exists()
  assert not (shared_data_dir / "synthetic").exists()
  for name, shape in (("chairs", (64, 64, 1)), ("celeba", (64, 64, 3))):
    ds = data.load_dataset(name, data_dir=tmp_path / "empty", synthetic_if_missing=True,
                           synthetic_dir=tmp_path)
    assert ds.image_shape == shape and ds.get_images([0, 1]).shape == (2,) + shape
  with pytest.warns(data.ProceduralDataWarning):
    rendered = data.load_dataset("dsprites", data_dir=tmp_path / "empty")
  assert rendered.num_examples == 737280 and rendered.labels is None
  subset = data.load_dataset("dsprites", data_dir=tmp_path / "empty", source="file",
                             synthetic_if_missing=True, synthetic_dir=tmp_path)
  assert subset.source == "file" and subset.num_examples == 2048
  with pytest.raises(ValueError, match="no 'test' split"):
    data.load_dataset("chairs", data_dir=tmp_path, split="test")
  with pytest.raises(ValueError, match="only exists for dsprites"):
    data.load_dataset("mnist", data_dir=shared_data_dir, source="render")
  # CelebA: 'train' is every image (as in the papers); the official partition is explicit.
  sizes = [data.load_dataset("celeba", data_dir=tmp_path / "empty", split=s,
                             synthetic_if_missing=True, synthetic_dir=tmp_path).num_examples
           for s in ("train", "official_train", "official_test")]
  part = [int(line.split()[1]) for line in
          (tmp_path / "celeba" / "list_eval_partition.txt").read_text().splitlines()]
  assert sizes == [len(part), part.count(0), part.count(2)]
