"""PartedVAE's pictures on plain arrays (`disentangle.methods.partedvae_figures`): attribute
transfer, u traversals, the mixture prior and the generative process, with a decoder whose images
spell out their latents (so every tile can be read back and checked)."""
import jax
import numpy as np
import pytest

from disentangle import methods
from disentangle.evaluation import evaluator as evaluator_lib
from disentangle.methods import partedvae_figures as figures
from disentangle.metrics.representation import as_representation
from tests import helpers

D = 5  # latent size of the fake decoder
PAD = 2


def spell(latents):
  """'Decoder': image [1, D] whose pixels are the latent values (kept in [0, 1] by the tests)."""
  latents = np.asarray(latents, np.float32)
  return latents[:, None, :, None]


def tiles(grid, rows, cols, h=1, w=D):
  """Inverse of make_grid: the [rows, cols, h, w] tiles (channel 0)."""
  out = np.empty((rows, cols, h, w), np.float32)
  for r in range(rows):
    for c in range(cols):
      top, left = PAD + r * (h + PAD), PAD + c * (w + PAD)
      out[r, c] = grid[top:top + h, left:left + w, 0]
  return out


def test_attribute_transfer_takes_z_from_the_column_and_the_rest_from_the_row():
  rng = np.random.default_rng(0)
  keep, give = rng.random((3, D)), rng.random((4, D))
  z_dims = [0, 1]
  grid = figures.attribute_transfer_grid(spell, keep, give, z_dims, keep_images=spell(keep),
                                     give_images=spell(give))
  t = tiles(grid, 4, 5)
  assert np.all(t[0, 0] == 1.0)  # blank corner
  np.testing.assert_allclose(t[0, 1:, 0], give, atol=1e-6)  # first row: the z donors
  np.testing.assert_allclose(t[1:, 0, 0], keep, atol=1e-6)  # first column: the kept images
  for i in range(3):
    for j in range(4):
      want = keep[i].copy()
      want[z_dims] = give[j, z_dims]
      np.testing.assert_allclose(t[1 + i, 1 + j, 0], want, atol=1e-6)
  bare = figures.attribute_transfer_grid(spell, keep, give, z_dims)
  assert bare.shape == (PAD + 3 * (1 + PAD), PAD + 4 * (D + PAD), 1)
  with pytest.raises(ValueError):
    figures.attribute_transfer_grid(spell, keep, give[:, :3], z_dims)


def test_traversal_rows_use_their_own_values():
  base = np.full(D, 0.5, np.float32)
  values = [np.linspace(0.0, 0.3, 4), np.linspace(0.6, 0.9, 4)]
  t = tiles(figures.traversal_rows_grid(spell, base, [3, 4], values), 2, 4)
  for r, (dim, vals) in enumerate(zip([3, 4], values)):
    want = np.tile(base, (4, 1))
    want[:, dim] = vals
    np.testing.assert_allclose(t[r, :, 0], want, atol=1e-6)
  with pytest.raises(ValueError):
    figures.traversal_rows_grid(spell, base, [3], values)


def test_prior_span_covers_every_component():
  span = figures.prior_span([-1.0, 3.0], [np.log(0.25), np.log(4.0)], num=5, width=2.0)
  # min(-1 - 2 * 0.5, 3 - 2 * 2) = -2; max(-1 + 1, 3 + 4) = 7
  np.testing.assert_allclose(span, np.linspace(-2.0, 7.0, 5))


def test_mixture_density_integrates_to_the_weights():
  grid = np.linspace(-30, 30, 60001)
  dens = figures.mixture_density(grid, [0.0, 2.0, -1.0], np.log([0.5, 2.0, 0.1]), [0.2, 0.5, 0.3])
  np.testing.assert_allclose(np.trapezoid(dens, grid, axis=1), [0.2, 0.5, 0.3], rtol=1e-6)
  # The normal density by hand at one point.
  x, mu, var = 0.7, 2.0, 2.0
  want = 0.5 * np.exp(-(x - mu) ** 2 / (2 * var)) / np.sqrt(2 * np.pi * var)
  np.testing.assert_allclose(figures.mixture_density([x], [mu], [np.log(var)], [0.5])[0, 0], want)


