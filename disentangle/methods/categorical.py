"""Categorical latent codes from one dense head (JointVAE, Dupont 2018 Sec. 3; PartedVAE Sec. 4).

K categorical variables c_i with L_i classes share one dense head of width sum_i L_i on the
encoder's hidden features, cut into per-variable logit blocks (the same function as one linear
head per variable). In training each c_i is a Gumbel-softmax sample
(:func:`disentangle.losses.gumbel_softmax_sample`); at evaluation the one-hot of argmax.
"""
from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from disentangle import losses


def split_blocks(logits: jax.Array, sizes: Sequence[int]) -> list:
  """The head's logits [..., sum L_i] -> one block [..., L_i] per variable."""
  cuts = np.cumsum(sizes)[:-1].tolist()
  return jnp.split(logits, cuts, axis=-1)


def relaxed_codes(rng, blocks: Sequence[jax.Array], temperature: float) -> list:
  """One Gumbel-softmax sample per block (key i of ``split(rng, K)`` for variable i)."""
  keys = jax.random.split(rng, len(blocks))
  return [losses.gumbel_softmax_sample(k, l, temperature) for k, l in zip(keys, blocks)]


def hard_codes(blocks: Sequence[jax.Array], dtype=jnp.float32) -> list:
  """The one-hot of argmax per block: the code of each variable at evaluation."""
  return [jax.nn.one_hot(jnp.argmax(l, axis=-1), l.shape[-1], dtype=dtype) for l in blocks]


def argmax_classes(blocks: Sequence[jax.Array]) -> jax.Array:
  """int32 [..., K]: the argmax class of every variable."""
  return jnp.stack([jnp.argmax(l, axis=-1) for l in blocks], axis=-1).astype(jnp.int32)


def one_hot_or_zeros(d, size: int, batch_shape, dtype) -> jax.Array:
  """one-hot(d) [..., size] (entries -1 give zeros), or zeros when ``d`` is None."""
  if d is None:
    return jnp.zeros(tuple(batch_shape) + (size,), dtype)
  return jax.nn.one_hot(d, size, dtype=dtype)


def capacity_cap(sizes: Sequence[int]) -> float:
  """sum_i log L_i: the largest KL of the categoricals against uniform priors."""
  return float(sum(np.log(k) for k in sizes))
