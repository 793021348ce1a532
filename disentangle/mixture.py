"""Terms of a learned Gaussian-mixture prior over categorical assignments (PartedVAE, Eq. 6).

PartedVAE (Hajimiri et al.) puts a prior p_psi(u_i | c_i = k) = N(mu_{i,k}, diag sigma^2_{i,k}) on
the class-related latents u_i of each categorical variable c_i. Its objective (Eq. 6, multi-label
form in App. A.5) adds, per variable i, beside the reconstruction and the z capacity:

- ``expected_gaussian_kl``: E_q(c_i|x) KL(q(u_i | c_i, x) || p_psi(u_i | c_i)) (the u term);
- ``categorical_entropy``: H(q(c_i | x)) (term A of Eq. 3, weighted by gamma_h);
- ``aggregate_categorical_kl``: KL(q_hat(c_i) || p(c_i)) with q_hat(c_i) = mean_b q(c_i | x_b) on
  the minibatch (Sec. 4.4; term B of Eq. 3);
- ``bhattacharyya_penalty``: sum over pairs of components of max(BC - delta, 0) (Eq. 5-6), with
  the Bhattacharyya coefficient of two diagonal Gaussians from App. A.1.

Every function is pure, works on one categorical variable (callers loop over the K variables of
the multi-label form, whose sizes L_i differ) and is checked in ``tests/test_mixture.py`` against
direct float64 numpy and numerical integration.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp


def gaussian_kl(mean_q, logvar_q, mean_p, logvar_p) -> jax.Array:
  """KL(N(mean_q, e^logvar_q) || N(mean_p, e^logvar_p)) per dimension (diagonal Gaussians).

  0.5 (logvar_p - logvar_q + (e^logvar_q + (mean_q - mean_p)^2) / e^logvar_p - 1); broadcasts.
  With mean_p = logvar_p = 0 it is :func:`disentangle.losses.gaussian_kl_per_dim`.
  """
  return 0.5 * (logvar_p - logvar_q + (jnp.exp(logvar_q) + jnp.square(mean_q - mean_p))
                * jnp.exp(-logvar_p) - 1.0)


def bhattacharyya_distance(mean1, logvar1, mean2, logvar2) -> jax.Array:
  """D_B of two diagonal Gaussians (PartedVAE App. A.1), summed over the last axis.

  D_B = 1/8 (mu1 - mu2)^T Sigma^-1 (mu1 - mu2) + 1/2 ln(det Sigma / sqrt(det Sigma1 det Sigma2)),
  Sigma = (Sigma1 + Sigma2) / 2. For diagonal covariances the log-determinants are sums of
  log-variances: 1/2 (sum log sigma_bar^2 - 1/2 (sum log sigma1^2 + sum log sigma2^2)).
  """
  var_bar = 0.5 * (jnp.exp(logvar1) + jnp.exp(logvar2))
  mahalanobis = jnp.sum(jnp.square(mean1 - mean2) / var_bar, axis=-1)
  log_det = jnp.sum(jnp.log(var_bar), axis=-1) - 0.5 * (
      jnp.sum(logvar1, axis=-1) + jnp.sum(logvar2, axis=-1))
  return mahalanobis / 8.0 + 0.5 * log_det


def bhattacharyya_coefficient(mean1, logvar1, mean2, logvar2) -> jax.Array:
  """BC = exp(-D_B) = integral of sqrt(p1 p2), in [0, 1], 1 iff p1 = p2 (Sec. 3.2)."""
  return jnp.exp(-bhattacharyya_distance(mean1, logvar1, mean2, logvar2))


def bhattacharyya_penalty(means, logvars, delta: float, *, include_diagonal: bool = False):
  """sum_{k < l} max(BC(p_k, p_l) - delta, 0) over the L components of one variable.

  ``means``, ``logvars``: [L, d], the prior components p_psi(u_i | c_i = k). Eqs. 5-6 sum j from
  i, which includes k = l, where BC = 1: a constant max(1 - delta, 0) per component with no
  gradient. The authors' code sums k > l only, and so does the default here;
  ``include_diagonal=True`` gives the printed form, larger by exactly L max(1 - delta, 0).
  Pairs are taken inside one variable only (App. A.5).
  """
  num = means.shape[0]
  bc = bhattacharyya_coefficient(means[:, None], logvars[:, None], means[None], logvars[None])
  offset = 0 if include_diagonal else 1
  rows, cols = jnp.triu_indices(num, k=offset)
  return jnp.sum(jnp.maximum(bc[rows, cols] - delta, 0.0))


def mean_offdiagonal_bc(means, logvars) -> jax.Array:
  """Mean BC over the pairs k < l of one variable's components (a logged diagnostic)."""
  num = means.shape[0]
  bc = bhattacharyya_coefficient(means[:, None], logvars[:, None], means[None], logvars[None])
  rows, cols = jnp.triu_indices(num, k=1)
  return jnp.mean(bc[rows, cols])


def categorical_entropy(logits) -> jax.Array:
  """mean_b H(q(c | x_b)) = -mean_b sum_k q_k log q_k for logits [B, L] (Eq. 6, gamma_h term)."""
  log_q = jax.nn.log_softmax(logits, axis=-1)
  return -jnp.mean(jnp.sum(jnp.exp(log_q) * log_q, axis=-1))


def aggregate_log_posterior(logits) -> jax.Array:
  """log q_hat(c) = logsumexp_b log q(c | x_b) - log B: the minibatch estimate (Sec. 4.4); [L]."""
  log_q = jax.nn.log_softmax(logits, axis=-1)
  return jax.scipy.special.logsumexp(log_q, axis=0) - jnp.log(logits.shape[0])


def aggregate_categorical_kl(logits, prior) -> jax.Array:
  """KL(q_hat(c) || p(c)) with q_hat from :func:`aggregate_log_posterior` (Eq. 3 term B, Eq. 6).

  ``prior``: probabilities [L] (entries > 0). The minibatch estimate is biased for small batches,
  as in the paper and the authors' code.
  """
  log_qhat = aggregate_log_posterior(logits)
  return jnp.sum(jnp.exp(log_qhat) * (log_qhat - jnp.log(prior)))


def expected_gaussian_kl(q_c, mean_q, logvar_q, prior_means, prior_logvars) -> jax.Array:
  """mean_b sum_k q(c = k | x_b) KL(q(u | c = k, x_b) || p_psi(u | c = k)) (Eq. 2 / Eq. 6).

  ``q_c``: [B, L] probabilities. ``mean_q`` / ``logvar_q``: [B, L, d] (one posterior per class
  k, PartedVAE's ``u_kl='expected'``: the attention evaluated at c = e_k) or [B, d] (one posterior
  from the sampled c~, compared with every component k: the authors' code, ``'sampled'``).
  ``prior_means`` / ``prior_logvars``: [L, d]. KL summed over the d dimensions.
  """
  if mean_q.ndim == 2:
    mean_q, logvar_q = mean_q[:, None], logvar_q[:, None]
  kl = jnp.sum(gaussian_kl(mean_q, logvar_q, prior_means[None], prior_logvars[None]), axis=-1)
  return jnp.mean(jnp.sum(q_c * kl, axis=-1))
