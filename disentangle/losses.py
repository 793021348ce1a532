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
  written in the numerically stable form x l - softplus(l) (log sigmoid(l) = -softplus(-l) and
  softplus(-l) = softplus(l) - l). ``x`` may be any value in [0, 1] (the images are not
  binarised). Reduced over ``axis`` (the image axes).

  ``jax.nn.softplus`` matters for speed: on XLA:CPU the textbook
  ``max(l, 0) - l x + log1p(exp(-|l|))`` runs ~18x slower (unvectorised exp/log1p), which was a
  third of the CascadeVAE MNIST step (S + 1 = 11 likelihood evaluations per step).
  """
  return jnp.sum(x * logits - jax.nn.softplus(logits), axis=axis)


def l1_log_likelihood(logits: jax.Array, x: jax.Array, *, axis=(-3, -2, -1)) -> jax.Array:
  """-sum over pixels of |x - sigmoid(logits)|: the L1 reconstruction as a log-likelihood.

  The negative L1 distance of the decoded image (pixel means sigmoid(l)) to x, i.e. log p(x) of a
  Laplace likelihood of scale 1 up to its constant (PartedVAE's CelebA term, authors' code:
  ``F.l1_loss(recon, x, reduction='sum')`` per image). Reduced over ``axis`` (the image axes).
  """
  return -jnp.sum(jnp.abs(x - jax.nn.sigmoid(logits)), axis=axis)


def log_likelihood(logits: jax.Array, x: jax.Array, kind: str = "bernoulli") -> jax.Array:
  """log p(x | decoder logits) per image for ``model.likelihood`` = ``kind``
  (``config.LIKELIHOODS``, checked by the config's validation).

  ``'bernoulli'``: :func:`bernoulli_log_likelihood` (every paper's "Bernoulli cross-entropy");
  ``'l1'``: :func:`l1_log_likelihood`. The one function the methods' reconstruction terms call.
  """
  if kind == "l1":
    return l1_log_likelihood(logits, x)
  return bernoulli_log_likelihood(logits, x)


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


# ---------------------------------------------------------------------------------------------
# JointVAE (Dupont 2018): relaxed categorical codes and capacities.


def gumbel_softmax_sample(rng: jax.Array, logits: jax.Array, temperature: float) -> jax.Array:
  """A relaxed one-hot sample softmax((log pi + g) / tau), g ~ Gumbel(0, 1), over the last axis.

  The Gumbel-softmax / concrete reparameterisation (Jang et al. 2016; Maddison et al. 2016) that
  JointVAE uses for q(c | x) = Cat(pi), pi = softmax(logits) (Dupont 2018, Sec. 3; temperature
  0.67 in their code). As tau -> 0 the sample tends to the one-hot of argmax(log pi + g), which
  is an exact draw from Cat(pi) (the Gumbel-max trick). Dupont's code writes log(pi + 1e-12)
  and g = -log(-log(u + 1e-12) + 1e-12); here log_softmax and ``jax.random.gumbel`` (the same
  distribution without the epsilons).
  """
  g = jax.random.gumbel(rng, logits.shape, logits.dtype)
  return jax.nn.softmax((jax.nn.log_softmax(logits, axis=-1) + g) / temperature, axis=-1)


def categorical_kl_uniform(logits: jax.Array) -> jax.Array:
  """KL(Cat(softmax(logits)) || Uniform(K)) = log K + sum_k pi_k log pi_k over the last axis.

  JointVAE's analytic discrete KL against the uniform prior (Dupont 2018, Sec. 3; their
  ``_kl_discrete_loss``, which adds 1e-12 inside the log; here log_softmax, exact at pi_k -> 0).
  In [0, log K]. Shape: ``logits.shape[:-1]``.
  """
  log_p = jax.nn.log_softmax(logits, axis=-1)
  return jnp.log(float(logits.shape[-1])) + jnp.sum(jnp.exp(log_p) * log_p, axis=-1)


def capacity_penalty(kl: jax.Array, capacity, gamma: float) -> jax.Array:
  """gamma * |C - KL|: the controlled-capacity term (Burgess et al. 2018; JointVAE, Sec. 3)."""
  return gamma * jnp.abs(capacity - kl)


# ---------------------------------------------------------------------------------------------
# beta-TCVAE (Chen et al. 2018): minibatch estimators of log q(z) and log prod_j q(z_j).


def stratified_log_weights(batch_size: int, dataset_size: int) -> jax.Array:
  """log W [B, B] of minibatch-stratified sampling (MSS; Chen et al. 2018, appendix).

  Row i weighs the posteriors q(z_i | x_k) of the batch to estimate q(z_i) = 1/N sum_n q(z_i|x_n)
  with M = B - 1 other samples: W[i, i] = 1/N (the sample's own posterior, exactly),
  W[i, (i + 1) mod B] = (N - M) / (N M) (the stratum holding the rest of the data set) and 1/M
  for the other B - 2 columns; every row sums to 1. The authors' ``_log_importance_weight_matrix``
  means the same weights but writes them with a stride of B instead of B + 1, so its 1/N lands in
  column 0 of every row rather than on the diagonal (rtqichen/beta-tcvae pull request #1); this
  is the intended matrix.
  """
  if batch_size < 2:
    raise ValueError(f"minibatch-stratified sampling needs a batch of >= 2, got {batch_size}")
  n, m = float(dataset_size), float(batch_size - 1)
  eye = jnp.eye(batch_size, dtype=bool)
  nxt = jnp.roll(eye, 1, axis=1)  # (i, i + 1 mod B)
  w = jnp.where(eye, 1.0 / n, jnp.where(nxt, (n - m) / (n * m), 1.0 / m))
  return jnp.log(w)


def minibatch_log_densities(z: jax.Array, mean: jax.Array, logvar: jax.Array, *,
                            dataset_size: int, stratified: bool = False):
  """Per-sample log q(z_i | x_i), log q(z_i) and log prod_j q(z_ij) from one minibatch.

  The estimators of Chen et al. (2018) for the terms of the ELBO TC-decomposition
  E KL(q(z|x) || p(z)) = I(x; z) + KL(q(z) || prod_j q(z_j)) + sum_j KL(q(z_j) || p(z_j))
  (CascadeVAE Eq. 3). With B samples z_i ~ q(z | x_i) of a batch from N data points and the
  posterior matrix L[i, k, j] = log q(z_ij | x_k):

  - MWS (minibatch-weighted sampling, ``stratified=False``, the authors' default):
    log q(z_i) ~ logsumexp_k sum_j L[i, k, j] - log(N B),
    log prod_j q(z_ij) ~ sum_j (logsumexp_k L[i, k, j] - log(N B)).
  - MSS (minibatch-stratified sampling): the same logsumexps with the weights
    :func:`stratified_log_weights` added inside instead of - log(N B).

  MWS is biased (the own-sample term gets weight 1/(N B), not 1/N), so its TC value carries a
  constant offset; gradients do not see constants. Returns three arrays of shape [B].
  """
  b = z.shape[0]
  mat = gaussian_log_density(z[:, None, :], mean[None], logvar[None])  # [B, B, m]
  log_qz_x = jnp.sum(gaussian_log_density(z, mean, logvar), axis=-1)
  if stratified:
    log_w = stratified_log_weights(b, dataset_size)
    log_qz = jax.nn.logsumexp(log_w + jnp.sum(mat, axis=-1), axis=1)
    log_prod_qzj = jnp.sum(jax.nn.logsumexp(log_w[:, :, None] + mat, axis=1), axis=-1)
  else:
    log_nb = jnp.log(float(dataset_size) * b)
    log_qz = jax.nn.logsumexp(jnp.sum(mat, axis=-1), axis=1) - log_nb
    log_prod_qzj = jnp.sum(jax.nn.logsumexp(mat, axis=1) - log_nb, axis=-1)
  return log_qz_x, log_qz, log_prod_qzj
