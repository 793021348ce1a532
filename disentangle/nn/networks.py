"""Encoder and decoder of CascadeVAE supplement Tables 1-2 (= Tables 5-6), after Dupont (2018).

64x64 images (dSprites, Chairs, CelebA): four 4x4 stride-2 convs 32, 32, 64, 64 (ReLU), dense 256
(ReLU), dense ``2 m``; the decoder mirrors it: dense 256, dense 64*4*4 (ReLU), transposed convs 64,
32, 32 (ReLU) and one to the image channels. 32x32 images (MNIST, Fashion-MNIST, resized from 28):
three convs 32, 32, 64 (``model.encoder_widths='cascade'``, Table 2; ``'dupont'``: 32, 64, 64 of
JointVAE / PartedVAE), and transposed convs 32, 32, then the output. The decoder returns *logits*
(the tables' final sigmoid lives in the likelihood, :func:`disentangle.losses.log_likelihood`).

The encoder is a :class:`Trunk` (convs and the dense layer, giving the hidden features h) plus its
heads; ``model.hidden_units`` (256; FFVAE 128) sets the dense layer of both networks and
``model.activation`` / ``model.leaky_slope`` / ``model.activation_last`` the trunk's activation.

Options from the authors' code (``../shared/notes/reference-facts.md``), set by config:
- ``init='reference'``: variance-scaling (He, truncated normal) kernels for convs, Glorot-uniform
  for dense layers, zero biases (the CascadeVAE TensorFlow code, ``tfops/nets.py``: slim's
  ``variance_scaling_initializer()``). TensorFlow stores a ``conv2d_transpose`` kernel as
  (h, w, out, in) and computes its fan-in as h*w*out; Flax's (h, w, in, out) kernel would give
  h*w*in, so the transposed convs here count the fan-in over their *outputs* as TensorFlow does
  (PyTorch's ``ConvTranspose2d`` default does the same). The last decoder layer (32 -> 1 channel)
  thus starts with std sqrt(2 / 16) = 0.354, not sqrt(2 / 512) = 0.0625. slim truncates at 2
  sigma with sigma = sqrt(1.3 * 2 / fan_in), a final std 0.3% above Flax's exact sqrt(2 / fan_in).
  ``init='reference_flax_fan'``: the same with Flax's fan-in (h*w*in) for transposed convs, the
  setting of the ``tests/golden`` record.
  ``init='flax'``: Flax defaults (LeCun normal).
- ``posterior_head='logvar'``: the dense head outputs (mean, log sigma^2) (Dupont's code);
  ``'softplus_sigma'``: (mean, raw) with sigma = softplus(raw) (the CascadeVAE code).
- ``conv_impl`` (:data:`disentangle.config.CONV_IMPLS`, :mod:`disentangle.nn.layers`; same
  parameters, same outputs up to float rounding): ``'flax'`` uses ``nn.Conv`` / ``nn.ConvTranspose``
  (the reference), ``'fast'`` the rewrites XLA:CPU differentiates fast, ``'gemm'`` the layers'
  products as batched matmuls (accelerators). The modules take a resolved form: a config's
  ``'auto'`` is resolved per backend (:data:`disentangle.config.BACKEND_DEFAULTS`) by
  `disentangle.config.resolve_run` before a method builds them.

Mixed precision (``model.dtype``, ``model.precision``; flax's ``dtype`` / ``param_dtype`` split):
the convolutions and the dense layers of the trunk and the decoder compute in ``dtype``
(:func:`compute_dtype`; bfloat16 or float32) at ``precision`` (:func:`precision`), while every
parameter stays float32 (and so the optimiser state). The encoder's heads compute in float32
(their float32 kernels promote the hidden features), so the posterior's mean and log-variance, the
KL terms and z are float32; the decoder's last layer (the logits) computes in float32 on float32
operands (its bfloat16 input cast up; ``benchmarks/gpu_levers.py`` measures the codes it keeps), so
the reconstruction term and CascadeVAE's assignment costs (sums of per-pixel log-likelihoods) are
accumulated in float32. Discriminators (FactorVAE, FFVAE) are separate float32 networks.

disentanglement_lib's networks (Locatello et al. 2019's study), set by config:
- ``architecture='dlib'``: its ``conv_encoder`` and ``deconv_decoder``
  (``disentanglement_lib/methods/shared/architectures.py``, lines 144-206 and 234-288), 64x64
  images only. Encoder: convs 32, 32, 64, 64, all stride 2, SAME padding, ReLU, with 4x4 kernels in
  the first two (lines 166-183) and 2x2 in the third and fourth (lines 184-201); flatten (4x4x64);
  dense 256 ReLU (line 203); then two separate dense heads, ``means`` and ``log_var`` (lines
  204-205), where ``'cascade'`` has one head of width 2 m (the same function, but Glorot's bound of
  a separate head counts fan-out m, not 2 m). Decoder (lines 252-288): dense 256 ReLU, dense 1024
  ReLU, reshape 4x4x64, transposed convs 64, 32, 32 (ReLU) and one to the image channels, all 4x4
  stride 2 SAME, logits out: the layers of ``'cascade'`` at 64x64. A TensorFlow
  ``conv2d_transpose`` correlates with the spatially flipped kernel stored as (h, w, out, in),
  ``nn.ConvTranspose`` with the kernel as stored (h, w, in, out); both pad the dilated input by
  (2, 2), so the two layers span the same functions and, under an i.i.d. initialiser, start from
  the same distribution. 2x2 convolutions are ``nn.Conv`` under every ``conv_impl`` (the fast
  rewrites are for 4x4 kernels).
- ``init='tensorflow'``: TensorFlow's defaults for ``tf.layers`` (``kernel_initializer=None``:
  ``glorot_uniform_initializer``, bias ``zeros_initializer``), which disentanglement_lib keeps for
  every layer (architectures.py passes no initialiser): every kernel uniform on +-sqrt(6 /
  (fan_in + fan_out)) with fans counted over the receptive field (k*k*in, k*k*out; the sum is the
  same for TensorFlow's (h, w, out, in) transposed kernel), biases zero.
"""
from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from disentangle import config as config_lib