def test_generative_process_samples_the_prior():
  rng = np.random.default_rng(1)
  means = [np.array([[-4.0, 0.0], [4.0, 1.0], [0.0, 8.0]]), np.array([[10.0, -10.0], [0.0, 0.0]])]
  logvars = [np.log(np.full((3, 2), 0.25)), np.zeros((2, 2))]
  weights = [np.array([0.2, 0.3, 0.5]), np.array([0.9, 0.1])]
  n = 20000
  latents, classes = figures.sample_mixture_latents(rng, 3, means, logvars, weights, n)
  assert latents.shape == (n, 3 + 2 + 2) and classes.shape == (n, 2)
  for i, w in enumerate(weights):  # class frequencies: within 5 standard errors of p(c)
    freq = np.bincount(classes[:, i], minlength=len(w)) / n
    assert np.all(np.abs(freq - w) < 5 * np.sqrt(w * (1 - w) / n))
  z = latents[:, :3]
  assert np.all(np.abs(z.mean(0)) < 0.05) and np.all(np.abs(z.std(0) - 1) < 0.05)
  for i, (mu, lv) in enumerate(zip(means, logvars)):
    u = latents[:, 3 + 2 * i:5 + 2 * i]
    for k in range(len(mu)):  # u_i | c_i = k ~ N(mu_k, sigma_k^2)
      sel = u[classes[:, i] == k]
      np.testing.assert_allclose(sel.mean(0), mu[k], atol=6 * np.exp(0.5 * lv[k]).max() /
                                 np.sqrt(len(sel)))
      np.testing.assert_allclose(sel.std(0), np.exp(0.5 * lv[k]), rtol=0.1)
  fixed, cls = figures.sample_mixture_latents(rng, 3, means, logvars, weights, 6,
                                          first_class=np.array([2, 2, 0, 0, 1, 1]))
  np.testing.assert_array_equal(cls[:, 0], [2, 2, 0, 0, 1, 1])
  grid = figures.generation_grid(lambda x: np.zeros((len(x), 4, 4)), rng, 3, means, logvars,
                                 weights, per_row=5)
  assert grid.shape == (PAD + 3 * (4 + PAD), PAD + 5 * (4 + PAD), 1)  # one row per class of c_1


def test_prior_components_figure_is_an_rgb_picture():
  values = np.linspace(-2, 2, 6)
  images = np.random.default_rng(0).random((6, 8, 8))
  pic = figures.prior_components_figure([-1.0, 1.0], [0.0, -1.0], [0.3, 0.7], values, images,
                                    title="hair")
  assert pic.ndim == 3 and pic.shape[2] == 3 and 0.0 <= pic.min() and pic.max() <= 1.0
  assert pic.std() > 0.01  # something is drawn
  with pytest.raises(ValueError):
    figures.prior_components_figure([0.0], [0.0], [1.0], values, images[:5])


def test_mixture_pictures_from_plain_arrays():
  prior = {"means": [np.array([[0.1], [0.9]]), np.array([[0.2], [0.5], [0.8]])],
           "logvars": [np.log(np.full((2, 1), 0.01)), np.log(np.full((3, 1), 0.01))],
           "weights": [np.array([0.5, 0.5]), np.array([0.2, 0.3, 0.5])],
           "z_dim": 2, "u_dim": 1, "names": ("hair", "smile")}
  rng = np.random.default_rng(0)
  rep = as_representation({"mean": rng.random((8, 4)), "logvar": np.zeros((8, 4))})
  calls = []
  def decode(z):
    calls.append(np.array(z))
    return np.clip(spell(z)[:, :, :4], 0, 1)
  images = spell(rep.mean)[:, :, :4]
  out = figures.mixture_pictures(prior, decode, images, rep, span=0.4,
                             values=np.linspace(0.1, 0.5, 3))
  assert set(out) == {"z_traversal", "u_traversal", "attribute_transfer", "prior_hair",
                      "prior_smile", "samples"}
  # u traversal: u_0 (dim 2) spans its prior components 0.1 - 0.2 .. 0.9 + 0.2.
  u_call = calls[1]
  np.testing.assert_allclose(u_call[:3, 2], np.linspace(-0.1, 1.1, 3), atol=1e-6)
  assert out["samples"].shape[0] == PAD + 2 * (1 + PAD)  # one row per class of the first variable


@pytest.mark.slow
def test_save_pictures_writes_partedvae_pictures(tmp_path):
  try:
    config = helpers.tiny_config("partedvae")
  except Exception as e:  # pylint: disable=broad-except
    pytest.skip(f"partedvae not available: {e}")
  config.parted.discrete_sizes = (4, 2)
  config.parted.u_dim = 1
  config.parted.num_labelled = 0
  config.parted.prior_c = ()
  data = helpers.TinyImages(n=16)
  method = methods.build(config, data.image_shape)
  params = jax.jit(method.init)(jax.random.PRNGKey(0)).params
  images = data.images[:8]
  rep = as_representation(jax.device_get(jax.jit(method.represent)(params, images)))
  paths = evaluator_lib.save_pictures(method, params, images, rep, tmp_path,
                                      dataset_name="mnist")
  for kind in ("z_traversal", "u_traversal", "attribute_transfer", "prior_c0", "prior_c1",
               "samples", "discrete_traversal"):
    assert paths[kind].is_file(), kind
