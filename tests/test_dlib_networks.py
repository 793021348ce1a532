"""disentanglement_lib's networks (``model.architecture='dlib'``), TensorFlow's default initialisers
(``model.init='tensorflow'``, ``factorvae.disc_init='tensorflow'``), against its
``methods/shared/architectures.py`` written out by hand and TensorFlow's layer semantics in numpy."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disentangle.methods import discriminator as disc_lib
from disentangle.nn import networks

M = 10  # encoder.num_latent of the study (model_configs/shared.gin)

# disentanglement_lib methods/shared/architectures.py, conv_encoder (lines 166-205) on 64x64x1:
# e1 conv 4x4 1->32, e2 conv 4x4 32->32, e3 conv 2x2 32->64, e4 conv 2x2 64->64 (all stride 2,
# SAME: 64 -> 32 -> 16 -> 8 -> 4), flatten 4*4*64 = 1024, e5 dense 1024->256, means and log_var
# dense 256->10 each. Parameters (kernel + bias):
#   e1 4*4*1*32 + 32 = 544; e2 4*4*32*32 + 32 = 16,416; e3 2*2*32*64 + 64 = 8,256;
#   e4 2*2*64*64 + 64 = 16,448; e5 1024*256 + 256 = 262,400; means, log_var 256*10 + 10 = 2,570 each
#   total 544 + 16,416 + 8,256 + 16,448 + 262,400 + 2 * 2,570 = 309,204.
ENCODER_KERNELS = {"conv0": (4, 4, 1, 32), "conv1": (4, 4, 32, 32), "conv2": (2, 2, 32, 64),
                   "conv3": (2, 2, 64, 64), "fc": (1024, 256), "means": (256, M),
                   "log_var": (256, M)}
ENCODER_PARAMS = 309_204
# deconv_decoder (lines 252-288): dense 10->256, dense 256->1024, reshape 4x4x64, transposed convs
# 4x4 stride 2 SAME 64->64, 64->32, 32->32, 32->1 (4 -> 8 -> 16 -> 32 -> 64):
#   10*256 + 256 = 2,816; 256*1024 + 1024 = 263,168; 4*4*64*64 + 64 = 65,600;
#   4*4*64*32 + 32 = 32,800; 4*4*32*32 + 32 = 16,416; 4*4*32*1 + 1 = 513; total 381,313.
DECODER_KERNELS = {"fc0": (M, 256), "fc1": (256, 1024), "deconv0": (4, 4, 64, 64),
                   "deconv1": (4, 4, 64, 32), "deconv2": (4, 4, 32, 32), "logits": (4, 4, 32, 1)}
DECODER_PARAMS = 381_313
# fc_discriminator (lines 310-317) on 10 latents: six dense 1000 (leaky ReLU), dense 2:
#   10*1000 + 1000 = 11,000; 5 * (1000*1000 + 1000) = 5,005,000; 1000*2 + 2 = 2,002;
#   total 5,018,002.
DISCRIMINATOR_PARAMS = 5_018_002
# (disentanglement_lib's own functions under TensorFlow 1.15.5 create trainable variables of these
# shapes and totals: 309,204 under encoder/, 381,313 under decoder/, 5,018,002 under
# discriminator/.)


def _count(tree) -> int:
  return sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(tree))


def _dlib_nets(init="tensorflow", conv_impl="flax"):
  enc = networks.Encoder(latent_dim=M, architecture="dlib", init_scheme=init, conv_impl=conv_impl)
  dec = networks.Decoder(image_shape=(64, 64, 1), architecture="dlib", init_scheme=init,
                         conv_impl=conv_impl)
  return enc, dec


@pytest.fixture(scope="module")
def params():
  enc, dec = _dlib_nets()
  return (jax.jit(enc.init)(jax.random.key(0), jnp.zeros((1, 64, 64, 1)))["params"],
          jax.jit(dec.init)(jax.random.key(1), jnp.zeros((1, M)))["params"])


def test_layer_shapes_and_parameter_counts_are_disentanglement_libs(params):
  enc_p, dec_p = params
  assert {k: v["kernel"].shape for k, v in enc_p.items()} == ENCODER_KERNELS
  assert {k: v["kernel"].shape for k, v in dec_p.items()} == DECODER_KERNELS
  assert _count(enc_p) == ENCODER_PARAMS and _count(dec_p) == DECODER_PARAMS
  # Shapes only (`jax.eval_shape`): the values are the next test's.
  disc = disc_lib.Discriminator(init_scheme="tensorflow")
  assert _count(jax.eval_shape(disc.init, jax.random.key(2), jnp.zeros((1, M)))) == \
      DISCRIMINATOR_PARAMS
  # the shared network differs only in the third and fourth kernels and the joint head
  cascade = jax.eval_shape(networks.Encoder(latent_dim=M).init, jax.random.key(0),
                           jnp.zeros((1, 64, 64, 1)))
  assert cascade["params"]["conv2"]["kernel"].shape == (4, 4, 32, 64)
  assert cascade["params"]["head"]["kernel"].shape == (256, 2 * M)


def _glorot_bound(kernel) -> float:
  """TensorFlow's glorot_uniform_initializer: limit sqrt(6 / (fan_in + fan_out)), fans counted
  as in its ``_compute_fans``: receptive field size times the last two dimensions."""
  receptive = int(np.prod(kernel.shape[:-2])) if kernel.ndim > 2 else 1
  return float(np.sqrt(6.0 / (receptive * (kernel.shape[-2] + kernel.shape[-1]))))


def _check_glorot_and_zero_biases(tree):
  for name, layer in tree.items():
    kernel, bias = np.asarray(layer["kernel"], np.float64), np.asarray(layer["bias"])
    bound = _glorot_bound(kernel)
    assert np.all(bias == 0), name
    assert np.abs(kernel).max() <= bound, name
    if kernel.size >= 500:  # n uniform draws: max |w| >= bound (1 - 5/n) fails with p ~ e^-5
      assert np.abs(kernel).max() >= bound * (1 - 5 / kernel.size), name
    if kernel.size >= 10_000:  # var of U(-b, b) = b^2 / 3; the estimate's sd is ~ 0.9 / sqrt(n)
      assert abs(kernel.var() / (bound**2 / 3) - 1) < 10 / np.sqrt(kernel.size), name


def test_tensorflow_init_is_glorot_uniform_with_zero_biases(params):
  enc_p, dec_p = params
  _check_glorot_and_zero_biases(enc_p)
  _check_glorot_and_zero_biases(dec_p)
  # a head of its own: fan-out m (bound 0.1502), not the joint head's 2 m (0.1474)
  means = np.abs(np.asarray(enc_p["means"]["kernel"]))
  assert means.max() > np.sqrt(6 / (256 + 2 * M))
  # The discriminator's layers, 300 wide (the study's 1000 only take longer to draw).
  hidden = 300
  init = lambda module: jax.jit(module.init)(jax.random.key(3), jnp.zeros((1, M)))
  disc = init(disc_lib.Discriminator(hidden, 2, init_scheme="tensorflow"))
  _check_glorot_and_zero_biases(disc["params"])
  # the default discriminator keeps Flax's LeCun normal: unbounded, std sqrt(1 / fan_in)
  flax_disc = init(disc_lib.Discriminator(hidden, 2))
  k = np.asarray(flax_disc["params"]["fc1"]["kernel"])
  assert abs(k.std() * np.sqrt(hidden) - 1) < 0.02 and np.abs(k).max() > _glorot_bound(k)


# --- TensorFlow's layers in numpy (NHWC; tf.layers.conv2d / conv2d_transpose, padding 'same') ---
def _tf_same_pads(size_in, size_out, k, s):
  total = max((size_out - 1) * s + k - size_in, 0)
  return total // 2, total - total // 2


def _tf_conv2d(x, kernel, bias, s=2):
  """tf.nn.conv2d SAME: out = ceil(in / s), pad_before = total // 2; kernel (k, k, in, out)."""
  k, n = kernel.shape[0], x.shape[1]
  out = -(-n // s)
  lo, hi = _tf_same_pads(n, out, k, s)
  xp = np.pad(x, ((0, 0), (lo, hi), (lo, hi), (0, 0)))
  y = np.zeros((x.shape[0], out, out, kernel.shape[-1]))
  for a in range(k):
    for b in range(k):
      y += xp[:, a:a + s * out:s, b:b + s * out:s, :] @ kernel[a, b]
  return y + bias


def _tf_conv2d_transpose(x, kernel_tf, bias, s=2):
  """tf.nn.conv2d_transpose SAME (the gradient of the SAME conv from out = in * s to in): each
  input pixel i scatters x[i] W[t] to output i * s + t - pad_before; kernel (k, k, out, in)."""
  k, n = kernel_tf.shape[0], x.shape[1]
  out = n * s
  lo, _ = _tf_same_pads(out, n, k, s)
  y = np.zeros((x.shape[0], out + 2 * k, out + 2 * k, kernel_tf.shape[2]))
  for a in range(k):
    for b in range(k):
      contrib = x @ kernel_tf[a, b].T  # [B, n, n, out]
      y[:, k + a - lo:k + a - lo + s * n:s, k + b - lo:k + b - lo + s * n:s, :] += contrib
  return y[:, k:k + out, k:k + out, :] + bias


def _dense(h, layer):
  return h @ np.asarray(layer["kernel"], np.float64) + np.asarray(layer["bias"], np.float64)


def _relu(h):
  return np.maximum(h, 0)


def _dlib_encoder(p, x):
  """conv_encoder (architectures.py lines 166-206) in numpy."""
  h = x
  for name in ("conv0", "conv1", "conv2", "conv3"):
    h = _relu(_tf_conv2d(h, np.asarray(p[name]["kernel"], np.float64), p[name]["bias"]))
  h = _relu(_dense(h.reshape(len(h), -1), p["fc"]))
  return _dense(h, p["means"]), _dense(h, p["log_var"])


def _dlib_decoder(p, z):
  """deconv_decoder (lines 252-288) in numpy, with TensorFlow's transposed kernel: Flax's
  ConvTranspose kernel (k, k, in, out) correlates the dilated input, TensorFlow's (k, k, out, in)
  scatters it, so the same layer has TensorFlow's kernel = Flax's flipped in space, axes swapped."""
  h = _relu(_dense(_relu(_dense(z, p["fc0"])), p["fc1"])).reshape(len(z), 4, 4, 64)
  for name in ("deconv0", "deconv1", "deconv2", "logits"):
    kernel_tf = np.asarray(p[name]["kernel"], np.float64)[::-1, ::-1].transpose(0, 1, 3, 2)
    h = _tf_conv2d_transpose(h, kernel_tf, np.asarray(p[name]["bias"], np.float64))
    h = h if name == "logits" else _relu(h)
  return h


@pytest.mark.parametrize("conv_impl", ["flax", "fast"])
def test_forward_equals_tensorflows_layers_in_numpy(params, conv_impl):
  enc, dec = _dlib_nets(conv_impl=conv_impl)
  enc_p, dec_p = params
  # non-zero biases, so that a misplaced bias or padding shows
  rng = np.random.default_rng(0)
  enc_p, dec_p = jax.tree_util.tree_map(lambda a: np.asarray(a) + 0.05 * rng.normal(
      size=a.shape).astype(np.float32), (enc_p, dec_p))  # in numpy: no program per shape
  x = rng.random((3, 64, 64, 1)).astype(np.float32)
  mean, logvar = jax.jit(enc.apply)({"params": enc_p}, x)  # one program, not one per operation
  ref_mean, ref_logvar = _dlib_encoder(enc_p, x.astype(np.float64))
  np.testing.assert_allclose(mean, ref_mean, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(logvar, ref_logvar, rtol=1e-4, atol=1e-4)
  z = rng.normal(size=(3, M)).astype(np.float32)
  logits = jax.jit(dec.apply)({"params": dec_p}, z)
  assert logits.shape == (3, 64, 64, 1)
  np.testing.assert_allclose(logits, _dlib_decoder(dec_p, z.astype(np.float64)), rtol=1e-4,
                             atol=1e-4)


def test_dlib_architecture_takes_64_pixel_images_only():
  enc = networks.Encoder(latent_dim=M, architecture="dlib")
  with pytest.raises(ValueError, match="64x64"):
    enc.init(jax.random.key(0), jnp.zeros((1, 32, 32, 1)))