# Encoder conv widths per image size; at 32x32 the two papers differ (``model.encoder_widths``).
ENCODER_WIDTHS = dict(zip(config_lib.ENCODER_WIDTH_SETS, (
    {64: (32, 32, 64, 64), 32: (32, 32, 64)},   # 'cascade': CascadeVAE supplement Table 2
    {64: (32, 32, 64, 64), 32: (32, 64, 64)},   # 'dupont': JointVAE / PartedVAE at 32x32
)))
# Decoder transposed-conv widths per image size, before the last layer's image channels.
DECODER_WIDTHS = {64: (64, 32, 32), 32: (32, 32)}
HIDDEN_UNITS = 256  # the dense layer of both networks (``model.hidden_units``)
BOTTLENECK = (4, 4, 64)  # the decoder's dense output, reshaped (H, W, C) for its first deconv
# Encoder conv kernel sizes at 64x64 per ``model.architecture``: the CascadeVAE tables' four 4x4;
# disentanglement_lib's conv_encoder 4, 4, 2, 2 (methods/shared/architectures.py, lines 166-201).
ENCODER_KERNELS = {"cascade": (4, 4, 4, 4), "dlib": (4, 4, 2, 2)}


def initializers(init: str):
  """(conv, dense, transposed-conv) kernel initialisers for ``init`` in ``config.INITS``."""
  if init in ("reference", "reference_flax_fan"):
    he = nn.initializers.variance_scaling(2.0, "fan_in", "truncated_normal")
    he_transpose = (nn.initializers.variance_scaling(2.0, "fan_in", "truncated_normal",
                                                     in_axis=-1, out_axis=-2)
                    if init == "reference" else he)  # fan-in h*w*out (TensorFlow) or h*w*in
    return he, nn.initializers.glorot_uniform(), he_transpose
  if init == "flax":
    return nn.initializers.lecun_normal(), nn.initializers.lecun_normal(), \
        nn.initializers.lecun_normal()
  glorot = nn.initializers.glorot_uniform()  # 'tensorflow': tf.layers' default kernel_initializer
  return glorot, glorot, glorot


def compute_dtype(name: str | None):
  """``model.dtype`` (config.COMPUTE_DTYPES) as a dtype; None (a module's default): float32."""
  return jnp.dtype(name or "float32")


