"""beta-TCVAE (Chen et al., NeurIPS 2018), mentioned by CascadeVAE (Sections 3 and 5).

The KL term of the ELBO splits into index-code mutual information, total correlation and
dimension-wise KL (Chen et al., the ELBO TC-decomposition; CascadeVAE Eq. 3), and beta-TCVAE
weighs them apart:

  loss = 1/B sum_i [ -log p(x_i | z_i) + alpha (log q(z_i | x_i) - log q(z_i))
                     + beta (log q(z_i) - log prod_j q(z_ij))
                     + gamma (log prod_j q(z_ij) - log p(z_i)) ]

with one sample z_i ~ q(z | x_i) per example and log q(z_i), log prod_j q(z_ij) estimated on the
minibatch (:func:`disentangle.losses.minibatch_log_densities`): minibatch-weighted sampling
(``estimator='mws'``, the authors' default) or minibatch-stratified sampling (``'mss'``). Both
need the data set size N (``dataset_size``; dSprites 737,280). With alpha = beta = gamma = 1 the
three terms add up to the single-sample Monte-Carlo KL (log q(z|x) - log p(z)) of the plain VAE.

The authors' dSprites command (README): ``--beta 6 --tcvae``, i.e. alpha = gamma = 1, beta = 6,
MWS, batch 2048, Adam 1e-3, 50 epochs, 10 latents. Where this differs from their code:
- their default dSprites encoder / decoder are MLPs (1200-1200; ``--conv`` selects a conv net
  with batch norm); here the shared conv networks of CascadeVAE supplement Table 5;
- their MSS weight matrix is written with a stride bug (see
  :func:`disentangle.losses.stratified_log_weights`); here the intended matrix.
CascadeVAE reports no number for beta-TCVAE, so the config has no ``PUBLISHED`` entry.
"""
from __future__ import annotations

import jax.numpy as jnp
import ml_collections

from disentangle import config as config_lib
from disentangle import losses
from disentangle.methods import base


def default_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.alpha = 1.0               # index-code mutual information I(x; z)
  c.beta = 6.0                # total correlation (Chen et al.'s dSprites value)
  c.gamma = 1.0               # dimension-wise KL sum_j KL(q(z_j) || p(z_j))
  c.estimator = "mws"         # 'mws' (minibatch-weighted) or 'mss' (minibatch-stratified)
  c.dataset_size = config_lib.DSPRITES_SIZE  # N of the training set (dSprites)
  return c


RULES = {
    "betatcvae.alpha": config_lib.NONNEG,
    "betatcvae.beta": config_lib.NONNEG,
    "betatcvae.gamma": config_lib.NONNEG,
    "betatcvae.estimator": config_lib.one_of("mws", "mss"),
    "betatcvae.dataset_size": config_lib.POSITIVE,
}
STEP_FIELDS = ()


class BetaTCVAE(base.VAEMethod):
  name = "betatcvae"

  def latent_regularizer(self, params, outputs, rng, t):
    """alpha MI + beta TC + gamma dim-wise KL at the ELBO's sample z (module docstring); it
    replaces the analytic KL, which is only logged (``kl``, ``kl_per_dim``)."""
    del params, rng, t
    c = self.config.betatcvae
    z = outputs.z
    log_qz_x, log_qz, log_prod = losses.minibatch_log_densities(
        z, outputs.mean, outputs.logvar, dataset_size=c.dataset_size,
        stratified=c.estimator == "mss")
    log_pz = jnp.sum(losses.gaussian_log_density(z, jnp.zeros_like(z), jnp.zeros_like(z)), -1)
    mi = jnp.mean(log_qz_x - log_qz)
    tc = jnp.mean(log_qz - log_prod)
    dwkl = jnp.mean(log_prod - log_pz)
    return (c.alpha * mi + c.beta * tc + c.gamma * dwkl,
            dict(mutual_information=mi, total_correlation=tc, dimwise_kl=dwkl))
