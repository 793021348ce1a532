"""The density-ratio discriminator of FactorVAE and FFVAE, and the permutation of its fake samples.

Kim & Mnih (2018, Sec. 3 and Algorithm 2): a classifier D tells samples of q(z) from samples of
a product of marginals; the product is sampled by permuting the batch independently per factor.
``TC_hat = E_q[logit_real - logit_fake]`` estimates KL(q(z) || prod q) (the density-ratio trick).

- :class:`Discriminator`: MLP of ``layers`` leaky-ReLU (0.2) layers of ``hidden`` units, two
  logits (class 0: real, a sample of q; class 1: fake, a sample of the product). ``init_scheme``:
  ``'flax'`` (Flax's defaults: LeCun-normal kernels, zero biases) or ``'tensorflow'`` (TensorFlow's
  ``tf.layers.dense`` defaults, Glorot-uniform kernels and zero biases, as disentanglement_lib's
  ``fc_discriminator``: ``methods/shared/architectures.py`` lines 291-319, six dense 1000 with
  ``tf.nn.leaky_relu`` (slope 0.2), dense 2, no initialiser passed).
- :func:`permute_groups`: the product of the marginals of *groups* of columns: FactorVAE = every
  dimension its own group (Algorithm 2); FFVAE = z as one block, each sensitive b_j alone
  (Creager et al. 2019, App. A).
- :func:`permute_scoped`: the same over the global batch or within each device's shard.
- :func:`discriminator_loss`, :func:`density_ratio`: the standard cross-entropy (B real and B fake
  rows) and the TC integrand.
"""
from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from disentangle import sharding

INITS = ("flax", "tensorflow")


class Discriminator(nn.Module):
  """MLP codes -> 2 logits (class 0: a sample of q(z); class 1: of the product of marginals)."""
  hidden: int = 1000
  layers: int = 6
  init_scheme: str = "flax"  # :data:`INITS`

  @nn.compact
  def __call__(self, z):
    if self.init_scheme not in INITS:
      raise ValueError(f"the discriminator's init_scheme must be one of {list(INITS)}, "
                       f"got {self.init_scheme!r}")
    kernel_init = (nn.initializers.glorot_uniform() if self.init_scheme == "tensorflow"
                   else nn.linear.default_kernel_init)
    h = z
    for i in range(self.layers):
      h = nn.leaky_relu(nn.Dense(self.hidden, kernel_init=kernel_init, name=f"fc{i}")(h), 0.2)
    return nn.Dense(2, kernel_init=kernel_init, name="logits")(h)


def singleton_groups(num_dims: int) -> tuple[tuple[int, ...], ...]:
  """Every dimension its own group: FactorVAE's product of all marginals prod_j q(z_j)."""
  return tuple((j,) for j in range(num_dims))


def check_groups(groups: Sequence[Sequence[int]], num_dims: int) -> None:
  """The groups must partition 0..num_dims-1 (every column in exactly one group)."""
  flat = sorted(j for g in groups for j in g)
  if flat != list(range(num_dims)) or any(len(g) == 0 for g in groups):
    raise ValueError(f"groups {list(map(list, groups))} must partition the {num_dims} columns")


def permute_groups(rng, codes: jax.Array, groups: Sequence[Sequence[int]]) -> jax.Array:
  """Rows of ``codes`` [B, m] permuted along the batch independently per group of columns.

  Group g gets the permutation drawn with the g-th key of ``split(rng, len(groups))``; the columns
  of one group move together (their joint is kept), different groups are decoupled: a sample of
  prod_g q(z_g). With singleton groups this is Kim & Mnih's Algorithm 2 and draws exactly the
  permutations of the former ``permute_dims`` (one key per column, in column order).
  """
  check_groups(groups, codes.shape[1])
  keys = jax.random.split(rng, len(groups))
  cols = [None] * codes.shape[1]
  for k, group in zip(keys, groups):
    if len(group) == 1:
      cols[group[0]] = jax.random.permutation(k, codes[:, group[0]])
    else:
      perm = jax.random.permutation(k, codes.shape[0])
      block = codes[:, jnp.asarray(group)][perm]
      for i, j in enumerate(group):
        cols[j] = block[:, i]
  return jnp.stack(cols, axis=1)


def permute_scoped(rng, codes: jax.Array, groups, *, scope: str = "global", mesh=None):
  """:func:`permute_groups` over the global batch (``'global'``) or within each shard.

  ``scope='local'`` permutes inside ``shard_map`` with the per-shard key ``fold_in(rng, shard)``,
  so no sample crosses devices (cheaper on large meshes; the product of marginals is then
  estimated per shard). With one device both are the same.
  """
  fn = lambda key, z: permute_groups(key, z, groups)
  return sharding.local_or_global(fn, mesh, scope, keyed=True)(rng, codes)


def density_ratio(logits: jax.Array) -> jax.Array:
  """logit_real - logit_fake per row: log D(z) / (1 - D(z)), the TC integrand (Kim & Mnih Eq. 3)."""
  return logits[:, 0] - logits[:, 1]


def discriminator_loss(logits: jax.Array):
  """Standard cross-entropy on D(concat(real, fake)) [2B, 2]: the first B rows real (label 0),
  the last B fake (label 1), averaged over all 2B rows (one discriminator call for both).

  Returns (loss, metrics) with ``disc_loss`` and ``disc_accuracy``.
  """
  half = logits.shape[0] // 2
  labels = jnp.concatenate([jnp.zeros(half, jnp.int32), jnp.ones(half, jnp.int32)])
  ce = jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels))
  acc = jnp.mean(jnp.argmax(logits, -1) == labels)
  return ce, dict(disc_loss=ce, disc_accuracy=acc)
