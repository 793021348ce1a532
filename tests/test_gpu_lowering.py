"""`benchmarks.gpu_lowering`: XLA:GPU's convolution rules read from a lowered program, and
the dSprites CascadeVAE step as a GPU gets it, with no zero-stuffed convolution."""
from __future__ import annotations

import jax
from jax import lax
import jax.numpy as jnp
import pytest

from benchmarks import gpu_lowering
from disentangle import config as config_lib


def _read(fn, *shapes):
  args = [jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes]
  return gpu_lowering.read(jax.jit(fn).lower(*args).as_text(dialect="hlo"))


def _transpose_conv(x, k):  # nn.ConvTranspose's lowering: input-dilated, kernel not reversed
  return lax.conv_transpose(x, k, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _strided_conv(x, k):
  return lax.conv_general_dilated(x, k, (2, 2), "SAME",
                                  dimension_numbers=("NHWC", "HWIO", "NHWC"))


def test_transposed_convolution_is_zero_stuffed_with_closed_form_counts():
  """A 4x4 stride-2 transposed convolution [1, 4, 4, 3] -> [1, 8, 8, 5]: the GPU multiplies the
  stuffed input in full, 64 outputs x 16 taps x 3 x 5; the layer's own products are 16 input
  pixels x 16 taps x 3 x 5, a quarter."""
  reading = _read(_transpose_conv, (1, 4, 4, 3), (4, 4, 3, 5))
  (conv,) = reading.convolutions
  assert conv.kind == gpu_lowering.FORWARD and conv.zero_stuffed
  assert conv.executed_macs == 64 * 16 * 3 * 5
  assert conv.useful_macs == 16 * 16 * 3 * 5
  assert reading.dot_macs == 0


def test_gradients_of_one_strided_convolution_match_cudnn_backward_kernels():
  """Without feature groups, the input gradient of a stride-2 convolution (input-dilated, kernel
  reversed) is a cuDNN backward-input kernel and its kernel gradient (kernel-dilated) a
  backward-filter one (its 8x8 "kernel" larger than its 4x4 output, unlike a forward
  convolution's): nothing stuffed. Under vmap over 2 runs (grouped) neither matches."""
  def loss(x, k):
    return jnp.sum(jnp.sin(_strided_conv(x, k)))
  grads = jax.grad(loss, argnums=(0, 1))
  single = _read(grads, (2, 16, 16, 3), (4, 4, 3, 4))
  kinds = sorted(c.kind for c in single.convolutions)
  assert kinds == [gpu_lowering.BACKWARD_FILTER, gpu_lowering.BACKWARD_INPUT,
                   gpu_lowering.FORWARD]
  assert not single.zero_stuffed
  runs = _read(jax.vmap(grads), (2, 2, 16, 16, 3), (2, 4, 4, 3, 4))
  assert all(c.kind == gpu_lowering.FORWARD for c in runs.convolutions)
  assert len(runs.zero_stuffed) == 2
  assert all(c.groups == 2 for c in runs.convolutions)


def test_a_called_computation_counts_each_time_it_runs():
  """Dots inside a nested jit called twice count twice (2 x 4 x 8 x 16 multiply-adds)."""
  inner = jax.jit(lambda a, b: a @ b)
  reading = _read(lambda a, b: inner(a, b) + inner(a + 1, b), (4, 8), (8, 16))
  assert reading.dot_macs == 2 * 4 * 8 * 16


def _step_reading(conv_impl, phase, runs=2):
  from experiments.configs import dsprites_cascade  # pylint: disable=g-import-not-at-top
  config = dsprites_cascade.get_config("m6")
  with config.unlocked():
    config.model.conv_impl = conv_impl
  return gpu_lowering.read(gpu_lowering.lower_step(config, (64, 64, 1), runs, phase))


@pytest.mark.slow
def test_dsprites_step_as_a_gpu_gets_it_has_no_zero_stuffed_convolution():
  """dSprites CascadeVAE m6, 2 runs vmapped, before and after t_d, with the GPU's 'auto'
  settings: no convolution runs over a stuffed operand, and what the GPU executes is at most
  1.15x the layers' own multiply-adds (counted on Flax's lowering without its stuffed zeros).
  Flax's layers, the negative control, stuff 3x as much."""
  assert config_lib.resolve("model.conv_impl", "auto", backend="gpu") != "flax"
  for phase in (False, True):
    gpu, flax = _step_reading("auto", phase), _step_reading("flax", phase)
    assert not gpu.zero_stuffed, [c.name for c in gpu.zero_stuffed]
    assert len(flax.zero_stuffed) >= 15
    assert gpu.executed_flops <= 1.15 * flax.useful_flops
    assert flax.executed_flops >= 2.5 * flax.useful_flops