def precision(name: str | None):
  """``model.precision`` (config.PRECISIONS) as a ``jax.lax.Precision``; 'default' / None: JAX's
  default (None)."""
  return None if name in (None, "default") else jax.lax.Precision[name.upper()]


def _conv(module, features: int, name: str, kernel_init):
  from disentangle.nn import layers  # pylint: disable=g-import-not-at-top
  return layers.conv(module.conv_impl, features, name=name, kernel_init=kernel_init, **_numerics(module))


def _conv_transpose(module, features: int, name: str, kernel_init, float32: bool = False):
  """``float32``: the layer computes in float32 whatever ``module.dtype`` (the logits)."""
  from disentangle.nn import layers  # pylint: disable=g-import-not-at-top
  numerics = _numerics(module)
  if float32:
    numerics["dtype"] = jnp.float32
  return layers.conv_transpose(module.conv_impl, features, name=name, kernel_init=kernel_init, **numerics)


def _numerics(module) -> dict:
  """The compute dtype and precision of ``module``'s layers (its ``dtype``, ``precision``)."""
  return dict(dtype=compute_dtype(module.dtype), precision=precision(module.precision))


def check_image_size(size: int, architecture: str = "cascade") -> None:
  if architecture == "dlib" and size != 64:
    raise ValueError(f"model.architecture='dlib' (disentanglement_lib's conv_encoder / "
                     f"deconv_decoder) takes 64x64 images, got {size}x{size}")
  if size not in DECODER_WIDTHS:
    raise ValueError(f"the papers' networks take 64x64 or 32x32 images, got {size}x{size}")


def activation(name: str, leaky_slope: float = 0.01):
  """The trunk activation: ``'relu'`` or ``'leaky_relu'`` (negative slope ``leaky_slope``)."""
  if name == "relu":
    return nn.relu
  return lambda h: nn.leaky_relu(h, leaky_slope)


def _trunk(module, x):
  """The shared body of :class:`Trunk` and :class:`Encoder`: convs, flatten, dense -> h.

  Layers are created in ``module``'s scope (names ``conv{i}``, ``fc``), so the trunk's parameters
  are the encoder's own, with the same names. The activation (``module.activation``) follows the
  last ``module.activation_last`` layers (0 = all of them); ReLU follows the others. The conv
  kernels are ``ENCODER_KERNELS[module.architecture]`` at 64x64 (4x4 at 32x32).
  """
  check_image_size(x.shape[-2], module.architecture)
  conv_init, dense_init, _ = initializers(module.init_scheme)
  widths = ENCODER_WIDTHS[module.widths][x.shape[-2]]
  kernels = ENCODER_KERNELS[module.architecture] if x.shape[-2] == 64 else (4,) * len(widths)
  num_layers = len(widths) + 1
  first_custom = 0 if module.activation_last == 0 else num_layers - module.activation_last
  act = lambda i: (activation(module.activation, module.leaky_slope) if i >= first_custom
                   else nn.relu)
  h = x
  for i, (width, k) in enumerate(zip(widths, kernels)):
    conv = (_conv(module, width, f"conv{i}", conv_init) if k == 4 else
            nn.Conv(width, (k, k), strides=(2, 2), padding="SAME", kernel_init=conv_init,
                    name=f"conv{i}", **_numerics(module)))
    h = act(i)(conv(h))
  h = h.reshape(h.shape[:-3] + (-1,))
  return act(num_layers - 1)(nn.Dense(module.hidden_units, kernel_init=dense_init, name="fc",
                                      **_numerics(module))(h))


class Trunk(nn.Module, kw_only=True):
  """The encoder without its heads: image [B, H, W, C] -> hidden features h [B, hidden_units].

  Applied to an :class:`Encoder`'s parameters (same names; the heads' entries are ignored), it
  gives the h the encoder's heads read: a method adds its own heads on h (e.g. PartedVAE's
  attention) or trains the trunk alone (a supervised classifier on h). Its fields (keyword-only)
  are the :class:`Encoder`'s trunk fields; ``dtype`` and ``precision`` are ``model.dtype`` /
  ``model.precision`` (h is in ``dtype``).
  """
  init_scheme: str = "reference"
  conv_impl: str = "flax"
  dtype: str | None = None
  precision: str | None = None
  hidden_units: int = HIDDEN_UNITS
  widths: str = "cascade"
  architecture: str = "cascade"
  activation: str = "relu"
  leaky_slope: float = 0.01
  activation_last: int = 0

  @nn.compact
  def __call__(self, x):
    return _trunk(self, x)


