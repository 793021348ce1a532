"""Convolution layers of the conv VAEs: Flax's, and exact rewrites that run faster per backend.

The networks pick their layers with a config option ``conv_impl`` in `CONV_IMPLS` through `conv`
and `conv_transpose`; every implementation has identical parameters (names, shapes, initialisers,
init rng use), so checkpoints and ``init`` results are interchangeable, and the same outputs up to
float rounding (~1e-6 relative in float32; tested against the Flax layers). Each ``conv_impl``
names its pair of layers (strided convolution, transposed convolution):

- ``'flax'``: ``nn.Conv``, ``nn.ConvTranspose``.
- ``'fast'``: `FastConv`, `FastConvTranspose` (`fast_conv`, `fast_conv_transpose`): the rewrites
  that XLA:CPU differentiates fast.
- ``'gemm'``: `GemmConv`, `GemmConvTranspose` (`gemm_conv`, `gemm_conv_transpose`): the layers'
  products as batched matmuls, for accelerators.

``'flax'`` is the reference the other forms are tested against.

The phases. ``lax.conv_transpose(x, W, (2, 2), 'SAME')`` (what ``nn.ConvTranspose`` calls) with a
4x4 kernel dilates the input by 2, pads it by (2, 2) and correlates it with the kernel as stored.
Along one spatial axis, with x out of range read as zero, this gives for a in {0, 1}

    y[2j + a] = sum_{u in {0, 1}} x[j + a + u - 1] * W[2u + a],

so output *phase* a is a stride-1 correlation of x, padded by (1 - a, a), with the 2-tap kernel
W[a::2]. In 2D, phase (a, b) uses ``kernel[a::2, b::2]`` with padding ((1 - a, a), (1 - b, b)),
for every input size (the output is always twice the input): the sub-pixel or polyphase
decomposition. The strided convolution's input splits the same way into the four phases of its
2x2 pixel blocks (`space_to_depth_conv`). "Phase" means one of these four everywhere here.

``'fast'`` (details in each function's docstring):

- `FastConvTranspose`: XLA's CPU backend computes the kernel gradient of ``lax.conv_transpose``
  very slowly. `fast_conv_transpose` computes the four phases as stride-1 2x2 convolutions,
  interleaved, which XLA differentiates quickly. Its forward is one wide 2x2 convolution to all
  four phases (`wide_phase_conv_transpose`, same gradient); with at most 4 output channels (the
  decoder's last layer) `col2im_conv_transpose` instead does one matmul to all 16 kernel taps
  and sums shifted taps.
- `FastConv`: the same forward as ``nn.Conv`` (with at most 4 input channels, the encoder's first
  layer, computed as `space_to_depth_conv`), and the input gradient by `fast_conv_transpose`
  instead of XLA's slow lhs-dilated convolution.
- `add_bias`: both layers add their bias with a bias gradient computed as a matmul.

For 32 or more input channels the encoder's convolutions keep ``lax.conv``'s forward: the
space-to-depth rewrite is slower there. ``python -m benchmarks.conv_layers`` times each layer,
flax against fast; the timings are in ``benchmarks/README.md`` ("The train step: fast layers"),
the formulations that were not kept in ``benchmarks/HISTORY.md`` ("Fast convolution layers").

``'gemm'`` (accelerators): every product of the forward *and* backward pass is a matmul, so no
operand is ever dilated. XLA:GPU runs a convolution with
an input (lhs) or kernel (rhs) dilation -- the forward of ``nn.ConvTranspose``, the input and
kernel gradients of a stride-2 ``nn.Conv`` -- as a forward convolution over an explicitly
zero-stuffed operand whenever it cannot match a cuDNN backward kernel, which it never can for
grouped convolutions, i.e. for N runs under ``vmap`` (XLA's ``conv_rewriter`` and
``conv_padding_legalization``; `benchmarks.gpu_lowering` reads a lowered step by those rules).
The encoder's convolution is `space_to_depth_conv` (a stride-1 2x2 convolution over 2x2 pixel
blocks) as patches times kernels (`gemm_conv`) and the decoder's transposed convolution its four
phases, the same way (`gemm_conv_transpose`): a GEMM per run under ``vmap``, exactly the
multiply-adds of the layer and nothing over zeros; with at most 4 output channels the transposed
convolution is `col2im_conv_transpose` (one matmul to all 16 taps).
"""
from __future__ import annotations

