"""GroupVAE and ML-VAE on pairs, with labels or adaptive (Locatello et al., ICML 2020).

"Weakly-Supervised Disentanglement Without Compromises" trains on pairs (x1, x2) that share all
ground-truth factors but k (`disentangle.data.labels.pairs`). Both observations are encoded by
the same Gaussian encoder q(z | x); on the latent dimensions deemed shared, each observation's
posterior is replaced by an aggregate of the two (Sec. 4.1, Eq. 5):

  q~(z_j | x_i) = a(q(z_j | x1), q(z_j | x2)) if j is shared, else q(z_j | x_i),

and the loss is the beta-VAE objective of both observations on the aggregated posteriors
(Eq. 6): sum_i [ -E_{q~(z | x_i)} log p(x_i | z) + beta KL(q~(z | x_i) || N(0, I)) ], with a
re-parametrised sample of each q~(z | x_i).

The aggregate a (``aggregation``):

- ``'gvae'``, GroupVAE (Hosoya 2019): the arithmetic mean of the means and of the variances,
  mu = (mu1 + mu2) / 2, var = (var1 + var2) / 2 (:func:`gvae_aggregate`);
- ``'mlvae'``, ML-VAE (Bouchacourt et al. 2018): the precision-weighted (product of Gaussians)
  mean mu = (mu1 / var1 + mu2 / var2) var1 var2 / (var1 + var2) (:func:`mlvae_aggregate`).

The shared dimensions (``shared``):

- ``'labels'``: the pair's label says which factors changed; latent dimension j is not shared
  iff factor j changed (dimension j is tied to factor j; needs ``model.latent_dim`` >= K);
- ``'adaptive'`` (Ada-GVAE, Ada-ML-VAE, Sec. 4.1): delta_j = KL(q(z_j | x1) || q(z_j | x2))
  per dimension, and dimension j is shared iff delta_j < tau = (max_j delta_j + min_j delta_j) / 2
  (:func:`adaptive_shared`): the dimensions that moved least are averaged.

Where disentanglement_lib (``methods/weak/weak_vae.py``) departs from the paper, followed here
(its numbers are the paper's):

- The loss is the mean, not the sum, over the two observations: 0.5 (rec1 + rec2) +
  beta 0.5 (KL1 + KL2), half of Eq. 6 (the same minimiser; Adam barely sees the scale).
- ML-VAE's variance is 2 var1 var2 / (var1 + var2), twice the product of Gaussians'
  var1 var2 / (var1 + var2) (the mean is the product's).
- Its ``compute_kl`` leaves out the factor 1/2 of delta_j (the threshold choice is the same).
  Its binning puts delta_j = tau in the upper (non-shared) bin, as here; when all delta_j are
  equal (max = min) it divides 0 by 0; here every dimension is then shared.
- With labels its label is one factor index (the last one its dynamics redrew), so one
  dimension is non-shared even when several factors changed. Here every changed factor's
  dimension is non-shared (the same for k = 1).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections

from disentangle import config as config_lib
from disentangle import losses
from disentangle.data.labels import batch_spec as batch_spec_lib
from disentangle.data.labels import pairs as pairs_lib
from disentangle.methods import base


def default_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.aggregation = "gvae"    # 'gvae' (mean of means and variances) | 'mlvae' (product)
  c.shared = "adaptive"     # 'adaptive' (Ada-: the threshold tau) | 'labels' (changed factors)
  c.beta = 1.0              # weight of the KL of the aggregated posteriors
  c.k = -1                  # factors changed per pair; -1: drawn per pair from 1 ... K - 1
  c.dynamics = "paper"      # how pairs are drawn: 'paper' | 'dlib' (data.labels.pairs)
  return c


RULES = {
    "weakvae.aggregation": config_lib.one_of("gvae", "mlvae"),
    "weakvae.shared": config_lib.one_of("adaptive", "labels"),
    "weakvae.beta": config_lib.NONNEG,
    "weakvae.k": (lambda v: v == -1 or v >= 1, "-1 (drawn per pair) or >= 1"),
    "weakvae.dynamics": config_lib.one_of(*pairs_lib.DYNAMICS),
}
STEP_FIELDS = ()


def gvae_aggregate(mean1, logvar1, mean2, logvar2):
  """(mean, logvar) of GroupVAE's aggregate: the means and the variances averaged."""
  var = 0.5 * (jnp.exp(logvar1) + jnp.exp(logvar2))
  return 0.5 * (mean1 + mean2), jnp.log(var)


def mlvae_aggregate(mean1, logvar1, mean2, logvar2):
  """(mean, logvar) of ML-VAE's aggregate as disentanglement_lib computes it: the product of
  Gaussians' mean, the variance 2 var1 var2 / (var1 + var2) (module docstring)."""
  var1, var2 = jnp.exp(logvar1), jnp.exp(logvar2)
  var = 2.0 * var1 * var2 / (var1 + var2)
  return 0.5 * (mean1 / var1 + mean2 / var2) * var, jnp.log(var)


