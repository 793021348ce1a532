"""dSprites: factor grid and ordering, the procedural renderer against real images, the dataset."""
import time
import warnings

import numpy as np
import pytest

from disentangle import config as config_lib
from disentangle import data as data_lib
from disentangle.data import files
from disentangle.data import ground_truth
from disentangle.data.datasets import dsprites
from disentangle.data.datasets import dsprites_render
from disentangle.data.datasets import synthetic

SAMPLE = "dsprites_sample/dsprites_12_real_samples.npz"


@pytest.fixture(scope="module")
def real_sample(shared_data_dir):
  with np.load(shared_data_dir / SAMPLE) as npz:
    return npz["imgs"], npz["latents_values"]


def test_real_latents_lie_on_the_documented_grid(real_sample):
  """Orientation values are linspace(0, 2 pi, 40) with both ends: 0 and 2 pi both occur."""
  _, values = real_sample
  factors = dsprites.latents_values_to_factors(values)
  _, rebuilt = dsprites.factors_to_latents(factors)
  np.testing.assert_allclose(rebuilt, values, atol=1e-6)
  orientation = values[:, 3]
  assert np.isclose(orientation.max(), 2 * np.pi) and orientation.min() == 0.0
  steps = orientation / (2 * np.pi / 39)
  np.testing.assert_allclose(steps, np.round(steps), atol=1e-6)
  assert not np.allclose(orientation / (2 * np.pi / 40), np.round(orientation / (2 * np.pi / 40)))


def test_renderer_matches_real_images(real_sample):
  """Acceptance: mean IoU >= 0.95 over the 12 real images and >= 0.85 for each."""
  imgs, values = real_sample
  rendered = dsprites_render.render_latents(values).astype(bool)
  real = imgs.astype(bool)
  iou = (rendered & real).sum((1, 2)) / (rendered | real).sum((1, 2))
  print(f"\ndSprites renderer IoU per image: {np.round(iou, 4).tolist()}\n"
        f"mean {iou.mean():.4f}, min {iou.min():.4f}")
  assert iou.mean() >= 0.95
  assert iou.min() >= 0.85


def test_render_speed():
  rng = np.random.default_rng(0)
  factors = np.stack([rng.integers(0, s, 64) for s in dsprites.FACTOR_SIZES], axis=1)
  values = dsprites.factors_to_latents(factors)[1]
  dsprites_render.render_latents(values)  # builds the heart mask once
  times = []
  for _ in range(20):
    start = time.perf_counter()
    dsprites_render.render_latents(values)
    times.append(time.perf_counter() - start)
  print(f"\nrender: {1e3 * np.median(times):.2f} ms per 64 images (median of 20)")
  assert np.median(times) < 0.05  # a few ms normally; generous for a loaded shared machine


def test_render_geometry_closed_forms():
  # Square, scale 1, orientation 0, centred on the pixel boundary 31.5: centres with
  # |c - 31.5| <= 9.6 are columns 22..41, i.e. a 20 x 20 block.
  img = dsprites_render.render(1, 1.0, 0.0, 0.5, 0.5)[0]
  rows, cols = np.nonzero(img)
  assert img.sum() == 400 and (rows.min(), rows.max(), cols.min(), cols.max()) == (22, 41, 22, 41)
  # Ellipse area ~ pi * 12.8 * 7.2 px at scale 1 (lattice count within 3%), long axis horizontal.
  ell = dsprites_render.render(2, 1.0, 0.0, 0.5, 0.5)[0]
  assert abs(ell.sum() / (np.pi * 12.8 * 7.2) - 1) < 0.03
  assert np.ptp(np.nonzero(ell)[1]) > np.ptp(np.nonzero(ell)[0])
  # A quarter turn makes it vertical: the image is the transpose (centre on the diagonal).
  np.testing.assert_array_equal(dsprites_render.render(2, 1.0, np.pi / 2, 0.5, 0.5)[0], ell.T)
  # Every shape is mirror-symmetric about column 31.5 at orientation 0.
  for shape in (1, 2, 3):
    for scale in (0.5, 0.8, 1.0):
      img = dsprites_render.render(shape, scale, 0.0, 0.5, 0.3)[0]
      np.testing.assert_array_equal(img, img[:, ::-1])
  # posX moves columns, posY rows, 32 px per unit; the heart's cusp points down (more pixels
  # in the upper half of its bounding box).
  a, b = dsprites_render.render(3, 1.0, 0.0, [0.25, 0.75], [0.5, 0.5])
  assert np.array_equal(np.roll(a, 16, axis=1), b)
  rows = np.nonzero(a)[0]
  middle = 0.5 * (rows.min() + rows.max())
  assert (rows < middle).sum() > 1.3 * (rows > middle).sum()