class Encoder(Trunk):
  """q(z | x): image [B, H, W, C] -> (mean [B, m], logvar [B, m]), plus optional extra heads.

  The :class:`Trunk` (its fields, keyword-only; convs and the dense layer of ``hidden_units``)
  then the dense head ``2 m`` (``architecture='dlib'``: two dense heads of m, ``means`` and
  ``log_var``, as disentanglement_lib's conv_encoder). ``extra_outputs`` adds a dense head of that width on the trunk's h
  (e.g. JointVAE's categorical logits); it is returned as a third value when non-zero.
  ``return_hidden=True`` appends h.
  """
  latent_dim: int
  posterior_head: str = "logvar"
  extra_outputs: int = 0

  @nn.compact
  def __call__(self, x, return_hidden: bool = False):
    h = _trunk(self, x)
    _, dense_init, _ = initializers(self.init_scheme)
    if self.architecture == "dlib":  # architectures.py lines 204-205
      mean = nn.Dense(self.latent_dim, kernel_init=dense_init, name="means")(h)
      raw = nn.Dense(self.latent_dim, kernel_init=dense_init, name="log_var")(h)
    else:
      out = nn.Dense(2 * self.latent_dim, kernel_init=dense_init, name="head")(h)
      mean, raw = jnp.split(out, 2, axis=-1)
    if self.posterior_head == "logvar":
      logvar = raw
    elif self.posterior_head == "softplus_sigma":
      logvar = 2.0 * jnp.log(jax.nn.softplus(raw) + 1e-8)
    else:
      raise ValueError(f"model.posterior_head must be 'logvar' or 'softplus_sigma', "
                       f"got {self.posterior_head!r}")
    outputs = (mean, logvar)
    if self.extra_outputs:
      outputs += (nn.Dense(self.extra_outputs, kernel_init=dense_init, name="extra")(h),)
    return outputs + (h,) if return_hidden else outputs


class Decoder(nn.Module):
  """p(x | z[, d]): latent [..., k] -> Bernoulli logits [..., H, W, C].

  The input is whatever the method feeds (z, or concat(z, one-hot d) for CascadeVAE).
  ``architecture='dlib'`` (disentanglement_lib's deconv_decoder) has the same layers as
  ``'cascade'`` and takes 64x64 images only. ``dtype``: the layers' compute dtype (None: inferred
  from the inputs and parameters, float32). The layers are :func:`decoder_layers`, a chain of
  linear layers with ReLU between them (:func:`chain`).
  """
  image_shape: Sequence[int]
  init_scheme: str = "reference"
  conv_impl: str = "flax"
  hidden_units: int = HIDDEN_UNITS
  architecture: str = "cascade"
  dtype: str | None = None        # model.dtype: the layers' compute dtype; logits out in float32
  precision: str | None = None    # model.precision

  @nn.compact
  def __call__(self, latent):
    return chain(decoder_layers(self), lambda _, layer, x: layer(x), latent)[0]


def decoder_layers(decoder: Decoder) -> list[tuple[str, nn.Module, tuple | None]]:
  """``[(name, layer, input shape)]``: the decoder's linear layers in order (dense fc0, fc1, the
  transposed convs ``deconv{i}``, ``logits``). ``input shape`` is the [H, W, C] that the flat
  activation is reshaped to before the layer (the bottleneck before ``deconv0``), else None.

  Called inside :class:`Decoder`'s ``__call__`` the layers are its submodules; called outside a
  module they are unbound, each applied to ``params[name]`` of the decoder's parameters.
  """
  size, _, channels = decoder.image_shape
  check_image_size(size, decoder.architecture)
  _, dense_init, transpose_init = initializers(decoder.init_scheme)
  dense = lambda width, name: nn.Dense(width, kernel_init=dense_init, name=name,
                                       **_numerics(decoder))
  deconv = lambda width, name: _conv_transpose(decoder, width, name, transpose_init)
  widths = DECODER_WIDTHS[size]
  return ([("fc0", dense(decoder.hidden_units, "fc0"), None),
           ("fc1", dense(BOTTLENECK[0] * BOTTLENECK[1] * BOTTLENECK[2], "fc1"), None)]
          + [(f"deconv{i}", deconv(w, f"deconv{i}"), BOTTLENECK if i == 0 else None)
             for i, w in enumerate(widths)]
          + [("logits", _conv_transpose(decoder, channels, "logits", transpose_init,
                                        float32=True), None)])