import functools
from typing import Any

import flax.linen as nn
from flax.linen import dtypes
from flax.linen import initializers
from flax.linen.linear import default_kernel_init
import jax
from jax import lax
import jax.numpy as jnp

from disentangle import config as config_lib

Array = Any
Dtype = Any
Initializer = Any
PrecisionLike = Any

CONV_IMPLS = config_lib.CONV_IMPLS
KERNEL_SIZE = (4, 4)
STRIDES = (2, 2)
_DIMENSION_NUMBERS = ("NHWC", "HWIO", "NHWC")
# At or below this many output channels `col2im_conv_transpose` (one matmul to all 16 taps, then
# shifted sums) beats four 2x2 convolutions with few output channels each.
_MAX_FEATURES_COL2IM = 4


def _interleave(phases: dict[tuple[int, int], Array]) -> Array:
  """Four [N, H, W, C] phases -> [N, 2H, 2W, C]: pixel (2i + a, 2j + b) = phases[a, b][i, j]."""
  n, h, w, c = phases[0, 0].shape
  rows = [jnp.stack([phases[a, 0], phases[a, 1]], axis=3) for a in (0, 1)]  # [N, H, W, 2, C]
  return jnp.stack(rows, axis=2).reshape(n, 2 * h, 2 * w, c)  # [N, H, 2, W, 2, C]


def fast_conv_transpose(inputs: Array, kernel: Array,
                        precision: PrecisionLike = None) -> Array:
  """``lax.conv_transpose(inputs, kernel, (2, 2), 'SAME')`` for a 4x4 kernel, without bias, in
  the form XLA:CPU differentiates fast (``conv_impl='fast'``).

  With at most 4 output channels (the decoder's last layer) it is computed by
  `col2im_conv_transpose`, else by `wide_phase_conv_transpose` (forward: one wide 2x2
  convolution to all four phases; VJP: the four phases' stride-1 convolutions (module
  docstring), which XLA:CPU differentiates far faster than ``lax.conv_transpose``).

  Args:
    inputs: [N, H, W, in] input.
    kernel: [4, 4, in, out] kernel, as stored by ``nn.ConvTranspose``.
    precision: ``lax`` precision of the convolutions.

  Returns:
    [N, 2H, 2W, out] output.
  """
  if kernel.shape[:2] != KERNEL_SIZE:
    raise ValueError(f"kernel must be 4x4 [4, 4, in, out], got shape {kernel.shape}")
  features = kernel.shape[-1]
  if features <= _MAX_FEATURES_COL2IM:
    return col2im_conv_transpose(inputs, kernel, precision)
  return wide_phase_conv_transpose(inputs, kernel, precision)


def _four_phase_convs(inputs: Array, kernel: Array, precision: PrecisionLike) -> Array:
  """The transposed convolution as its four phases' stride-1 2x2 convolutions, interleaved."""
  phases = {}
  for a in (0, 1):
    for b in (0, 1):
      phases[a, b] = lax.conv_general_dilated(
          inputs, kernel[a::2, b::2], (1, 1), ((1 - a, a), (1 - b, b)),
          dimension_numbers=_DIMENSION_NUMBERS, precision=precision)
  return _interleave(phases)


