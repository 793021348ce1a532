"""No decoder forward computed twice after t_d (`disentangle.nn.networks.replay`): the update's pass taken
from CascadeVAE's S passes (Algorithm 1, Eq. 6) has the loss and gradient of the pass recomputed."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disentangle import methods
from disentangle.methods import base
from disentangle.nn import networks
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
    return jnp.vdot(networks.replay(layers, p, z, jax.lax.stop_gradient(inputs),
                                  jax.lax.stop_gradient(out)), cot)

  want, got = (jax.jit(jax.value_and_grad(f, argnums=(0, 1)))(params, latent)
               for f in (plain, replayed))
  for w, g in zip(jax.tree_util.tree_leaves(want), jax.tree_util.tree_leaves(got), strict=True):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * float(np.max(np.abs(w))))


def _updates(conv_impl, dtype, batching):
  """{reuse: ((loss, reconstruction, d, grads) of one run, the same of two vmapped runs)} of the
  update after t_d given the codes and the S passes of the costs (True: the trainer's step,
  `train.codes`) and with the codes solved inside the loss, its pass run afresh (False:
  Algorithm 1 as written, `helpers.algorithm_1`): one compiled program for the four, at the same
  parameters and images."""
  data = helpers.TinyImages()
  x = jnp.asarray(data.get_images(np.arange(32))).reshape((2, 16) + data.image_shape)
  method = methods.build(helpers.tiny_config("cascadevae", **{
      "cascade.penalty": 0.01, "model.conv_impl": conv_impl, "model.dtype": dtype,
      "cascade.unary_batching": batching}), data.image_shape).for_phase(True)
  t = 10

  def update(p, image, key, given=None):
    if given is None:
      loss_fn = lambda p: helpers.algorithm_1(method, method.code_solve)(p, {"image": image},
                                                                           key, t)
    else:
      loss_fn = lambda p: (lambda r: (r[0], dict(r[1], d=r[2])))(
          method.terms(p["vae"], {"image": image}, key, t, given))
    (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(p)
    return loss, metrics["reconstruction"], metrics["d"], grads

  def reused_and_recomputed(p, image):
    state = base.TrainState(step=jnp.int32(t - 1), params=p, opt_state=None,
                            rng=jax.random.PRNGKey(3))
    costs = method.code_costs(state, {"image": image})
    key, _ = method.step_key(state)
    return (update(p, image, key, (method.code_solve(costs.u), costs.reuse)),
            update(p, image, key))

  def both(p, x):
    one = reused_and_recomputed(*jax.tree_util.tree_map(lambda a: a[0], (p, x)))
    two = jax.vmap(reused_and_recomputed)(p, x)
    return {True: (one[0], two[0]), False: (one[1], two[1])}

  return jax.jit(both)(_initial_params(), x)


@functools.cache
def _initial_params():
  """Two runs' initial parameters of the tiny CascadeVAE: one tree under every ``conv_impl`` and
  ``dtype`` (the parameters stay float32)."""
  method = methods.build(helpers.tiny_config("cascadevae"), helpers.TinyImages().image_shape)
  return jax.jit(jax.vmap(lambda k: method.init(k).params))(
      jax.random.split(jax.random.PRNGKey(0), 2))


# (loss and reconstruction rtol, gradient rtol, gradient atol over the largest |gradient|) per
# ``model.dtype``. Under bfloat16 both updates run the same bfloat16 layers on the same rows (bit
# for bit on XLA:CPU); a backend may sum S*B rows in another float32 order than B rows, and the
# bound stays below what one bfloat16 rounding of the logits' cotangent moves (~5e-3).
TOLERANCES = {"float32": (1e-6, 1e-4, 1e-5), "bfloat16": (1e-5, 1e-3, 1e-3)}


# Every convolution form a GPU or TPU may resolve to (``model.conv_impl``), in float32 and
# bfloat16, each unary batching under each dtype.
@pytest.mark.slow
@pytest.mark.parametrize("conv_impl, dtype, batching", [
    ("flax", "float32", "per_class"), ("flax", "bfloat16", "stacked"),
    ("fast", "float32", "stacked"), ("fast", "bfloat16", "per_class"),
    ("gemm", "float32", "stacked"), ("gemm", "bfloat16", "per_class")])
def test_the_update_reusing_the_passes_equals_the_recomputed_pass(conv_impl, dtype, batching):
  out = _updates(conv_impl, dtype, batching)
  rtol, grad_rtol, grad_atol = TOLERANCES[dtype]
  for runs, reused, recomputed in zip((1, 2), out[True], out[False], strict=True):
    (loss, rec, d, grads), (loss0, rec0, d0, grads0) = reused, recomputed
    np.testing.assert_array_equal(d, d0, err_msg=f"{runs} runs")
    np.testing.assert_allclose(loss, loss0, rtol=rtol, err_msg=f"{runs} runs")
    np.testing.assert_allclose(rec, rec0, rtol=rtol, err_msg=f"{runs} runs")
    for path, g in jax.tree_util.tree_leaves_with_path(grads):
      g0 = np.asarray(dict(jax.tree_util.tree_leaves_with_path(grads0))[path])
      np.testing.assert_allclose(g, g0, rtol=grad_rtol, atol=grad_atol * float(np.max(np.abs(g0))),
                                 err_msg=f"{runs} runs: {jax.tree_util.keystr(path)}")
