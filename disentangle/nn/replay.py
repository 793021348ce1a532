"""The gradient of a decoder pass whose forward was already computed: no forward run twice.

After t_d a CascadeVAE step (Algorithm 1, Eq. 6) evaluates the decoder at the sampled z for every
discrete code e_k without gradient, for the assignment's costs u[i, k] = log p(x_i | z_i, e_k),
then differentiates -log p(x_i | z_i, d_i) at the chosen codes d. Row i of that pass is row
(d_i, i) of the S passes: same parameter values, same input. :func:`replay` takes those rows as
the pass's value and computes its gradient from their layer inputs alone, so the backward is the
one of B rows (a gather from a differentiated pass of S * B rows would differentiate all of them).
"""
from __future__ import annotations

from typing import Any, Sequence

import jax
import jax.numpy as jnp


def replay(layers: Sequence[tuple[str, Any, Any]], params, latent, inputs, output):
  """``output``, differentiated as ``networks.chain(layers, ..., latent)`` w.r.t. params and latent.

  Args:
    layers: unbound ``(name, layer, input shape)`` of a ReLU chain of linear layers
      (:func:`disentangle.nn.networks.decoder_layers`).
    params: the chain's parameters, ``{name: layer params}``; differentiated.
    latent: the chain's input [B, k]; differentiated.
    inputs: ``networks.chain``'s inputs of each layer after the first (post-ReLU, before any
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