def _wide_phase_conv(inputs: Array, kernel: Array, precision: PrecisionLike) -> Array:
  """The transposed convolution as ONE 2x2 convolution to all four phases, then slices.

  With the input padded by 1 on every side, z[p, q, (a, b, c)] = sum_{u, v} xpad[p + u, q + v]
  W[2u + a, 2v + b, :, c] (a 2x2 VALID convolution to 4 * out channels, the kernel regrouped to
  [u, v, in, (a, b, out)]), and phase (a, b) at (i, j) is z[i + a, j + b, (a, b)]: by the
  phases' mapping (module docstring), y[2i + a] sums x[i + a + u - 1] = xpad[i + a + u].
  """
  n, h, w, cin = inputs.shape
  cout = kernel.shape[-1]
  wide = kernel.reshape(2, 2, 2, 2, cin, cout).transpose(0, 2, 4, 1, 3, 5).reshape(
      2, 2, cin, 4 * cout)
  z = lax.conv_general_dilated(inputs, wide, (1, 1), ((1, 1), (1, 1)),
                               dimension_numbers=_DIMENSION_NUMBERS, precision=precision)
  z = z.reshape(n, h + 1, w + 1, 2, 2, cout)
  return _interleave({(a, b): z[:, a:a + h, b:b + w, a, b] for a in (0, 1) for b in (0, 1)})


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def wide_phase_conv_transpose(inputs: Array, kernel: Array,
                              precision: PrecisionLike = None) -> Array:
  """`fast_conv_transpose` (features > 4): forward by `_wide_phase_conv`, VJP by four convolutions.

  The single wide convolution contracts over 4 * in inputs into 4 * out outputs, a better shape
  for XLA:CPU's convolution than four convolutions to out channels each, for 1.13x the
  multiply-adds at 16x16 (the padding ring); its kernel gradient is pathological in XLA, so the
  VJP is that of `_four_phase_convs` (whose forward XLA drops as unused).
  """
  return _wide_phase_conv(inputs, kernel, precision)


def _wide_fwd(inputs, kernel, precision):
  return _wide_phase_conv(inputs, kernel, precision), (inputs, kernel)


def _wide_bwd(precision, residuals, g):
  inputs, kernel = residuals
  _, vjp = jax.vjp(lambda x, k: _four_phase_convs(x, k, precision), inputs, kernel)
  return vjp(g)


wide_phase_conv_transpose.defvjp(_wide_fwd, _wide_bwd)


def _taps(kernel: Array) -> Array:
  """[4, 4, in, out] -> [in, 16 * out], columns ordered (kh, kw, out)."""
  cin, cout = kernel.shape[2], kernel.shape[3]
  return kernel.transpose(2, 0, 1, 3).reshape(cin, 16 * cout)


def _untaps(taps: Array, cout: int) -> Array:
  """Inverse of `_taps`: [in, 16 * out] -> [4, 4, in, out]."""
  return taps.reshape(taps.shape[0], 4, 4, cout).transpose(1, 2, 0, 3)


def _col2im(t: Array, cout: int) -> Array:
  """[N, H, W, (4, 4, out)] tap products -> [N, 2H, 2W, out] transposed-convolution output.

  With t[i, kh] = x[i] W[kh] (one axis shown), the phases' mapping (module docstring)
  y[2j + a] = sum_u x[j + a + u - 1] W[2u + a] reads t at row j + a + u - 1, tap 2u + a.
  """
  n, h, w, _ = t.shape
  t = jnp.pad(t.reshape(n, h, w, 4, 4, cout), ((0, 0), (1, 1), (1, 1), (0, 0), (0, 0), (0, 0)))
  phases = {}
  for a in (0, 1):
    for b in (0, 1):
      phases[a, b] = sum(t[:, a + u:a + u + h, b + v:b + v + w, 2 * u + a, 2 * v + b]
                         for u in (0, 1) for v in (0, 1))
  return _interleave(phases)


def _col2im_adjoint(g: Array, h: int, w: int) -> Array:
  """Adjoint of `_col2im`: [N, 2H, 2W, out] -> [N, H, W, (4, 4, out)].

  Output row 2j + a took tap kh = 2u + a of row i = j + a + u - 1, i.e. row i's tap kh went to
  output row 2i + 2 - kh; so dt[i, kh] = g[2i + 2 - kh] (zero outside), a stride-2 slice of g
  padded by (1, 2) starting at 3 - kh.
  """
  n, cout = g.shape[0], g.shape[-1]
  gp = jnp.pad(g, ((0, 0), (1, 2), (1, 2), (0, 0)))
  cols = [gp[:, 3 - kh:3 - kh + 2 * h:2, 3 - kw:3 - kw + 2 * w:2, :]
          for kh in range(4) for kw in range(4)]
  return jnp.stack(cols, axis=3).reshape(n, h, w, 16 * cout)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def col2im_conv_transpose(inputs: Array, kernel: Array, precision: PrecisionLike = None) -> Array:
  """The transposed convolution for few output channels: one matmul to all 16 taps, then col2im.

  t = x @ W reshaped [in, 16 * out] holds every input pixel's contribution to each of the 16
  kernel taps; the output sums four of them per pixel (`_col2im`), exactly the transposed
  convolution. Few output channels make a convolution a poor fit for XLA:CPU, while a matmul with
  16 * out columns stays fast; with many output channels t (16x the output) makes it slower than
  convolutions, hence `_MAX_FEATURES_COL2IM`. The VJP is written out (autodiff of the shifted sums
  is much slower): dt = `_col2im_adjoint`(g) (strided slices of g), dx = dt W^T, dW = x^T dt, both
  matmuls.
  """
  return _col2im_forward(inputs, kernel, precision)


