"""disentanglement_lib's sets: the dSprites variants, Cars3D and MPI3D, on generated stand-ins."""
import pathlib
import warnings

import numpy as np
from PIL import Image
import pytest
import scipy.io

from disentangle import config as config_lib
from disentangle import data
from disentangle.data import files
from disentangle.data.datasets import cars3d
from disentangle.data.datasets import dsprites
from disentangle.data.datasets import dsprites_draws
from disentangle.data.datasets import dsprites_variants as dv
from disentangle.data.datasets import mpi3d
from disentangle.data.datasets import synthetic
from disentangle.data.labels.batch_spec import PairSpec
from disentangle.train import input_pipeline


@pytest.fixture(scope="module")
def base(tmp_path_factory):
  """dSprites over a rendered 64-row subset (official keys and order of factors)."""
  path = synthetic.write_dsprites_subset(tmp_path_factory.mktemp("dsprites"), num_images=64)
  return data.DSprites(path=path)


@pytest.fixture(scope="module")
def rendered():
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", data.ProceduralDataWarning)
    return data.DSprites(source="render")


def _gradient_painting(h=70, w=80):
  """Channel 0 the row, channel 1 the column, channel 2 zero: each patch has one place."""
  rows, cols = np.mgrid[0:h, 0:w]
  return np.stack([rows / h, cols / w, np.zeros((h, w))], axis=-1)


def _variants(base):
  return [dv.ColorDSprites(base), dv.NoisyDSprites(base),
          dv.ScreamDSprites(base, _gradient_painting())]


def _sprite_mask(variant, images):
  """Where colour and noisy dSprites draw the sprite, from their images alone."""
  if isinstance(variant, dv.ColorDSprites):
    return images.max(-1) > 0  # colours are at least 0.5, the background 0
  return (images == 1).all(-1)  # noise lies in [0, 1), the sprite is white


def test_variant_shapes_dtypes_ranges(base):
  rows = np.arange(base.num_examples)
  for v in _variants(base):
    x = v.get_images(rows)
    assert v.image_shape == (64, 64, 3) and x.shape == (64, 64, 64, 3) and x.dtype == np.float32
    assert 0 <= x.min() and x.max() <= 1
    assert v.factor_sizes == (3, 6, 40, 32, 32) and v.num_examples == base.num_examples
    assert v.target_sizes == dict(zip(dsprites.FACTOR_NAMES, dsprites.FACTOR_SIZES))
    np.testing.assert_array_equal(v.targets_of(rows[:5], ["pos_x", "shape"]),
                                  base.factors_of(rows[:5])[:, [3, 0]])
    assert isinstance(v, data.GroundTruthData) and v.labels is None
    assert v.compact_images() is None  # coloured per row: the host pipeline paints them


def test_color_sprite_is_one_colour_background_zero(base):
  v = dv.ColorDSprites(base)
  rows = np.arange(16)
  x, sprite = v.get_images(rows), base.get_images(rows)[..., 0] == 1
  for k in range(len(rows)):
    colours = x[k][sprite[k]]
    assert len(colours) and np.all(colours == colours[0])  # one RGB colour per image
    assert np.all((0.5 <= colours[0]) & (colours[0] < 1))
    assert np.all(x[k][~sprite[k]] == 0)
  assert len({tuple(x[k][sprite[k]][0]) for k in range(len(rows))}) == len(rows)


def test_noisy_background_is_uniform_noise_sprite_white(base):
  v = dv.NoisyDSprites(base)
  x, sprite = v.get_images(np.arange(8)), base.get_images(np.arange(8))[..., 0] == 1
  assert np.all(x[sprite] == 1)
  background = x[~sprite]
  assert 0 <= background.min() and background.max() < 1 and background.std() > 0.2
  assert abs(background.mean() - 0.5) < 0.01  # 8 * ~3700 * 3 uniform draws


