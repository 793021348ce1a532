"""No decoder forward computed twice after t_d (`disentangle.nn.replay`): the update's pass taken
from CascadeVAE's S passes (Algorithm 1, Eq. 6) has the loss and gradient of the pass recomputed."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disentangle import methods
from disentangle.nn import networks
from disentangle.nn import replay
from tests import helpers


@pytest.mark.slow
@pytest.mark.parametrize("conv_impl", ["flax", "fast"])
def test_replayed_rows_have_the_gradient_of_their_pass(conv_impl):
  decoder = networks.Decoder(image_shape=(32, 32, 1), conv_impl=conv_impl, hidden_units=16)
  latent = jax.random.normal(jax.random.PRNGKey(1), (3, 5))
  params = decoder.init(jax.random.PRNGKey(0), latent)["params"]
  layers = networks.decoder_layers(decoder)
  cot = jax.random.normal(jax.random.PRNGKey(2), (3, 32, 32, 1))

  def plain(p, z):
    return jnp.vdot(decoder.apply({"params": p}, z), cot)

  def replayed(p, z):
    out, inputs = networks.chain(layers, lambda name, layer, h: layer.apply(
        {"params": p[name]}, h), jax.lax.stop_gradient(z))
    return jnp.vdot(replay.replay(layers, p, z, jax.lax.stop_gradient(inputs),
                                  jax.lax.stop_gradient(out)), cot)

  want, got = (jax.jit(jax.value_and_grad(f, argnums=(0, 1)))(params, latent)
               for f in (plain, replayed))
  for w, g in zip(jax.tree_util.tree_leaves(want), jax.tree_util.tree_leaves(got), strict=True):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * float(np.max(np.abs(w))))


def _loss_and_grads(runs, reuse, **fields):
  config = helpers.tiny_config("cascadevae", **{"cascade.reuse_passes": reuse,
                                                "cascade.penalty": 0.01, **fields})
  data = helpers.TinyImages()
  method = methods.build(config, data.image_shape).for_phase(True)
  params = jax.vmap(lambda k: method.init(k).params)(jax.random.split(jax.random.PRNGKey(0), runs))
  x = jnp.asarray(data.get_images(np.arange(16 * runs))).reshape((runs, 16) + data.image_shape)

  def one(p, image):
    (loss, (metrics, d)), grads = jax.value_and_grad(
        lambda p: (lambda r: (r[0], r[1:]))(method.terms(p["vae"], {"image": image},
                                                         jax.random.PRNGKey(3), 10)),
        has_aux=True)(p)
    return loss, metrics["reconstruction"], d, grads

  if runs == 1:
    return jax.jit(lambda p, x: one(*jax.tree_util.tree_map(lambda a: a[0], (p, x))))(params, x)
  return jax.jit(jax.vmap(one))(params, x)


@pytest.mark.slow
@pytest.mark.parametrize("runs, conv_impl, batching", [(2, "flax", "per_class"),
                                                       (2, "fast", "stacked"),
                                                       (1, "fast", "per_class"),
                                                       (1, "flax", "stacked")])
def test_the_update_reusing_the_passes_equals_the_recomputed_pass(runs, conv_impl, batching):
  fields = {"model.conv_impl": conv_impl, "cascade.unary_batching": batching}
  (loss, rec, d, grads), (loss0, rec0, d0, grads0) = (
      _loss_and_grads(runs, reuse, **fields) for reuse in (True, False))
  np.testing.assert_array_equal(d, d0)
  np.testing.assert_allclose(loss, loss0, rtol=1e-6)
  np.testing.assert_allclose(rec, rec0, rtol=1e-6)
  for path, g in jax.tree_util.tree_leaves_with_path(grads):
    g0 = np.asarray(dict(jax.tree_util.tree_leaves_with_path(grads0))[path])
    np.testing.assert_allclose(g, g0, rtol=1e-4, atol=1e-5 * float(np.max(np.abs(g0))),
                               err_msg=jax.tree_util.keystr(path))