def _col2im_forward(inputs: Array, kernel: Array, precision: PrecisionLike) -> Array:
  return _col2im(jnp.matmul(inputs, _taps(kernel), precision=precision), kernel.shape[-1])


def _col2im_fwd(inputs, kernel, precision):
  return _col2im_forward(inputs, kernel, precision), (inputs, kernel)


def _col2im_bwd(precision, residuals, g):
  inputs, kernel = residuals
  _, h, w, cin = inputs.shape
  dt = _col2im_adjoint(g, h, w)
  grad_inputs = jnp.matmul(dt, _taps(kernel).T, precision=precision)
  grad_taps = jnp.matmul(inputs.reshape(-1, cin).T, dt.reshape(-1, dt.shape[-1]),
                         precision=precision)
  return grad_inputs.astype(inputs.dtype), _untaps(grad_taps, kernel.shape[-1]).astype(kernel.dtype)


col2im_conv_transpose.defvjp(_col2im_fwd, _col2im_bwd)


def _phase_crops(inputs: Array) -> list[Array]:
  """The inputs of the four output phases of the transposed convolution, in (a, b) order.

  With x padded by 1 on every side, phase (a, b) at (i, j) sums xpad[i + a + u, j + b + v]
  W[2u + a, 2v + b] over u, v in {0, 1} (the mapping of the module docstring): a 2x2 VALID
  convolution of the crop xpad[a:a + H + 1, b:b + W + 1] with ``kernel[a::2, b::2]``.
  """
  _, h, w, _ = inputs.shape
  xpad = jnp.pad(inputs, ((0, 0), (1, 1), (1, 1), (0, 0)))
  return [xpad[:, a:a + h + 1, b:b + w + 1] for a in (0, 1) for b in (0, 1)]


_PHASES = tuple((a, b) for a in (0, 1) for b in (0, 1))


def gemm_conv_transpose(inputs: Array, kernel: Array, precision: PrecisionLike = None) -> Array:
  """The transposed convolution as a batched matmul over the four phases: each phase's 2x2 patches
  [N, H, W, 4 in] (`_phase_crops`, `_shifted_patches`) times its kernel [4 in, out], then
  interleaved. Exactly the layer's multiply-adds; gradients are matmuls, pads and slices."""
  _, h, w, cin = inputs.shape
  cout = kernel.shape[-1]
  patches = jnp.stack([_shifted_patches(c, h, w) for c in _phase_crops(inputs)])
  k = jnp.stack([kernel[a::2, b::2].reshape(4 * cin, cout) for a, b in _PHASES])
  y = jnp.einsum("gnhwk,gko->gnhwo", patches, k, precision=precision)
  return _interleave({ab: y[g] for g, ab in enumerate(_PHASES)})


@jax.custom_vjp
def add_bias(y: Array, bias: Array) -> Array:
  """``y + bias`` over the last axis, with the bias gradient as a matmul ``1^T g``.

  With YNNPACK restricted to dots (`disentangle.train.host.compiler_options`), XLA:CPU turns the
  plain gradient (a sum over batch and space) into a slow tree of reduce-windows; this
  matrix-vector product goes through YNNPACK's dot instead.
  """
  return y + bias


def _add_bias_fwd(y, bias):
  return y + bias, bias