def test_index_order_matches_the_official_file():
  rng = np.random.default_rng(0)
  factors = np.stack([rng.integers(0, s, 1000) for s in dsprites.FACTOR_SIZES], axis=1)
  index = dsprites.factors_to_index(factors)
  # The official file enumerates the grid in C order (pos_y fastest) ...
  np.testing.assert_array_equal(index, np.ravel_multi_index(factors.T, dsprites.FACTOR_SIZES))
  # ... which disentanglement_lib writes as a dot product with these bases.
  latents_sizes = np.array([1, 3, 6, 40, 32, 32])
  bases = np.prod(latents_sizes) // np.cumprod(latents_sizes)
  classes, _ = dsprites.factors_to_latents(factors)
  np.testing.assert_array_equal(index, classes @ bases)
  np.testing.assert_array_equal(dsprites.index_to_factors(index), factors)
  assert dsprites.NUM_EXAMPLES == config_lib.DSPRITES_SIZE == 737280  # the config's N
  np.testing.assert_array_equal(dsprites.index_to_factors([0, 1, 32, 737279]),
                                [[0, 0, 0, 0, 0], [0, 0, 0, 0, 1], [0, 0, 0, 1, 0],
                                 [2, 5, 39, 31, 31]])
  with pytest.raises(IndexError):
    dsprites.index_to_factors([737280])


def test_rendered_dataset(shared_data_dir, caplog):
  with pytest.warns(dsprites.ProceduralDataWarning, match="NOT comparable") as said:
    ds = dsprites.DSprites(shared_data_dir, source="auto")  # the official file is not there
  # Said once: the warning, no log line repeating it.
  assert len([w for w in said if "NOT comparable" in str(w.message)]) == 1
  assert not [r for r in caplog.records if "NOT comparable" in r.getMessage()]
  assert ds.source == "render" and isinstance(ds, ground_truth.GroundTruthData)
  assert (ds.num_examples, ds.image_shape, ds.factor_sizes) == (737280, (64, 64, 1),
                                                                (3, 6, 40, 32, 32))
  idx = np.array([0, 5, 100000, 737279])
  x = ds.get_images(idx)
  assert x.dtype == np.float32 and x.shape == (4, 64, 64, 1)
  classes, values = dsprites.factors_to_latents(dsprites.index_to_factors(idx))
  np.testing.assert_array_equal(ds.latents_classes(idx), classes)
  np.testing.assert_array_equal(x[..., 0], dsprites_render.render_latents(values))
  rng = np.random.default_rng(1)
  f = ds.sample_factors(500, rng)
  assert f.shape == (500, 5) and np.all(f.max(0) < ds.factor_sizes) and np.all(f.min(0) == 0)
  obs = ds.sample_observations_from_factors(f[:8], rng)
  np.testing.assert_array_equal(obs, ds.get_images(dsprites.factors_to_index(f[:8])))
  with pytest.raises(files.MissingDataError):
    dsprites.DSprites(shared_data_dir, source="file")


