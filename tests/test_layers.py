"""`disentangle.nn.layers` against the plain Flax layers (the reference).

Inputs and parameters come from numpy and every JAX computation of a test is one jitted
function: eager JAX random ops and flax inits compile per shape and would take most of the time.
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disentangle.nn import layers
from disentangle.train import host

RTOL = 1e-5

# (batch, height, width, in channels, out channels): decoder layers 4->8 64ch, 16->32 32ch and
# 32->64 1ch (the few-channel path, out <= 4) at small batches; odd, rectangular sizes on both
# paths.
CASES = [
    (2, 4, 4, 64, 64),
    (3, 16, 16, 32, 32),
    (1, 32, 32, 32, 1),
    (3, 5, 3, 7, 6),
    (2, 5, 3, 7, 3),
]


def assert_close(actual, reference, rtol: float = RTOL) -> None:
  """max |actual - reference| <= rtol * max |reference|, leaf by leaf (rtol=0: bitwise equal)."""
  assert jax.tree.structure(actual) == jax.tree.structure(reference)
  for a, r in zip(jax.tree.leaves(actual), jax.tree.leaves(reference)):
    a, r = np.asarray(a, np.float64), np.asarray(r, np.float64)
    assert a.shape == r.shape
    diff, scale = np.max(np.abs(a - r)), np.max(np.abs(r))
    assert diff <= rtol * scale, (
        f"max |diff| {diff:.3g} > {rtol:.0e} * max |reference| {scale:.3g} (shape {r.shape})")


def _reference(features: int, **kwargs) -> nn.ConvTranspose:
  return nn.ConvTranspose(features, (4, 4), strides=(2, 2), padding="SAME", **kwargs)


def _random_case(batch, height, width, cin, cout, seed=0):
  """Input, params (nonzero bias) and output weights of one case, float32 from numpy."""
  rng = np.random.default_rng(seed)
  normal = lambda shape, scale=1.0: (scale * rng.standard_normal(shape)).astype(np.float32)
  x = normal((batch, height, width, cin))
  params = {"params": {"kernel": normal((4, 4, cin, cout), 1.0 / np.sqrt(4 * cin)),
                       "bias": normal((cout,), 0.5)}}
  weights = normal((batch, 2 * height, 2 * width, cout))
  return x, params, weights


REWRITES = [impl for impl in layers.CONV_IMPLS if impl != "flax"]


@pytest.mark.parametrize("batch,height,width,cin,cout", CASES)
def test_forward_and_gradients_match_flax(batch, height, width, cin, cout):
  """Every rewrite of the transposed convolution: output, input and parameter gradients."""
  x, params, weights = _random_case(batch, height, width, cin, cout, seed=height * 100 + cout)
  modules = [_reference(cout)] + [layers.conv_transpose(impl, cout) for impl in REWRITES]

  def loss(module, p, inputs):
    # Nonuniform output weights, so every gradient entry is exercised.
    return jnp.sum(jnp.sin(module.apply(p, inputs)) * weights)

  @host.jit  # one compilation per case, with the trainer's compiler options
  def run(p, inputs):
    grad = lambda module: jax.grad(lambda q, i: loss(module, q, i), argnums=(0, 1))(p, inputs)
    return [(m.apply(p, inputs), grad(m)) for m in modules]

  (y_ref, grads_ref), *rewrites = run(params, x)
  assert y_ref.shape == (batch, 2 * height, 2 * width, cout)
  for y, grads in rewrites:
    assert_close(y, y_ref)
    assert_close(grads, grads_ref)


def test_rewrites_match_flax_for_runs_under_vmap():
  """N = 2 runs vmapped (the accelerators' layout: grouped convolutions, batched matmuls): each
  rewrite's encoder and decoder layer, forward and gradients, equal Flax's run by run."""
  runs = [_random_case(2, 8, 8, 8, 16, seed=s) for s in (3, 4)]
  stack = lambda *t: jnp.stack(t)
  x, params, weights = jax.tree.map(stack, *runs)

  def per_run(module, p, inputs, w):
    return jax.grad(lambda q, i: jnp.sum(jnp.sin(module.apply(q, i)) * w), argnums=(0, 1))(
        p, inputs)

  def encoder_layer(impl):  # a 16 -> 8 channel strided conv on the decoder case's output shape
    return layers.conv(impl, 8)

  @host.jit
  def run(p, inputs, w):
    out = {}
    for impl in layers.CONV_IMPLS:
      up = layers.conv_transpose(impl, 16)
      down = encoder_layer(impl)
      down_params = {"params": {"kernel": jnp.swapaxes(p["params"]["kernel"], -1, -2),
                                "bias": p["params"]["bias"][..., :8]}}
      out[impl] = (jax.vmap(lambda *a, m=up: per_run(m, *a))(p, inputs, w),
                   jax.vmap(lambda q, i, m=down: jax.grad(
                       lambda r, j: jnp.sum(jnp.cos(m.apply(r, j))), argnums=(0, 1))(q, i))(
                           down_params, jax.vmap(up.apply)(p, inputs)))
    return out

  out = run(params, x, weights)
  for impl in REWRITES:
    assert_close(out[impl], out["flax"])


def test_comparison_detects_a_wrong_index_mapping():
  """Negative control: the same computation with the kernel flipped must fail `assert_close`."""
  x, params, _ = _random_case(2, 4, 4, 8, 8)
  kernel, bias = params["params"]["kernel"], params["params"]["bias"]
  flipped, y_ref = jax.jit(lambda p, i: (
      layers.fast_conv_transpose(i, kernel[::-1, ::-1]) + bias, _reference(8).apply(p, i)))(
          params, x)
  with pytest.raises(AssertionError):
    assert_close(flipped, y_ref)


def test_batch_dims_unbatched_and_no_bias():
  x, params, _ = _random_case(6, 4, 4, 6, 5)
  params = {"params": {"kernel": params["params"]["kernel"]}}
  x = x.reshape(2, 3, 4, 4, 6)
  fast, ref = layers.FastConvTranspose(5, use_bias=False), _reference(5, use_bias=False)

  @jax.jit
  def run(p, inputs):
    return (ref.apply(p, inputs), fast.apply(p, inputs),
            ref.apply(p, inputs[0, 0]), fast.apply(p, inputs[0, 0]))

  y_ref, y_fast, y_ref_unbatched, y_fast_unbatched = run(params, x)
  assert y_fast.shape == (2, 3, 8, 8, 5) and y_fast_unbatched.shape == (8, 8, 5)
  assert_close(y_fast, y_ref)
  assert_close(y_fast_unbatched, y_ref_unbatched)


class _TinyNet(nn.Module):
  """Named layers in a parent: params and init rng streams must match across impls."""
  impl: str

  @nn.compact
  def __call__(self, x):
    x = nn.relu(layers.conv_transpose(self.impl, 8, name="up0")(x))
    x = layers.conv_transpose(self.impl, 1, name="up1",
                              kernel_init=nn.initializers.variance_scaling(
                                  2.0, "fan_in", "truncated_normal"),
                              bias_init=nn.initializers.normal(0.5))(x)
    return layers.conv(self.impl, 2, name="down")(x)


def test_init_params_identical_and_helpers():
  """Same names and shapes at init for every case, same values standalone and inside a network."""
  flax_net, fast_net = _TinyNet("flax"), _TinyNet("fast")
  x_net = np.random.default_rng(1).standard_normal((2, 4, 4, 16)).astype(np.float32)

  for batch, height, width, cin, cout in CASES:  # names, shapes, dtypes: abstract init, free
    x = jax.ShapeDtypeStruct((batch, height, width, cin), jnp.float32)
    shapes_ref = jax.eval_shape(_reference(cout).init, jax.random.key(0), x)
    assert jax.eval_shape(layers.FastConvTranspose(cout).init, jax.random.key(0), x) == shapes_ref
    assert set(shapes_ref["params"]) == {"kernel", "bias"}

  @jax.jit  # values: one compilation, as each random sampler instance costs compile time
  def run(key):
    batch, height, width, cin, cout = CASES[0]
    x = jnp.zeros((batch, height, width, cin))
    inits = [(_reference(cout).init(key, x), layers.FastConvTranspose(cout).init(key, x))]
    params = flax_net.init(key, x_net)
    inits.append((params, fast_net.init(key, x_net)))
    return inits, flax_net.apply(params, x_net), fast_net.apply(params, x_net)

  inits, y_ref, y_fast = run(jax.random.key(5))
  for params_ref, params_fast in inits:
    assert_close(params_fast, params_ref, rtol=0.0)
  assert set(inits[-1][0]["params"]) == {"up0", "up1", "down"}
  assert_close(y_fast, y_ref)
  # each conv_impl's (strided, transposed) layers, named for it
  named = {"flax": (nn.Conv, nn.ConvTranspose),
           "fast": (layers.FastConv, layers.FastConvTranspose),
           "gemm": (layers.GemmConv, layers.GemmConvTranspose)}
  assert tuple(named) == layers.CONV_IMPLS
  for impl, (strided, transposed) in named.items():
    assert type(layers.conv(impl, 3)) is strided
    assert type(layers.conv_transpose(impl, 3)) is transposed


# (batch, height, width, in, out): encoder layers 64->32 1->32ch, 32->16 32->32ch, 8->4 64ch;
# 8x6 with 3 channels (the space-to-depth forward); an odd size takes the plain fallback.
CONV_CASES = [(2, 64, 64, 1, 32), (3, 32, 32, 32, 32), (2, 8, 8, 64, 64), (2, 8, 6, 3, 5),
              (2, 5, 7, 3, 4)]


@pytest.mark.parametrize("batch,height,width,cin,cout", CONV_CASES)
def test_fast_conv_matches_flax_conv(batch, height, width, cin, cout):
  rng = np.random.default_rng(height + cin)
  x = rng.standard_normal((batch, height, width, cin)).astype(np.float32)
  params = {"params": {"kernel": (rng.standard_normal((4, 4, cin, cout)) / np.sqrt(16 * cin))
                                 .astype(np.float32),
                       "bias": rng.standard_normal(cout).astype(np.float32)}}
  ref = nn.Conv(cout, (4, 4), strides=(2, 2), padding="SAME")
  rewrites = [layers.conv(impl, cout) for impl in REWRITES]
  weights = rng.standard_normal(
      (batch, (height + 1) // 2, (width + 1) // 2, cout)).astype(np.float32)

  @host.jit
  def run(params, x):
    def loss(module):
      return lambda p, x: jnp.sum(jnp.tanh(module.apply(p, x)) * weights)
    return [(m.apply(params, x), jax.grad(loss(m), argnums=(0, 1))(params, x))
            for m in [ref] + rewrites]

  (y_ref, g_ref), *outs = run(params, x)
  xs = jax.ShapeDtypeStruct(x.shape, jnp.float32)
  for module, (y, g) in zip(rewrites, outs):
    assert (jax.eval_shape(ref.init, jax.random.key(0), xs) ==
            jax.eval_shape(module.init, jax.random.key(0), xs))
    assert_close(y, y_ref)
    assert_close(g, g_ref)


def test_add_bias_gradient_is_the_sum_and_vmaps():
  rng = np.random.default_rng(7)
  y = rng.standard_normal((3, 4, 5, 6)).astype(np.float32)
  b = rng.standard_normal((2, 6)).astype(np.float32)
  w = rng.standard_normal((2, 3, 4, 5, 6)).astype(np.float32)
  loss = lambda y, b, w: jnp.sum(jnp.sin(layers.add_bias(y, b)) * w)
  g_y, g_b = host.jit(jax.vmap(jax.grad(loss, argnums=(0, 1)), in_axes=(None, 0, 0)))(y, b, w)
  for i in range(2):
    cot = np.cos(y + b[i]) * w[i]
    assert_close(g_y[i], cot)
    assert_close(g_b[i], cot.reshape(-1, 6).sum(0))


# -- the encoder trunk and its options ------------------------------------------------------------

def _encoder(**kw):
  from disentangle.nn import networks  # pylint: disable=g-import-not-at-top
  return networks.Encoder(latent_dim=3, extra_outputs=4, **kw)


def test_trunk_gives_the_hidden_features_the_heads_read():
  from disentangle.nn import networks  # pylint: disable=g-import-not-at-top
  x = np.random.default_rng(0).random((2, 32, 32, 1)).astype(np.float32)
  enc = _encoder()
  params = jax.jit(enc.init)(jax.random.key(0), x)["params"]  # one program each, not one per op
  assert sorted(params) == ["conv0", "conv1", "conv2", "extra", "fc", "head"]
  mean, logvar, extra, h = jax.jit(enc.apply, static_argnames="return_hidden")(
      {"params": params}, x, return_hidden=True)
  h_trunk = jax.jit(networks.Trunk().apply)({"params": params}, x)
  np.testing.assert_array_equal(np.asarray(h), np.asarray(h_trunk))
  # The heads are plain dense layers on h (an independent recomputation).
  out = h @ params["head"]["kernel"] + params["head"]["bias"]
  assert_close(jnp.concatenate([mean, logvar], -1), out)
  assert_close(extra, h @ params["extra"]["kernel"] + params["extra"]["bias"])
  assert h.shape == (2, 256)


def test_encoder_widths_hidden_units_and_leaky_activation():
  x = (np.random.default_rng(1).random((2, 32, 32, 1)) - 0.5).astype(np.float32)
  p = jax.eval_shape(_encoder(widths="dupont", hidden_units=128).init, jax.random.key(0),
                     x)["params"]
  assert [p[f"conv{i}"]["kernel"].shape[-1] for i in range(3)] == [32, 64, 64]
  assert p["fc"]["kernel"].shape[-1] == 128
  cascade = jax.jit(_encoder().init)(jax.random.key(0), x)["params"]
  assert [cascade[f"conv{i}"]["kernel"].shape[-1] for i in range(3)] == [32, 32, 64]
  # Leaky ReLU on the last two trunk layers: h has negative entries of slope 0.1, and equals the
  # recomputation with ReLU after conv0, conv1 and leaky_relu after conv2 and fc.
  leaky = _encoder(activation="leaky_relu", leaky_slope=0.1, activation_last=2)
  _, _, _, h = jax.jit(leaky.apply, static_argnames="return_hidden")(
      {"params": cascade}, x, return_hidden=True)

  @jax.jit
  def recomputed(a):
    for i in range(3):
      a = nn.Conv(cascade[f"conv{i}"]["kernel"].shape[-1], (4, 4), strides=(2, 2),
                  padding="SAME").apply({"params": cascade[f"conv{i}"]}, a)
      a = jax.nn.relu(a) if i < 2 else jax.nn.leaky_relu(a, 0.1)
    return jax.nn.leaky_relu(a.reshape(2, -1) @ cascade["fc"]["kernel"] + cascade["fc"]["bias"],
                             0.1)
  assert_close(h, recomputed(x))
  assert float(jnp.min(h)) < 0