def _add_bias_bwd(bias, g):
  flat = g.reshape(-1, g.shape[-1])
  ones = jnp.ones((1, flat.shape[0]), flat.dtype)
  return g, (ones @ flat).reshape(bias.shape).astype(bias.dtype)


add_bias.defvjp(_add_bias_fwd, _add_bias_bwd)


class _Conv4x4(nn.Module):
  """A 4x4 stride-2 SAME layer with ``nn.Conv``'s / ``nn.ConvTranspose``'s parameters.

  'kernel' [4, 4, in, features] then 'bias' [features], created in that order with the same
  initialisers, so ``init`` with the same key gives identical trees. Subclasses define `_apply`.

  Attributes:
    features: number of output channels.
    use_bias: whether to add a bias.
    dtype: computation dtype (default: inferred from inputs and params).
    param_dtype: parameter dtype.
    precision: ``lax`` precision of the convolutions.
    kernel_init: kernel initialiser (flax's default: LeCun normal).
    bias_init: bias initialiser.
  """
  features: int
  use_bias: bool = True
  dtype: Dtype | None = None
  param_dtype: Dtype = jnp.float32
  precision: PrecisionLike = None
  kernel_init: Initializer = default_kernel_init
  bias_init: Initializer = initializers.zeros_init()

  def _apply(self, flat: Array, kernel: Array) -> Array:
    raise NotImplementedError

  def _add_bias(self, y: Array, bias: Array) -> Array:
    """XLA:CPU's fast bias gradient (`add_bias`); `GemmConv` and `GemmConvTranspose` add it
    plainly."""
    return add_bias(y, bias)

  @nn.compact
  def __call__(self, inputs: Array) -> Array:
    """[*batch, H, W, in] (or unbatched [H, W, in]) -> [*batch, H', W', features]."""
    batch_shape = inputs.shape[:-3]
    flat = inputs.reshape((-1,) + inputs.shape[-3:])
    kernel = self.param("kernel", self.kernel_init,
                        KERNEL_SIZE + (inputs.shape[-1], self.features), self.param_dtype)
    bias = (self.param("bias", self.bias_init, (self.features,), self.param_dtype)
            if self.use_bias else None)
    flat, kernel, bias = dtypes.promote_dtype(flat, kernel, bias, dtype=self.dtype)
    y = self._apply(flat, kernel)
    if bias is not None:
      y = self._add_bias(y, bias)
    return y.reshape(batch_shape + y.shape[1:])


class FastConvTranspose(_Conv4x4):
  """Drop-in for ``nn.ConvTranspose(features, (4, 4), strides=(2, 2), padding='SAME')``.

  Same parameters ('kernel' [4, 4, in, features] then 'bias' [features], created in that order
  with the same initialisers, so ``init`` with the same key gives identical trees) and the same
  output up to float rounding, computed by `fast_conv_transpose`: the four phases' stride-1 2x2
  convolutions, interleaved, which XLA:CPU differentiates faster (`benchmarks.conv_layers`).
  Attributes as `_Conv4x4`.
  """

  def _apply(self, flat: Array, kernel: Array) -> Array:
    """Upsamples [B, H, W, in] to [B, 2H, 2W, features]."""
    return fast_conv_transpose(flat, kernel, precision=self.precision)


def _lax_conv(inputs: Array, kernel: Array, precision: PrecisionLike) -> Array:
  """``nn.Conv``'s 4x4 stride-2 SAME convolution, as ``lax`` computes and differentiates it."""
  return lax.conv_general_dilated(inputs, kernel, STRIDES, "SAME",
                                  dimension_numbers=_DIMENSION_NUMBERS, precision=precision)


# At or below this many input channels `fast_conv`'s forward is `space_to_depth_conv`.
_MAX_IN_CHANNELS_SPACE_TO_DEPTH = 4


def _blocks(inputs: Array) -> Array:
  """[N, H, W, C] (even H, W) SAME-padded by 1 and regrouped into 2x2 pixel blocks:
  [N, H/2 + 1, W/2 + 1, (2, 2, C)]."""
  n, h, w, c = inputs.shape
  padded = jnp.pad(inputs, ((0, 0), (1, 1), (1, 1), (0, 0)))
  hb, wb = h // 2 + 1, w // 2 + 1
  return padded.reshape(n, hb, 2, wb, 2, c).transpose(0, 1, 3, 2, 4, 5).reshape(n, hb, wb, 4 * c)