def test_file_backed_dataset_from_official_format(tmp_path):
  path = synthetic.write_dsprites_subset(tmp_path, num_images=300, seed=3)
  with np.load(path) as npz:
    imgs, classes = npz["imgs"], npz["latents_classes"]
  with warnings.catch_warnings():
    warnings.simplefilter("error")  # reading a file must not warn
    ds = dsprites.DSprites(path=path)
  assert ds.source == "file" and ds.num_examples == 300
  idx = np.array([0, 17, 299, 17])
  np.testing.assert_array_equal(ds.get_images(idx)[..., 0], imgs[idx])
  np.testing.assert_array_equal(ds.latents_classes(idx), classes[idx])
  rng = np.random.default_rng(0)
  f = ds.sample_factors(64, rng)
  obs = ds.sample_observations_from_factors(f, rng)
  np.testing.assert_array_equal(obs[..., 0], dsprites.render_factors(f))
  with pytest.raises(KeyError):
    missing = np.setdiff1d(np.arange(1000), dsprites.factors_to_index(classes[:, 1:]))[:1]
    ds.sample_observations_from_factors(dsprites.index_to_factors(missing), rng)


def test_wrong_file_at_the_canonical_path_is_an_error_even_with_auto(tmp_path):
  path = tmp_path / files.DSPRITES_FILE
  path.parent.mkdir(parents=True)
  path.write_bytes(b"not dsprites")
  with pytest.raises(files.ChecksumError, match="7da33b31b13a06f4b04a70402ce90c2e"):
    dsprites.DSprites(tmp_path, source="auto")


def test_read_packed_images_rejects_non_binary(tmp_path):
  path = tmp_path / "x.npz"
  np.savez(path, imgs=np.full((2, 64, 64), 255, np.uint8))
  with pytest.raises(files.DataFileError, match="0/1"):
    dsprites.read_packed_images(path)


def test_canonical_file_must_be_in_official_order(monkeypatch, tmp_path):
  """A file passing the checksum is still rejected if its rows are not the full ordered grid."""
  src = synthetic.write_dsprites_subset(tmp_path / "src", num_images=50)
  dst = tmp_path / files.DSPRITES_FILE
  dst.parent.mkdir(parents=True)
  dst.write_bytes(src.read_bytes())
  spec = files.FILES[files.DSPRITES_FILE]
  monkeypatch.setitem(files.FILES, files.DSPRITES_FILE,
                      files.DataFile(spec.relpath, "md5", files.file_digest(dst, "md5")))
  with pytest.raises(files.DataFileError, match="official factor order"):
    dsprites.DSprites(tmp_path, source="file")


def test_packed_cache_is_written_once_and_memory_mapped(monkeypatch, tmp_path):
  path = synthetic.write_dsprites_subset(tmp_path, num_images=40)
  monkeypatch.setenv(files.CACHE_DIR_ENV, str(tmp_path / "cache"))
  monkeypatch.setattr(dsprites, "NUM_EXAMPLES", 40)  # the cache's expected row count
  calls = []
  real = dsprites.read_packed_images
  monkeypatch.setattr(dsprites, "read_packed_images", lambda p: calls.append(p) or real(p))
  first = dsprites._cached_packed(path)
  second = dsprites._cached_packed(path)
  assert len(calls) == 1 and isinstance(second, np.memmap)
  with np.load(path) as npz:
    np.testing.assert_array_equal(np.unpackbits(second, axis=-1), npz["imgs"])
  np.testing.assert_array_equal(first, second)
  assert [p.name for p in (tmp_path / "cache").iterdir()] == [
      "dsprites_imgs_packbits_md5_7da33b31.npy"]


def test_unreadable_subset_file_raises_naming_it(tmp_path):
  path = tmp_path / "broken.npz"
  path.write_bytes(b"PK\x03\x04 definitely not a zip")
  with pytest.raises(files.DataFileError, match="broken.npz"):
    dsprites.DSprites(path=path)