AGGREGATES = {"gvae": gvae_aggregate, "mlvae": mlvae_aggregate}


def pairwise_kl(mean1, logvar1, mean2, logvar2):
  """delta [B, m]: KL(N(mean1, var1) || N(mean2, var2)) per dimension."""
  return 0.5 * (jnp.exp(logvar1 - logvar2) + (mean2 - mean1) ** 2 / jnp.exp(logvar2) - 1.0
                + logvar2 - logvar1)


def adaptive_shared(delta):
  """bool [B, m]: dimension j of a pair is shared iff delta_j < (max delta + min delta) / 2;
  all are shared when max = min."""
  hi = jnp.max(delta, axis=-1, keepdims=True)
  lo = jnp.min(delta, axis=-1, keepdims=True)
  return (delta < 0.5 * (hi + lo)) | (hi == lo)


def labelled_shared(changed, latent_dim: int):
  """bool [B, m]: dimension j is shared iff j is no changed factor (``changed`` [B, K])."""
  pad = latent_dim - changed.shape[-1]
  return jnp.pad(changed, ((0, 0), (0, pad))) == 0


def aggregated_posteriors(mean1, logvar1, mean2, logvar2, shared, aggregation: str):
  """((mean, logvar) of q~(z | x1), of q~(z | x2)): the aggregate on the shared dimensions."""
  mean, logvar = AGGREGATES[aggregation](mean1, logvar1, mean2, logvar2)
  return ((jnp.where(shared, mean, mean1), jnp.where(shared, logvar, logvar1)),
          (jnp.where(shared, mean, mean2), jnp.where(shared, logvar, logvar2)))


class WeakVAE(base.VAEMethod):
  name = "weakvae"

  @classmethod
  def batch_spec(cls, config) -> batch_spec_lib.BatchSpec:
    """Pairs of observations: "image", "image_pair", "changed"."""
    w = config.weakvae
    return batch_spec_lib.BatchSpec(pairs=batch_spec_lib.PairSpec(k=w.k, dynamics=w.dynamics,
                                                                  field="weakvae"))

  @classmethod
  def check_data(cls, config, dataset) -> None:
    """With labels, a latent dimension per factor (``ConfigError`` naming model.latent_dim)."""
    num = len(tuple(dataset.factor_sizes))
    if config.weakvae.shared == "labels" and config.model.latent_dim < num:
      raise config_lib.ConfigError(
          f"config field 'model.latent_dim' must be >= the {num} factors of the pairs' labels "
          f"(weakvae.shared = 'labels'), got {config.model.latent_dim}")

  def shared_dims(self, changed, mean1, logvar1, mean2, logvar2):
    """bool [B, m]: the dimensions aggregated in each pair (module docstring)."""
    if self.config.weakvae.shared == "labels":
      return labelled_shared(changed, self.latent_dim)
    return adaptive_shared(pairwise_kl(mean1, logvar1, mean2, logvar2))

  def loss(self, params, batch, rng, t):
    """Eq. 6 as disentanglement_lib: the mean over both observations of the reconstruction
    plus beta KL(q~(z | x_i) || N(0, I)), z_i re-parametrised from q~(z | x_i)."""
    del t
    w = self.config.weakvae
    vae_params = params["vae"]
    x1, x2 = batch["image"], batch["image_pair"]
    b = x1.shape[0]
    mean, logvar = self.encode(vae_params, jnp.concatenate([x1, x2], axis=0))
    mean1, mean2, logvar1, logvar2 = mean[:b], mean[b:], logvar[:b], logvar[b:]
    shared = self.shared_dims(batch["changed"], mean1, logvar1, mean2, logvar2)
    (m1, lv1), (m2, lv2) = aggregated_posteriors(mean1, logvar1, mean2, logvar2, shared,
                                                 w.aggregation)
    k1, k2 = jax.random.split(rng)
    z = jnp.concatenate([losses.reparameterize(k1, m1, lv1), losses.reparameterize(k2, m2, lv2)])
    log_lik = self.log_likelihood(self.decode_logits(vae_params, z), jnp.concatenate([x1, x2]))
    rec = -0.5 * (jnp.mean(log_lik[:b]) + jnp.mean(log_lik[b:]))
    kl_per_dim = 0.5 * (jnp.mean(losses.gaussian_kl_per_dim(m1, lv1), axis=0)
                        + jnp.mean(losses.gaussian_kl_per_dim(m2, lv2), axis=0))
    loss = rec + w.beta * jnp.sum(kl_per_dim) + self.regularizer(vae_params)
    return loss, dict(loss=loss, reconstruction=rec,
                      shared_dims=jnp.mean(jnp.sum(shared, axis=-1).astype(jnp.float32)),
                      **base.kl_metrics(kl_per_dim))