def _block_kernel(kernel: Array) -> Array:
  """[4, 4, C, O] -> [2, 2, (2, 2, C), O]: tap (2p + r, 2q + s) is tap (p, q) of channel (r, s, c)."""
  c = kernel.shape[2]
  return kernel.reshape(2, 2, 2, 2, c, -1).transpose(0, 2, 1, 3, 4, 5).reshape(2, 2, 4 * c, -1)


def space_to_depth_conv(inputs: Array, kernel: Array, precision: PrecisionLike = None) -> Array:
  """`_lax_conv` (4x4, stride 2, SAME, even H and W) as a stride-1 2x2 VALID convolution.

  SAME pads (1, 1); the padded input [N, H+2, W+2, C] is regrouped into 2x2 pixel blocks
  [N, H/2+1, W/2+1, (2, 2, C)], and kernel tap (2p + r, 2q + s) becomes tap (p, q) of input
  channel (r, s, c). Exact (a reordering of the same sums). With few input channels this gives
  the convolution 4x the channels to contract over, which XLA:CPU runs faster (the encoder's
  first layer); with 32 input channels it is slower there, hence `_MAX_IN_CHANNELS_SPACE_TO_DEPTH`.
  Being stride 1, its input and kernel gradients are stride-1 convolutions too (no dilated
  operand); `gemm_conv` computes it as one matmul.
  """
  return lax.conv_general_dilated(_blocks(inputs), _block_kernel(kernel), (1, 1), "VALID",
                                  dimension_numbers=_DIMENSION_NUMBERS, precision=precision)


def _shifted_patches(x: Array, h: int, w: int) -> Array:
  """The 2x2 VALID patches of ``x`` [..., h + 1, w + 1, C]: [..., h, w, (2, 2, C)]."""
  return jnp.concatenate([x[..., p:p + h, q:q + w, :] for p in (0, 1) for q in (0, 1)], axis=-1)


def gemm_conv(inputs: Array, kernel: Array, precision: PrecisionLike = None) -> Array:
  """`space_to_depth_conv` as one matmul: 2x2 patches of the pixel blocks [N, H/2, W/2, 16 C]
  times the kernel [16 C, O] (the taps in (p, q, r, s, c) order on both sides). Under ``vmap``
  over runs a batched GEMM; its gradients are matmuls and the adjoints of pads and slices."""
  blocks = _blocks(inputs)
  ho, wo = blocks.shape[1] - 1, blocks.shape[2] - 1
  k = _block_kernel(kernel)
  return jnp.matmul(_shifted_patches(blocks, ho, wo), k.reshape(-1, k.shape[-1]),
                    precision=precision)


def _fast_conv_forward(inputs: Array, kernel: Array, precision: PrecisionLike) -> Array:
  if inputs.shape[-1] <= _MAX_IN_CHANNELS_SPACE_TO_DEPTH:
    return space_to_depth_conv(inputs, kernel, precision)
  return _lax_conv(inputs, kernel, precision)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def fast_conv(inputs: Array, kernel: Array, precision: PrecisionLike = None) -> Array:
  """``lax.conv_general_dilated(x, W, (2, 2), 'SAME')`` for a 4x4 kernel and even H, W.

  Same forward; the input gradient is computed by `fast_conv_transpose` instead of XLA's
  lhs-dilated convolution (slow on CPU). Along one axis, SAME pads (1, 1) for even sizes, so
  dL/dx[2a + b] = sum_t [2i + t - 1 = 2a + b] g[i] W[t]^T, i.e. phase b = 0 is
  g[a - 1] W[3] + g[a] W[1] and phase b = 1 is g[a] W[2] + g[a + 1] W[0]: exactly
  `fast_conv_transpose` of g with the spatially flipped kernel, input/output channels swapped.
  With at most 4 input channels the forward is `space_to_depth_conv` (same sums, reordered).
  """
  return _fast_conv_forward(inputs, kernel, precision)