def _scream_explained(painting, image, sprite):
  """Whether ``image`` is a patch of ``painting`` averaged with one colour, inverted on
  ``sprite``: searches every patch position."""
  h, w = painting.shape[:2]
  flipped = np.where(sprite[..., None], 1 - image, image)  # undo the inversion
  for top in range(h - 64):
    for left in range(w - 64):
      colour = 2 * flipped - painting[top:top + 64, left:left + 64]
      if np.allclose(colour, colour[0, 0], atol=1e-5):
        return 0 <= colour[0, 0].min() and colour[0, 0].max() < 1
  return False


def test_scream_is_a_recoloured_patch_inverted_on_the_sprite(base):
  painting = _gradient_painting()
  v = dv.ScreamDSprites(base, painting)
  rows = np.arange(6)
  x, sprite = v.get_images(rows), base.get_images(rows)[..., 0] == 1
  for k in range(len(rows)):
    assert _scream_explained(painting, x[k], sprite[k])
  f = base.factors_of(rows)
  obs = v.sample_observations_from_factors(f, np.random.default_rng(3))
  for k in range(len(rows)):
    assert _scream_explained(painting, obs[k], sprite[k])


def test_rows_are_deterministic_per_row_and_seed(base):
  for v in _variants(base):
    a = v.get_images([3, 7, 9])
    b = v.get_images([9, 1, 3])
    np.testing.assert_array_equal(a[0], b[2])  # row 3, in two batches
    np.testing.assert_array_equal(a[2], b[0])
    other = type(v)(base, *([v.painting] if hasattr(v, "painting") else []), seed=1)
    assert not np.array_equal(other.get_images([3]), a[:1])
    painted = v._paint(base.get_images([7]), dv.row_rng(0, 7))  # the documented stream
    np.testing.assert_array_equal(painted[0], a[1])


def test_observations_show_the_sprite_of_the_factors(base):
  f = base.sample_factors(12, np.random.default_rng(0))
  sprite = base.sample_observations_from_factors(f, np.random.default_rng(0))[..., 0] == 1
  for v in _variants(base)[:2]:
    obs = v.sample_observations_from_factors(f, np.random.default_rng(5))
    assert obs.shape == (12, 64, 64, 3) and obs.dtype == np.float32
    np.testing.assert_array_equal(_sprite_mask(v, obs), sprite)
    again = v.sample_observations_from_factors(f, np.random.default_rng(5))
    np.testing.assert_array_equal(obs, again)  # all randomness from rng
    assert not np.array_equal(obs, v.sample_observations_from_factors(
        f, np.random.default_rng(6)))


def test_variants_over_the_renderer(rendered):
  f = np.array([[0, 5, 0, 16, 16], [2, 0, 10, 3, 30]])
  sprite = dsprites.render_factors(f) == 1
  v = dv.ColorDSprites(rendered)
  np.testing.assert_array_equal(
      _sprite_mask(v, v.sample_observations_from_factors(f, np.random.default_rng(0))), sprite)
  rows = dsprites.factors_to_index(f)
  np.testing.assert_array_equal(_sprite_mask(v, v.get_images(rows)), sprite)


def test_noshape_factors_and_observations(base, rendered):
  for b in (base, rendered):
    v = dv.DSpritesNoShape(b)
    assert v.factor_sizes == (6, 40, 32, 32) and v.image_shape == (64, 64, 1)
    assert v.factor_names == ("scale", "orientation", "pos_x", "pos_y")
    f = v.sample_factors(6, np.random.default_rng(1))
    assert f.shape == (6, 4) and np.all(f < np.array(v.factor_sizes))
    obs = v.sample_observations_from_factors(f, np.random.default_rng(2))
    assert obs.shape == (6, 64, 64, 1)
    shapes = []
    for k in range(6):  # the image of dSprites with these factors and one of the shapes
      candidates = [dsprites.render_factors(np.array([[s, *f[k]]]))[0] for s in range(3)]
      match = [s for s in range(3) if np.array_equal(obs[k, ..., 0], candidates[s])]
      assert match
      shapes.append(match[0])
    if b is rendered:  # the shape is drawn at random
      many = v.sample_observations_from_factors(np.repeat(f[:1], 30, 0),
                                                np.random.default_rng(0))
      assert len({m.tobytes() for m in many}) > 1
  np.testing.assert_array_equal(dv.DSpritesNoShape(base).get_images([1, 2]),
                                base.get_images([1, 2]))
  np.testing.assert_array_equal(dv.DSpritesNoShape(base).targets_of([4], ["scale"]),
                                base.targets_of([4], ["scale"]))


