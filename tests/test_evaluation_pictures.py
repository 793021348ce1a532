"""A method's own evaluation pictures: the evaluator writes what the method's hook returns."""
import jax
import jax.numpy as jnp
import numpy as np
from PIL import Image
import pytest

from disentangle.evaluation import evaluator as evaluator_lib
from disentangle.methods import base
from disentangle.methods import betavae
from tests import helpers

NUM_IMAGES = 8


class PicturedBetaVAE(betavae.BetaVAE):
  """beta-VAE with one picture of its own: the first evaluation image beside its decoded mean."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.calls = []

  def evaluation_pictures(self, params, images, rep, *, decode, span, values):
    self.calls.append({"images": images, "span": span, "values": np.asarray(values)})
    decoded = np.asarray(decode(params, jnp.asarray(rep.mean[:1]), None))[0]
    return {"first_decoded": np.concatenate([images[0], decoded], axis=1)}


def _evaluate(method_cls, tmp_path):
  config = helpers.tiny_config("betavae", **{"eval.num_points": 32,
                                             "eval.num_images": NUM_IMAGES})
  data = helpers.TinyImages(n=64)
  method = method_cls(config, data.image_shape)
  params = jax.jit(method.init)(jax.random.PRNGKey(0)).params
  evaluator = evaluator_lib.Evaluator(config, method, tmp_path, dataset=data)
  evaluator.run(params, step=1)
  return method, params, data, evaluator


@pytest.mark.slow
def test_the_evaluator_writes_a_new_methods_picture(tmp_path):
  method, params, data, evaluator = _evaluate(PicturedBetaVAE, tmp_path)
  assert len(method.calls) == 1
  call = method.calls[0]
  images = data.get_images(evaluator.indices[:NUM_IMAGES])
  np.testing.assert_array_equal(call["images"], images)
  # mnist's traversal range (CascadeVAE Figs. 8, 9), as the shared traversals use it.
  assert call["span"] == 2.0
  np.testing.assert_allclose(call["values"], np.linspace(-2.0, 2.0, 10))
  written = sorted(p.name for p in (tmp_path / "images").iterdir())
  assert written == ["first_decoded.png", "reconstructions.png", "traversals.gif",
                     "traversals.png"]
  # The file holds the hook's picture: the image and its decoded posterior mean, by hand.
  mean = method.represent(params, jnp.asarray(images[:1]))["mean"]
  decoded = np.asarray(method.decode(params, mean))[0]
  want = np.round(np.clip(np.concatenate([images[0], decoded], axis=1), 0, 1) * 255)[..., 0]
  got = np.asarray(Image.open(tmp_path / "images" / "first_decoded.png"), np.float64)
  assert got.shape == want.shape == (32, 64)
  np.testing.assert_allclose(got, want, atol=1.0)  # jit and eager may round apart by one level
  assert np.abs(got[:, 32:] - want[:, 32:]).mean() < 0.1


def test_the_base_method_adds_no_picture(tmp_path):
  config = helpers.tiny_config("betavae")
  method = betavae.BetaVAE(config, (32, 32, 1))
  assert base.VAEMethod.evaluation_pictures is betavae.BetaVAE.evaluation_pictures
  assert method.evaluation_pictures(None, np.zeros((2, 32, 32, 1)), None, decode=None,
                                    span=2.0, values=np.zeros(10)) == {}
  _evaluate(betavae.BetaVAE, tmp_path)
  written = sorted(p.name for p in (tmp_path / "images").iterdir())
  assert written == ["reconstructions.png", "traversals.gif", "traversals.png"]


def test_information_rows_order_and_curves(tmp_path):
  """Fig. 9's curves: I(x; z_j), then I(x; d) where there is a code; the traversal order by the
  latest I(x; z_j) alone; a picture only from two evaluations of one width."""
  row = evaluator_lib.information_row({"mi_per_dim": [0.1, 0.9, 0.3], "discrete_mi": 2.0})
  np.testing.assert_array_equal(row, [0.1, 0.9, 0.3, 2.0])
  np.testing.assert_array_equal(evaluator_lib.information_row({"mi_per_dim": [0.4]}), [0.4])
  history = [(10, np.array([0.5, 0.0, 0.0, 1.0])), (20, row)]
  np.testing.assert_array_equal(evaluator_lib.information_order(history, 3), [1, 2, 0])
  assert evaluator_lib.information_order([], 3) is None
  path = tmp_path / "information.png"
  assert not evaluator_lib.plot_information(path, history[:1], 3) and not path.exists()
  assert not evaluator_lib.plot_information(path, [(1, np.ones(3)), (2, row)], 3)
  assert evaluator_lib.plot_information(path, history, 3) and path.stat().st_size > 0
