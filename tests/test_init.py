"""Initial standard deviations per layer under model.init='reference' (the authors' TF code).

Expected: He (variance scaling 2.0, fan-in) for convs with TensorFlow's fan-in, which for a
``conv2d_transpose`` kernel stored (h, w, out, in) is h*w*out; Glorot-uniform for dense layers
(std sqrt(2 / (fan_in + fan_out))); zero biases. 'reference_flax_fan' counts the transposed
convs' fan-in over their inputs (h*w*in). The tolerance (12%) is 4 standard errors of a sample
std over the smallest kernel (512 entries); the two conventions differ by 2-6x on the last layer.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disentangle.nn import networks

TOL = 0.12


def _decoder_params(init, size):
  dec = networks.Decoder(image_shape=(size, size, 1), init_scheme=init, conv_impl="fast")
  return jax.jit(dec.init)(jax.random.PRNGKey(1), jnp.zeros((1, 10)))["params"]


@pytest.mark.slow
@pytest.mark.parametrize("size", [64, 32])
@pytest.mark.parametrize("init", ["reference", "reference_flax_fan"])
def test_decoder_initial_stds(init, size):
  params = _decoder_params(init, size)
  widths = list(networks.DECODER_WIDTHS[size]) + [1]
  cin = networks.BOTTLENECK[-1]
  names = [f"deconv{i}" for i in range(len(widths) - 1)] + ["logits"]
  for name, cout in zip(names, widths):
    kernel = np.asarray(params[name]["kernel"])
    assert kernel.shape == (4, 4, cin, cout)
    fan_in = 16 * (cout if init == "reference" else cin)
    np.testing.assert_allclose(kernel.std(), np.sqrt(2.0 / fan_in), rtol=TOL, err_msg=name)
    assert np.abs(kernel).max() <= 2 * np.sqrt(2.0 / fan_in) / 0.8796 + 1e-6  # truncated at 2 sigma
    np.testing.assert_array_equal(np.asarray(params[name]["bias"]), 0.0)
    cin = cout
  for name in ("fc0", "fc1"):
    kernel = np.asarray(params[name]["kernel"])
    np.testing.assert_allclose(kernel.std(), np.sqrt(2.0 / sum(kernel.shape)), rtol=TOL)


def test_encoder_convs_use_input_fan_in():
  enc = networks.Encoder(latent_dim=6, init_scheme="reference", conv_impl="fast")
  params = jax.jit(enc.init)(jax.random.PRNGKey(2), jnp.zeros((1, 64, 64, 1)))["params"]
  convs = sorted(k for k in params if k.startswith("conv"))
  assert len(convs) == 4
  for name in convs:
    kernel = np.asarray(params[name]["kernel"])
    fan_in = 16 * kernel.shape[2]
    rtol = TOL if kernel.size >= 512 else 0.25  # conv0 (1 -> 32) has 512 entries
    np.testing.assert_allclose(kernel.std(), np.sqrt(2.0 / fan_in), rtol=rtol, err_msg=name)