# --- per-sample draws ------------------------------------------------------------------------------
_M32 = 0xFFFFFFFF


def _threefry_reference(key, counter):
  """Threefry-2x32-20 written out from Salmon et al. (SC 2011) in uint64 arithmetic masked to 32
  bits: uint64 arrays key (2, ...), counter (2, ...) -> (2, ...)."""
  k = [np.asarray(key[0], np.uint64), np.asarray(key[1], np.uint64)]
  k.append(k[0] ^ k[1] ^ np.uint64(0x1BD11BDA))
  x = [(np.asarray(counter[0], np.uint64) + k[0]) & _M32,
       (np.asarray(counter[1], np.uint64) + k[1]) & _M32]
  rotations = [13, 15, 26, 6, 17, 29, 16, 24]
  for rnd in range(20):
    r = np.uint64(rotations[rnd % 8])
    x[0] = (x[0] + x[1]) & _M32
    x[1] = (((x[1] << r) | (x[1] >> (np.uint64(32) - r))) & _M32) ^ x[0]
    if rnd % 4 == 3:
      s = rnd // 4 + 1
      x[0] = (x[0] + k[s % 3]) & _M32
      x[1] = (x[1] + k[(s + 1) % 3] + np.uint64(s)) & _M32
  return np.stack(x)