def _fast_conv_fwd(inputs, kernel, precision):
  return _fast_conv_forward(inputs, kernel, precision), (inputs, kernel)


def _fast_conv_bwd(precision, residuals, g):
  inputs, kernel = residuals
  grad_inputs = fast_conv_transpose(g, jnp.flip(kernel, (0, 1)).transpose(0, 1, 3, 2),
                                    precision=precision)
  _, kernel_vjp = jax.vjp(lambda k: _lax_conv(inputs, k, precision), kernel)
  return grad_inputs.astype(inputs.dtype), kernel_vjp(g)[0]


fast_conv.defvjp(_fast_conv_fwd, _fast_conv_bwd)


class FastConv(_Conv4x4):
  """Drop-in for ``nn.Conv(features, (4, 4), strides=(2, 2), padding='SAME')``.

  Same parameters and the same forward pass; the backward pass uses `fast_conv`'s exact input
  gradient (even H, W; odd sizes fall back to the plain convolution's gradient).
  """

  def _apply(self, flat: Array, kernel: Array) -> Array:
    if flat.shape[1] % 2 or flat.shape[2] % 2:
      return _lax_conv(flat, kernel, self.precision)
    return fast_conv(flat, kernel, self.precision)


class GemmConvTranspose(_Conv4x4):
  """``conv_impl='gemm'``'s transposed convolution: `gemm_conv_transpose`, or
  `col2im_conv_transpose` for at most 4 output channels; the bias added plainly."""

  def _add_bias(self, y: Array, bias: Array) -> Array:
    return y + bias

  def _apply(self, flat: Array, kernel: Array) -> Array:
    if kernel.shape[-1] <= _MAX_FEATURES_COL2IM:
      return col2im_conv_transpose(flat, kernel, self.precision)
    return gemm_conv_transpose(flat, kernel, self.precision)


class GemmConv(_Conv4x4):
  """``conv_impl='gemm'``'s strided convolution: `gemm_conv` (even H, W; odd sizes: the plain
  convolution); the bias added plainly."""

  def _add_bias(self, y: Array, bias: Array) -> Array:
    return y + bias

  def _apply(self, flat: Array, kernel: Array) -> Array:
    if flat.shape[1] % 2 or flat.shape[2] % 2:
      return _lax_conv(flat, kernel, self.precision)
    return gemm_conv(flat, kernel, self.precision)


# conv_impl -> (strided convolution, transposed convolution); 'flax' is nn.Conv / nn.ConvTranspose.
_LAYERS = {"fast": (FastConv, FastConvTranspose),
           "gemm": (GemmConv, GemmConvTranspose)}


def conv_transpose(impl: str, features: int, name: str | None = None,
                   **kwargs: Any) -> nn.Module:
  """The decoder's 4x4 stride-2 SAME transposed convolution for ``conv_impl`` = `impl`.

  Args:
    impl: one of `CONV_IMPLS` ('flax': ``nn.ConvTranspose``); same params either way.
    features: output channels.
    name: module name.
    **kwargs: further module fields (kernel_init, bias_init, use_bias, dtype, precision, ...).

  Returns:
    An unbound module.
  """
  if impl == "flax":
    return nn.ConvTranspose(features, KERNEL_SIZE, strides=STRIDES, padding="SAME", name=name,
                            **kwargs)
  return _LAYERS[impl][1](features, name=name, **kwargs)


def conv(impl: str, features: int, name: str | None = None, **kwargs: Any) -> nn.Module:
  """The encoder's 4x4 stride-2 SAME convolution for ``conv_impl`` = `impl`.

  Args:
    impl: one of `CONV_IMPLS` ('flax': ``nn.Conv``); same params either way.
    features: output channels.
    name: module name.
    **kwargs: further ``nn.Conv`` fields (kernel_init, bias_init, use_bias, dtype, precision, ...).

  Returns:
    An unbound module.
  """
  if impl == "flax":
    return nn.Conv(features, KERNEL_SIZE, strides=STRIDES, padding="SAME", name=name, **kwargs)
  return _LAYERS[impl][0](features, name=name, **kwargs)
