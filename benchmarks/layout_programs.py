"""The layouts of N runs' encoder and decoder that `benchmarks.run_layout` times.

Each takes the runs' stacked weights ``[N, ...]`` and images ``[N, B, H, W, C]``: ``vmap`` (grouped
convolutions), ``unroll`` (N passes in one program) and ``folded`` (every image through run 0's
network: the same arithmetic, not the same computation).
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from disentangle import config as config_lib

# The trainer's layouts of N runs (``seed_layout`` resolved), and the folded pass beside them.
PER_RUN = config_lib.SEED_LAYOUTS_RESOLVED
LAYOUTS = (*PER_RUN, "folded")


def network_pass(method) -> Callable:
  """``(params, images [B, H, W, C]) -> (loss, grads)`` of one run's encoder and decoder."""
  def loss(params, images):
    mean, _ = method.encoder.apply({"params": params["encoder"]}, images)[:2]
    latent = mean
    extra = method.decoder_input_dim() - latent.shape[-1]
    if extra:  # CascadeVAE: the discrete code's one-hot after the continuous latents
      latent = jnp.concatenate([latent, jax.nn.one_hot(
          jnp.zeros(latent.shape[:-1], jnp.int32), extra)], axis=-1)
    logits = method.decoder.apply({"params": params["decoder"]}, latent)
    bce = jnp.maximum(logits, 0) - logits * images + jnp.log1p(jnp.exp(-jnp.abs(logits)))
    return jnp.mean(jnp.sum(bce, axis=(-3, -2, -1)))
  return jax.value_and_grad(loss)


def layout_fn(layout: str, one: Callable, runs: int) -> Callable:
  """``(stacked params [N, ...], images [N, B, ...]) -> (losses, grads)`` in ``layout``."""
  if layout == "vmap":
    return jax.vmap(one)
  if layout == "unroll":
    def unrolled(params, images):
      outs = [one(jax.tree_util.tree_map(lambda a, i=i: a[i], params), images[i])
              for i in range(runs)]
      return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *outs)
    return unrolled
  if layout == "folded":
    def folded(params, images):
      first = jax.tree_util.tree_map(lambda a: a[0], params)
      return one(first, images.reshape((-1,) + images.shape[2:]))
    return folded
  raise ValueError(f"--layouts: each of {LAYOUTS}, got {layout!r}")