def _rendered_set(monkeypatch, num: int = 300):
  """The grid's first ``num`` rows as the whole set, and a list that counts the renderer's calls."""
  monkeypatch.setattr(dsprites, "NUM_EXAMPLES", num)
  monkeypatch.setattr(files, "_VERIFIED", {})  # each load hashes the file again
  calls, real = [], dsprites.render_packed
  monkeypatch.setattr(dsprites, "render_packed", lambda idx: calls.append(len(idx)) or real(idx))
  return calls


def _load_rendered(data_dir) -> np.ndarray:
  with pytest.warns(dsprites.ProceduralDataWarning, match="NOT comparable"):
    ds = dsprites.DSprites(data_dir, source="render")
  return ds.packed_images()


def test_rendered_set_is_cached_in_the_data_folder_and_not_rendered_again(monkeypatch, tmp_path):
  calls = _rendered_set(monkeypatch)
  first = _load_rendered(tmp_path)
  expected = np.packbits(dsprites.render_factors(dsprites.index_to_factors(np.arange(300))), -1)
  np.testing.assert_array_equal(first, expected)
  (cache,) = (tmp_path / "dsprites").iterdir()
  digest = files.file_digest(cache, "sha256")  # the name carries the file's own sha256
  assert cache.name == f"dsprites_rendered_v{dsprites_render.VERSION}_sha256-{digest}.npy"
  assert calls == [300]
  # A later program: a fresh object reads the file and never calls the renderer.
  monkeypatch.setattr(dsprites, "render_packed", lambda idx: pytest.fail("rendered again"))
  second = _load_rendered(tmp_path)
  assert isinstance(second, np.memmap)
  np.testing.assert_array_equal(second, expected)


@pytest.mark.parametrize("damage", ["flip", "truncate", "shape"])
def test_damaged_rendered_cache_is_detected_and_rendered_again(monkeypatch, tmp_path, caplog,
                                                               damage):
  calls = _rendered_set(monkeypatch)
  expected = np.array(_load_rendered(tmp_path))  # a copy: the file is damaged below
  (cache,) = (tmp_path / "dsprites").iterdir()
  data = bytearray(cache.read_bytes())
  if damage == "flip":
    data[-5] ^= 0x10
    cache.write_bytes(bytes(data))
  elif damage == "truncate":
    cache.write_bytes(bytes(data[:len(data) // 2]))
  else:  # an intact file (right checksum) of another number of rows
    monkeypatch.setattr(dsprites, "NUM_EXAMPLES", 200)
    expected = expected[:200]
  with caplog.at_level("WARNING", logger=dsprites.__name__):
    again = _load_rendered(tmp_path)
  assert f"removing the rendered dSprites cache {cache}" in caplog.text
  np.testing.assert_array_equal(again, expected)
  assert calls == [300, len(expected)]
  (fresh,) = (tmp_path / "dsprites").iterdir()
  assert files.file_digest(fresh, "sha256") in fresh.name
  assert damage == "shape" or fresh == cache  # same content, same name


def test_rendered_set_without_a_writable_folder_stays_in_memory(monkeypatch, tmp_path, caplog):
  calls = _rendered_set(monkeypatch)
  (tmp_path / "dsprites").write_text("a file where the folder should be")
  with caplog.at_level("WARNING", logger=dsprites.__name__):
    first = _load_rendered(tmp_path)
    second = _load_rendered(tmp_path)
  assert caplog.text.count("cannot cache the rendered dSprites images") == 2
  assert calls == [300, 300] and not isinstance(first, np.memmap)
  np.testing.assert_array_equal(first, second)
  # No data folder at all (``data_dir=None``): rendered each time, nothing written.
  np.testing.assert_array_equal(_load_rendered(None), first)
  assert calls == [300, 300, 300]


def test_rendered_dsprites_warning_names_the_callers_line_not_the_librarys(tmp_path):
  # Through the loader (two frames of the package above the set's constructor): the warning
  # names this file's line that asked for the data.
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    data_lib.load_dataset("dsprites", data_dir=tmp_path, source="render")
  (warning,) = [w for w in caught if issubclass(w.category, dsprites.ProceduralDataWarning)]
  assert warning.filename == __file__
