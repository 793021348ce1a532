"""Loss terms shared by every method: pure functions of arrays, one home each.

Conventions: images ``x`` are in [0, 1]; decoders output Bernoulli *logits*; Gaussian posteriors
are given by ``mean`` and ``logvar`` (log sigma^2). Batch reductions are done by the caller.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

LOG_2PI = 1.8378770664093453


def gaussian_kl_per_dim(mean: jax.Array, logvar: jax.Array) -> jax.Array:
  """KL(N(mean, exp(logvar)) || N(0, 1)) per dimension (CascadeVAE Eq. 1, footnote 1).

  Closed form 0.5 * (mean^2 + sigma^2 - log sigma^2 - 1); same shape as ``mean``. Summing over
  the last axis gives the KL of the factorised posterior (conditional independence).
  """
  return 0.5 * (jnp.square(mean) + jnp.exp(logvar) - logvar - 1.0)


def bernoulli_log_likelihood(logits: jax.Array, x: jax.Array, *, axis=(-3, -2, -1)) -> jax.Array:
  """log p(x | logits) = sum over pixels of x log sigmoid(l) + (1 - x) log sigmoid(-l).

  The reconstruction term of every paper here ("Bernoulli cross-entropy summed over pixels"),
  written in the numerically stable form -(max(l, 0) - l x + log(1 + exp(-|l|))). ``x`` may be
  any value in [0, 1] (the images are not binarised). Reduced over ``axis`` (the image axes).
  """
  log_p = -(jnp.maximum(logits, 0.0) - logits * x + jnp.log1p(jnp.exp(-jnp.abs(logits))))
  return jnp.sum(log_p, axis=axis)


def gaussian_log_density(z: jax.Array, mean: jax.Array, logvar: jax.Array) -> jax.Array:
  """Elementwise log N(z; mean, exp(logvar)) (used by the TC / information estimators)."""
  return -0.5 * (LOG_2PI + logvar + jnp.square(z - mean) * jnp.exp(-logvar))


def reparameterize(rng: jax.Array, mean: jax.Array, logvar: jax.Array) -> jax.Array:
  """z = mean + sigma * eps with eps ~ N(0, I) (Kingma & Welling 2013)."""
  eps = jax.random.normal(rng, mean.shape, mean.dtype)
  return mean + jnp.exp(0.5 * logvar) * eps


def l2_kernel_penalty(params, coeff: float) -> jax.Array:
  """coeff * sum ||W||^2 / 2 over every parameter named 'kernel' (TF's ``l2_regularizer``).

  The CascadeVAE authors' code adds this with coeff 4e-5 to the loss (not decoupled decay).
  """
  leaves = jax.tree_util.tree_leaves_with_path(params)
  total = jnp.zeros((), jnp.float32)
  for path, leaf in leaves:
    if getattr(path[-1], "key", None) == "kernel":
      total = total + jnp.sum(jnp.square(leaf))
  return 0.5 * coeff * total
