"""Image grids, traversals and curves: valid PNGs of the expected size and content."""
import numpy as np
from PIL import Image
import pytest

from disentangle import viz


def read_png(path):
  with Image.open(path) as im:
    assert im.format == "PNG"
    im.load()
    return im.size, np.asarray(im)


def test_save_image_grid_size_and_atomic(tmp_path):
  images = np.random.default_rng(0).random((10, 8, 6, 1))
  path = tmp_path / "sub" / "grid.png"
  grid = viz.save_image_grid(path, images, nrow=4)
  # 4 columns, 3 rows, 2 px padding: W = 4 (6 + 2) + 2, H = 3 (8 + 2) + 2.
  assert read_png(path)[0] == (34, 32) and grid.shape == (32, 34, 1)
  assert sorted(p.name for p in path.parent.iterdir()) == ["grid.png"]  # no temp files left
  _, pixels = read_png(path)
  np.testing.assert_array_equal(pixels[2:10, 2:8], np.round(images[0, ..., 0] * 255))
  rgb = tmp_path / "rgb.png"
  viz.save_image_grid(rgb, np.zeros((3, 5, 5, 3)), nrow=3, padding=0)
  size, pixels = read_png(rgb)
  assert size == (15, 5) and pixels.shape == (5, 15, 3)


def test_reconstruction_grid_pairs_rows():
  grid = viz.reconstruction_grid(np.full((5, 4, 4, 1), 0.25), np.full((5, 4, 4, 1), 0.75),
                                 nrow=3, padding=0)
  assert grid.shape == (16, 12, 1)  # rows: originals, reconstructions, originals, recons
  np.testing.assert_allclose(grid[0:4, :, 0], 0.25)
  np.testing.assert_allclose(grid[4:8, :, 0], 0.75)
  np.testing.assert_allclose(grid[8:12, :8, 0], 0.25)
  np.testing.assert_allclose(grid[12:16, :8, 0], 0.75)
  np.testing.assert_allclose(grid[8:16, 8:, 0], 1.0)  # blank filler tile


def write_latents(z):
  """decode_fn that writes its input latent into a [k, 2, m, 1] image."""
  return np.repeat(np.asarray(z)[:, None, :, None], 2, axis=1)


def tile(grid, r, c, h, w, p):
  return grid[p + r * (h + p):p + r * (h + p) + h, p + c * (w + p):p + c * (w + p) + w]


def test_traversal_rows_vary_only_their_dimension():
  base = np.array([0.1, -0.2, 0.3, 0.4, -0.5])
  dims, values = [3, 0, 4], np.linspace(-1.2, 1.2, 7)
  grid = viz.traversal_grid(write_latents, base, dims, values, padding=1)
  assert grid.shape == (3 * 3 + 1, 7 * 6 + 1, 1)
  for r, d in enumerate(dims):
    for c, v in enumerate(values):
      want = base.copy()
      want[d] = v
      got = tile(grid, r, c, 2, 5, 1)[0, :, 0]
      np.testing.assert_allclose(got, want, atol=1e-6)


@pytest.mark.parametrize("name, span", [("dsprites", 1.2), ("mnist", 2.0), ("celeba", 2.0)])
def test_traversal_values_span_the_papers_figures(name, span):
  np.testing.assert_allclose(viz.traversal_values(name), np.linspace(-span, span, 10))


def test_latent_order_is_largest_first_with_ties_in_index_order():
  np.testing.assert_array_equal(viz.latent_order([0.1, 0.9, 0.1, 0.5]), [1, 3, 0, 2])


def test_discrete_traversal_one_row_per_value():
  def decode(z, d):
    img = write_latents(z)
    img[:, 1, 0, 0] = d  # second pixel row carries the discrete value
    return img
  base = np.array([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
  grid = viz.discrete_traversal_grid(decode, base, 4, padding=0)
  assert grid.shape == (4 * 2, 2 * 3, 1)
  for k in range(4):
    for c in range(2):
      t = tile(grid, k, c, 2, 3, 0)[..., 0]
      np.testing.assert_allclose(t[0], base[c])
      assert t[1, 0] == k
  grid = viz.discrete_traversal_grid(decode, base[0], 3, traverse_dim=2, values=[-2, 0, 2],
                                     padding=0)
  assert grid.shape == (3 * 2, 3 * 3, 1)
  np.testing.assert_allclose(tile(grid, 1, 2, 2, 3, 0)[0, :, 0], [0.0, 1.0, 2.0])
  assert tile(grid, 2, 0, 2, 3, 0)[1, 0, 0] == 2


def test_plot_information_curves(tmp_path):
  path = tmp_path / "info.png"
  steps = np.arange(0, 1000, 100)
  values = np.cumsum(np.random.default_rng(0).random((10, 4)), axis=0)
  viz.plot_information_curves(path, steps, values, ["z1", "z2", "z3", "d"],
                              figsize=(6, 4), dpi=50)
  assert read_png(path)[0] == (300, 200)
  assert [p.name for p in tmp_path.iterdir()] == ["info.png"]


def test_the_traversal_gif_shows_each_value_forth_and_back(tmp_path):
  rng = np.random.default_rng(0)
  images = np.round(rng.random((2, 3, 4, 4, 1)) * 255) / 255  # rows, values, H, W, C
  viz.save_traversal_gif(tmp_path / "t.gif", images, padding=1)
  with Image.open(tmp_path / "t.gif") as gif:
    frames = []
    for i in range(gif.n_frames):
      gif.seek(i)
      frames.append(np.asarray(gif.convert("L"), np.float64) / 255)
  assert len(frames) == 4  # values 0, 1, 2, then 1 on the way back
  for frame, t in zip(frames, (0, 1, 2, 1)):
    np.testing.assert_allclose(frame, viz.make_grid(images[:, t], 2, 1)[..., 0], atol=1e-6)


def test_traversal_images_set_one_latent_per_row():
  decode = lambda z: np.repeat(z[:, :, None], 2, axis=2)  # [k, m] -> "images" [k, m, 2]
  out = viz.traversal_images(decode, np.array([0.5, -1.0, 3.0]), [2, 0], [-2.0, 2.0])
  assert out.shape == (2, 2, 3, 2, 1)
  np.testing.assert_array_equal(out[0, :, :, 0, 0], [[0.5, -1.0, -2.0], [0.5, -1.0, 2.0]])
  np.testing.assert_array_equal(out[1, :, :, 0, 0], [[-2.0, -1.0, 3.0], [2.0, -1.0, 3.0]])