def chain(layers, call, latent):
  """(output, inputs) of the linear ``layers`` (:func:`decoder_layers`) with ReLU between them;
  the output (the decoder's logits) in float32, whatever the layers' compute dtype.

  ``call(name, layer, x)`` applies one layer. ``inputs[i]`` is the activation after ReLU that
  feeds layer ``i + 1``, before any reshape: what a backward pass of layer ``i + 1`` needs besides
  its parameters (:func:`replay`).
  """
  h, inputs = latent, []
  for i, (name, layer, shape) in enumerate(layers):
    if i:
      h = nn.relu(h)
      inputs.append(h)
    h = call(name, layer, h if shape is None else h.reshape(h.shape[:-1] + shape))
  return h.astype(jnp.float32), tuple(inputs)


def replay(layers: Sequence[tuple[str, Any, Any]], params, latent, inputs, output):
  """``output``, differentiated as :func:`chain` ``(layers, ..., latent)`` w.r.t. params and latent:
  the gradient of a pass whose forward was already computed, so no forward runs twice.

  After t_d a CascadeVAE step (Algorithm 1, Eq. 6) evaluates the decoder at the sampled z for
  every discrete code e_k without gradient, for the assignment's costs u[i, k] = log p(x_i | z_i,
  e_k), then differentiates -log p(x_i | z_i, d_i) at the chosen codes d. Row i of that pass is
  row (d_i, i) of the S passes: same parameter values, same input. ``replay`` takes those rows as
  the pass's value and computes its gradient from their layer inputs alone, so the backward is
  the one of B rows (a gather from a differentiated pass of S * B rows would differentiate all).

  Args:
    layers: unbound ``(name, layer, input shape)`` of a ReLU chain of linear layers
      (:func:`decoder_layers`).
    params: the chain's parameters, ``{name: layer params}``; differentiated.
    latent: the chain's input [B, k]; differentiated.
    inputs: :func:`chain`'s inputs of each layer after the first (post-ReLU, before any
      reshape) and ``output`` its output, of the same rows, from a forward at the same values of
      ``params`` and ``latent`` (held constant: no gradient reaches them).
    output: see ``inputs``.

  Returns:
    ``output``. Its backward walks the layers in reverse: each layer's VJP at its cached input
    (the forward XLA traces inside it is dead and removed), and ReLU's derivative from the cached
    post-ReLU input (> 0 exactly where the pre-activation is > 0, as ``jax.nn.relu``'s).
  """

  def apply(i, p, x):
    _, layer, shape = layers[i]
    return layer.apply({"params": p}, x if shape is None else x.reshape(x.shape[:-1] + shape))

  @jax.custom_vjp
  def value(params, latent, inputs, output):
    del params, latent, inputs
    return output

  def fwd(params, latent, inputs, output):
    return output, (params, latent, inputs)

  def bwd(residuals, g):
    params, latent, inputs = residuals
    xs = (latent,) + tuple(inputs)
    grads = {}
    for i in reversed(range(len(layers))):
      name = layers[i][0]
      out, vjp = jax.vjp(lambda p, x, i=i: apply(i, p, x), params[name], xs[i])
      grads[name], g = vjp(g.astype(out.dtype))  # the logits' float32 back to the layer's dtype
      if i:
        g = jnp.where(xs[i] > 0, g, jnp.zeros_like(g))
    zeros = lambda tree: jax.tree_util.tree_map(jnp.zeros_like, tree)
    return {name: grads[name] for name in params}, g, zeros(inputs), zeros(output)

  value.defvjp(fwd, bwd)
  return value(params, latent, tuple(inputs), output)