def _words_of_key(row_key, count):
  """The first ``count`` words of a row's key: the counters (j, 0) under it."""
  j = np.arange((count + 1) // 2, dtype=np.uint64)
  out = _threefry_reference((np.full_like(j, row_key[0]), np.full_like(j, row_key[1])),
                            (j, np.zeros_like(j)))
  return out.T.reshape(-1)[:count]  # counter j gives words 2j, 2j + 1


def _reference_words(seed, step, stream, position, count):
  """The row's ``count`` words: its key from (seed, step) and (stream, position)."""
  return _words_of_key(_threefry_reference((seed % 2**32, step), (stream, position)), count)


def _reference_image(name, sprite, w, painting=None):
  """The image of the binary ``sprite`` [64, 64, 1] drawn with the words ``w`` (uint64), in
  float64 rounded to float32 once per float32 operation of the documented draw."""
  if name == "color_dsprites":
    colour = 0.5 + (w[:3] >> np.uint64(9)).astype(np.float64) / 2**24
    return (sprite * colour).astype(np.float32)
  if name == "noisy_dsprites":
    noise = ((w >> np.uint64(8)).astype(np.float64) / 2**24).reshape(64, 64, 3)
    return np.minimum(sprite + noise, 1.0).astype(np.float32)
  h, wd = painting.shape[:2]
  top, left = int(w[0]) % (h - 64), int(w[1]) % (wd - 64)
  colour = (w[2:5] >> np.uint64(8)).astype(np.float64) / 2**24
  patch = painting.astype(np.float32).astype(np.float64)[top:top + 64, left:left + 64]
  background = ((patch + colour) / 2).astype(np.float32)
  flipped = (1.0 - background.astype(np.float64)).astype(np.float32)
  return np.where(sprite == 1, flipped, background)


def _drawn(base, painting=None, seed=0):
  return [dv.ColorDSprites(base, seed, "per_sample"), dv.NoisyDSprites(base, seed, "per_sample"),
          dv.ScreamDSprites(base, _gradient_painting() if painting is None else painting, seed,
                            "per_sample")]


def test_threefry_is_salmon_et_als_and_jaxs():
  """The known answers of Random123's kat_vectors (threefry2x32_20), the reference above and
  ``jax.random``'s Threefry on random words."""
  from jax.extend import random as jax_random  # pylint: disable=g-import-not-at-top
  known = [((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
           ((_M32, _M32), (_M32, _M32), (0x1CB996FC, 0xBB002BE7)),
           ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0))]
  for key, counter, want in known:
    got = dsprites_draws.threefry2x32(np, *np.uint32(key), *np.uint32(counter))
    assert [int(v) for v in got] == list(want)
    assert [int(v) for v in _threefry_reference(key, counter)] == list(want)
  rng = np.random.default_rng(0)
  key, counter = rng.integers(0, 2**32, 2, np.uint32), rng.integers(0, 2**32, (2, 50), np.uint32)
  got = np.stack(dsprites_draws.threefry2x32(np, key[0], key[1], counter[0], counter[1]))
  np.testing.assert_array_equal(got, np.asarray(jax_random.threefry_2x32(key, counter)))


def test_per_sample_batches_equal_the_numpy_reference_of_the_draw(base):
  """Process 1 of 2, step 3, seed 5: each row drawn from the stream of (seed, step, its place in
  the global batch), painted as disentanglement_lib paints (a colour, noise, a patch)."""
  rng = np.random.default_rng(1)
  painting = rng.random((80, 100, 3))
  for v in _drawn(base, painting):
    source = input_pipeline.BatchSource(v, global_batch=8, seed=5, process_index=1,
                                        process_count=2)
    rows, image = source.local_indices(3), source.local_batch(3)["image"]
    sprites = base.get_images(rows)
    for k, row in enumerate(rows):
      w = _reference_words(5, 3, 0, 4 + k, dsprites_draws.NUM_WORDS[v.name])
      want = _reference_image(v.name, sprites[k], w, painting)
      np.testing.assert_array_equal(image[k], want, err_msg=f"{v.name} row {row}")
    whole = input_pipeline.BatchSource(v, global_batch=8, seed=5).local_batch(3)["image"]
    np.testing.assert_array_equal(whole[4:], image)  # the same rows however processes split


def test_per_sample_streams_of_a_batch_with_side_information(base, rendered):
  """The labelled stream (1) and the pairs' second observations (2) draw from their own keys;
  pairs need every factor vector, hence the renderer."""
  spec = data.BatchSpec(targets=("shape",), labelled=data.LabelledSpec("random", 32, 4, seed=1))
  source = input_pipeline.make_source(dv.ColorDSprites(base, 0, "per_sample"), spec,
                                      global_batch=8, seed=6)
  batch, rows = source.local_batch(2), source.local_rows(2)
  for k, row in enumerate(rows["labelled_index"]):
    want = _reference_image("color_dsprites", base.get_images([row])[0],
                            _reference_words(6, 2, 1, k, 3))
    np.testing.assert_array_equal(batch["labelled_image"][k], want)
  source = input_pipeline.make_source(dv.NoisyDSprites(rendered, 0, "per_sample"),
                                      data.BatchSpec(pairs=PairSpec(k=1)), global_batch=4, seed=6)
  batch, rows = source.local_batch(1), source.local_rows(1)
  for k, row in enumerate(rows["pair_index"]):
    want = _reference_image("noisy_dsprites", rendered.get_images([row])[0],
                            _reference_words(6, 1, 2, k, 64 * 64 * 3))
    np.testing.assert_array_equal(batch["image_pair"][k], want)


def test_per_sample_draws_anew_for_every_image_and_keeps_runs_reproducible(base):
  painting = _gradient_painting()
  for v in _drawn(base, painting):
    source = input_pipeline.BatchSource(v, global_batch=8, seed=2)
    a, b = source.local_batch(0)["image"], source.local_batch(0)["image"]
    np.testing.assert_array_equal(a, b)  # a function of (seed, step)
    other = input_pipeline.BatchSource(v, global_batch=8, seed=3).local_batch(0)["image"]
    assert not np.array_equal(a, other)
    row = source.local_indices(0)[0]  # the same dSprites row in a later epoch
    later = next(s for s in range(1, 40) if source.local_indices(s)[0] == row or
                 row in source.local_indices(s))
    k = list(source.local_indices(later)).index(row)
    again = source.local_batch(later)["image"][k]
    sprite = base.get_images([row])[0]
    if v.name == "color_dsprites":
      assert not np.array_equal(a[0], again)  # another colour
      np.testing.assert_array_equal(again.max(-1) > 0, sprite[..., 0] == 1)
    elif v.name == "noisy_dsprites":
      assert not np.array_equal(a[0], again)
      np.testing.assert_array_equal((again == 1).all(-1), sprite[..., 0] == 1)
      assert abs(again[sprite[..., 0] == 0].mean() - 0.5) < 0.02
    else:
      assert _scream_explained(painting, again, sprite[..., 0] == 1)
      assert not np.array_equal(a[0], again)
  colours = dv.ColorDSprites(base, 0, "per_sample").drawn_images(
      np.zeros(4000, int), dsprites_draws.batch_keys(0, 0, 0, np.arange(4000)))
  sprite = base.get_images([0])[0, ..., 0] == 1
  c = colours[:, sprite][:, 0]  # [4000, 3]: one colour per image
  assert 0.5 <= c.min() and c.max() < 1 and np.all(np.abs(c.mean(0) - 0.75) < 0.01)
  assert np.all(np.abs(np.corrcoef(c.T) - np.eye(3)) < 0.05)  # independent channels


def test_per_sample_evaluation_draws_from_the_evaluations_stream(base):
  """The metrics' observations: each drawn anew from ``rng`` (after the sprites); the evaluation
  points (``get_images``): the ROWS stream; the set is not encoded whole."""
  from disentangle.evaluation import encodings  # pylint: disable=g-import-not-at-top
  painting = _gradient_painting()
  f = np.repeat(base.factors_of([5, 9]), 2, axis=0)  # each factor row twice
  for v in _drawn(base, painting, seed=4):
    obs = v.sample_observations_from_factors(f, np.random.default_rng(11))
    rng = np.random.default_rng(11)
    sprites = base.sample_observations_from_factors(f, rng)
    keys = rng.integers(0, 2**32, size=(len(f), 2), dtype=np.uint32)
    for k in range(len(f)):
      words = _words_of_key(keys[k].astype(np.uint64), dsprites_draws.NUM_WORDS[v.name])
      np.testing.assert_array_equal(obs[k], _reference_image(v.name, sprites[k], words, painting))
    assert not np.array_equal(obs[0], obs[1])  # the same factors, another draw
    images = v.get_images([7, 3])
    for k, row in enumerate((7, 3)):
      w = _reference_words(4, 0, 3, row, dsprites_draws.NUM_WORDS[v.name])  # stream ROWS = 3
      np.testing.assert_array_equal(images[k], _reference_image(v.name, base.get_images([row])[0],
                                                                w, painting))
    assert encodings.enumerate_rows(v) == (None, False)
    rows, are_indices = encodings.enumerate_rows(type(v)(
        base, *([painting] if v.name == "scream_dsprites" else [])))  # per image: encoded once
    assert are_indices and len(rows) == base.num_examples


def test_variant_draw_is_a_checked_config_field_and_reaches_the_sets(tmp_path):
  ok, what = config_lib.RULES["dataset.variant_draw"]
  assert ok("per_sample") and ok("per_image") and not ok("fresh") and "per_sample" in what
  assert config_lib.base_config().dataset.variant_draw == "per_image"
  c = config_lib.base_config()
  c.dataset.variant_draw = "per_sample"
  with pytest.raises(config_lib.ConfigError) as e:  # dSprites draws nothing
    data.check_variant_draw(c.dataset)
  assert "\n" not in str(e.value) and "'dataset.variant_draw'" in str(e.value)
  c.dataset.name = "noisy_dsprites"
  data.check_variant_draw(c.dataset)
  c.dataset.source = "tfds"
  with pytest.raises(config_lib.ConfigError, match="dataset.variant_draw"):
    data.check_variant_draw(c.dataset)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", data.ProceduralDataWarning)
    for draw in dv.DRAWS:
      ds = data.load_dataset("color_dsprites", data_dir=tmp_path, source="render",
                             variant_draw=draw)
      assert ds.draw == draw and ds.draws_per_sample == (draw == "per_sample")
    assert not hasattr(data.load_dataset("dsprites_noshape", data_dir=tmp_path, source="render",
                                         variant_draw="per_sample"), "draw")
  with pytest.raises(ValueError, match="variant_draw"):
    data.load_dataset("color_dsprites", data_dir=tmp_path, variant_draw="fresh")


# --- scream painting -----------------------------------------------------------------------------
def test_scream_file_thumbnailed_and_missing_one_liner(tmp_path):
  with pytest.raises(files.MissingDataError) as e:
    dv.read_scream(tmp_path)
  msg = str(e.value)
  assert "\n" not in msg and "scream/scream.jpg" in msg and "The_Scream.jpg" in msg
  assert list(tmp_path.iterdir()) == []
  (tmp_path / "scream").mkdir()
  rng = np.random.default_rng(0)
  Image.fromarray(rng.integers(0, 256, (548, 440, 3), np.uint8)).save(
      tmp_path / dv.SCREAM_FILE)
  painting = dv.read_scream(tmp_path)
  assert painting.shape == (274, 220, 3) and 0 <= painting.min() and painting.max() <= 1
  Image.fromarray(rng.integers(0, 256, (60, 200, 3), np.uint8)).save(tmp_path / dv.SCREAM_FILE)
  with pytest.raises(files.DataFileError, match="64"):
    dv.read_scream(tmp_path)


def test_load_dataset_scream_reads_the_painting_first(tmp_path, base):
  with pytest.raises(files.MissingDataError) as e:
    data.load_dataset("scream_dsprites", data_dir=tmp_path, source="file")
  assert "scream.jpg" in str(e.value) and "\n" not in str(e.value)
  assert list(tmp_path.iterdir()) == []
  (tmp_path / "scream").mkdir()
  Image.fromarray(np.full((100, 90, 3), 40, np.uint8)).save(tmp_path / dv.SCREAM_FILE)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", data.ProceduralDataWarning)
    ds = data.load_dataset("scream_dsprites", data_dir=tmp_path, source="render")
  assert isinstance(ds, dv.ScreamDSprites) and ds.source == "render"
  assert ds.get_images([0, 737279]).shape == (2, 64, 64, 3)


# --- Cars3D --------------------------------------------------------------------------------------
def _write_cars(folder: pathlib.Path, num_models: int, size: int = 16, im=None):
  """``car_XXX_mesh.mat`` files whose image of (elevation, azimuth, model) is the constant
  ``elevation * 64 + azimuth * 2 + model``."""
  folder.mkdir(parents=True, exist_ok=True)
  for k in range(num_models):
    value = (np.arange(4)[None, :] * 64 + np.arange(24)[:, None] * 2 + k).astype(np.uint8)
    mesh = np.broadcast_to(value, (size, size, 3, 24, 4)).copy() if im is None else im
    scipy.io.savemat(folder / f"car_{k + 1:03d}_mesh.mat", {"im": mesh})


def test_cars3d_grid_and_images(tmp_path):
  _write_cars(tmp_path / "cars", 3)
  ds = cars3d.load_cars3d(tmp_path, num_models=3)
  assert ds.factor_sizes == (4, 24, 3) and ds.num_examples == 288
  assert ds.image_shape == (64, 64, 3) and ds.factor_names == cars3d.FACTOR_NAMES
  x = ds.get_images(np.arange(288))
  assert x.dtype == np.float32 and 0 <= x.min() and x.max() <= 1
  el, az, model = np.unravel_index(np.arange(288), (4, 24, 3))  # object type fastest
  np.testing.assert_array_equal(ds.factors[:, 0], el)
  np.testing.assert_allclose(x[:, 10, 20, 1], (el * 64 + az * 2 + model) / 255, atol=1e-6)
  f = np.array([[3, 23, 2], [0, 5, 1]])
  obs = ds.sample_observations_from_factors(f, np.random.default_rng(0))
  np.testing.assert_allclose(obs[:, 0, 0, 0], (f[:, 0] * 64 + f[:, 1] * 2 + f[:, 2]) / 255,
                             atol=1e-6)


def test_cars3d_resizes_like_dlib_thumbnail(tmp_path):
  im = np.random.default_rng(0).integers(0, 256, (128, 128, 3, 24, 4), np.uint8)
  _write_cars(tmp_path / "cars", 1, im=im)
  ds = cars3d.load_cars3d(tmp_path, num_models=1)
  for el, az in ((0, 0), (3, 17)):
    pic = Image.fromarray(np.ascontiguousarray(im[:, :, :, az, el]))
    pic.thumbnail((64, 64), Image.LANCZOS)
    np.testing.assert_array_equal(ds.get_images([el * 24 + az])[0],
                                  np.asarray(pic, np.float32) / 255)


def test_cars3d_missing_and_malformed(tmp_path):
  with pytest.raises(files.MissingDataError) as e:
    data.load_dataset("cars3d", data_dir=tmp_path, synthetic_if_missing=True)
  assert "\n" not in str(e.value) and "cars" in str(e.value) and cars3d.URL in str(e.value)
  assert list(tmp_path.iterdir()) == []
  _write_cars(tmp_path / "cars", 2)
  with pytest.raises(files.DataFileError, match="2 .mat files, expected 183"):
    data.load_dataset("cars3d", data_dir=tmp_path)
  scipy.io.savemat(tmp_path / "cars" / "car_003_mesh.mat",
                   {"im": np.zeros((8, 8, 3, 24, 2), np.uint8)})
  with pytest.raises(files.DataFileError, match=r"uint8 \[H, W, 3, 24, 4\]"):
    cars3d.load_cars3d(tmp_path, num_models=3)


# --- MPI3D ---------------------------------------------------------------------------------------
SMALL = (2, 2, 1, 1, 1, 2, 3)


def _write_mpi3d(path: pathlib.Path, sizes=SMALL, compressed=False):
  n = int(np.prod(sizes))
  images = np.broadcast_to(np.arange(n, dtype=np.uint8)[:, None, None, None] * 10,
                           (n, 64, 64, 3)).copy()
  path.parent.mkdir(parents=True, exist_ok=True)
  (np.savez_compressed if compressed else np.savez)(path, images=images)
  return path


@pytest.mark.parametrize("compressed", [False, True])
def test_mpi3d_grid_and_images(tmp_path, compressed):
  path = _write_mpi3d(tmp_path / "m.npz", compressed=compressed)
  ds = mpi3d.load_mpi3d("mpi3d_toy", path=path, factor_sizes=SMALL)
  assert isinstance(mpi3d._npz_array(path, "images"), np.memmap) != compressed  # mapped if stored
  if not compressed:
    assert not ds._observations.flags.owndata  # the mapping, not a copy
  assert ds.factor_sizes == SMALL and ds.num_examples == 24 and ds.image_shape == (64, 64, 3)
  assert ds.factor_names[0] == "object_color" and ds.factor_names[-1] == "second_dof"
  x = ds.get_images(np.arange(24))
  assert x.dtype == np.float32 and x.max() <= 1
  np.testing.assert_allclose(x[:, 5, 5, 2], np.arange(24) * 10 / 255, atol=1e-6)
  f = np.array([[1, 0, 0, 0, 0, 1, 2], [0, 1, 0, 0, 0, 0, 1]])
  obs = ds.sample_observations_from_factors(f, np.random.default_rng(0))
  index = np.ravel_multi_index(f.T, SMALL)  # C order, second DOF fastest
  np.testing.assert_allclose(obs[:, 0, 0, 0], index * 10 / 255, atol=1e-6)
  np.testing.assert_array_equal(ds.targets_of([23], ["second_dof", "first_dof"]), [[2, 1]])


def test_mpi3d_published_sizes_and_checks(tmp_path):
  assert mpi3d.FACTOR_SIZES == (6, 6, 2, 3, 3, 40, 40) and mpi3d.NUM_EXAMPLES == 1036800
  bad = _write_mpi3d(tmp_path / "bad.npz")
  with pytest.raises(files.DataFileError, match=r"uint8 \[1036800, 64, 64, 3\]"):
    mpi3d.load_mpi3d("mpi3d_real", path=bad)
  for name in mpi3d.NAMES:
    root = tmp_path / name
    with pytest.raises(files.MissingDataError) as e:
      data.load_dataset(name, data_dir=root, synthetic_if_missing=True)
    msg = str(e.value)
    assert "\n" not in msg and f"{name}/{name}.npz" in msg and mpi3d.URLS[name] in msg
    assert not root.exists()
    _write_mpi3d(root / name / f"{name}.npz")
    with pytest.raises(files.ChecksumError, match=mpi3d.MD5[name]):
      data.load_dataset(name, data_dir=root)


# --- registration --------------------------------------------------------------------------------
def test_names_registered_in_data_and_config():
  assert set(config_lib.DLIB_DATASETS) == set(data.DLIB_SETS) == {
      "color_dsprites", "noisy_dsprites", "scream_dsprites", "dsprites_noshape", "cars3d",
      "mpi3d_toy", "mpi3d_realistic", "mpi3d_real"}
  ok, what = config_lib.RULES["dataset.name"]
  assert all(ok(n) for n in data.DATASETS + data.TFDS_ONLY) and not ok("cars")
  assert "mpi3d_real" in what
  assert config_lib.RULES["dataset.eval_name"][0]("cars3d")
  for name in data.DLIB_SETS:
    assert data.SPLITS[name] == ("train", "all")
  with pytest.raises(ValueError) as e:
    data.load_dataset("cars", data_dir="/nonexistent")
  assert all(n in str(e.value) for n in data.DATASETS + data.TFDS_ONLY)
  with pytest.raises(ValueError, match="has no 'test' split"):
    data.load_dataset("mpi3d_toy", data_dir="/nonexistent", split="test")


def test_load_dataset_variants_over_the_dsprites_source(tmp_path):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", data.ProceduralDataWarning)
    for name, cls in (("color_dsprites", dv.ColorDSprites), ("noisy_dsprites", dv.NoisyDSprites),
                      ("dsprites_noshape", dv.DSpritesNoShape)):
      ds = data.load_dataset(name, data_dir=tmp_path, source="render")
      assert isinstance(ds, cls) and ds.num_examples == dsprites.NUM_EXAMPLES
  with pytest.raises(files.MissingDataError):
    data.load_dataset("color_dsprites", data_dir=tmp_path, source="file")
  assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_run_on_a_set_drawn_per_sample_is_scored_on_draws_of_the_evaluations_stream(tmp_path,
                                                                                      base):
  """Trained and evaluated on colour dSprites drawn per sample: the metrics sample fresh
  observations (nothing encoded whole), the same numbers at every evaluation of the step."""
  from disentangle.evaluation import evaluate_run  # pylint: disable=g-import-not-at-top
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  from tests import helpers  # pylint: disable=g-import-not-at-top
  v = dv.ColorDSprites(base, 0, "per_sample")
  config = helpers.tiny_config("betavae", **{
      "num_steps": 2, "checkpoint_every": 2, "dataset.name": "color_dsprites",
      "dataset.variant_draw": "per_sample", "eval.num_points": 32, "eval.suite_points": 40})
  trainer.train(config, tmp_path / "run", dataset=v)
  kw = dict(dataset=v, factor_score_votes=4, vote_batch=8, mig_points=64, variance_points=64,
            write=False, selected_too=False)
  calls = []
  sample = v.sample_observations_from_factors
  v.sample_observations_from_factors = lambda f, rng: calls.append(len(f)) or sample(f, rng)
  first = evaluate_run.evaluate_run(tmp_path / "run", **kw)
  assert first["metrics"]["encodings"] == "sampled" and sum(calls) >= 64 + 4 * 8
  again = evaluate_run.evaluate_run(tmp_path / "run", **kw)
  for name in ("mig", "factor_score", "information"):
    np.testing.assert_equal(first["metrics"][name], again["metrics"][name])
