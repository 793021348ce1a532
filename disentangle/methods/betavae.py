"""beta-VAE (Higgins et al. 2017): CascadeVAE Eq. (1) with a single beta.

loss = E_x[ -E_q log p(x|z) + beta * KL(q(z|x) || N(0, I)) ]: Bernoulli reconstruction summed over
pixels, KL summed over dimensions, both averaged over the batch. CascadeVAE Table 1 rows:
beta = 10 with m = 5 (70.11 mean score) and beta = 4 with m = 10 (74.41).
"""
from __future__ import annotations

import jax.numpy as jnp
import ml_collections

from disentangle import config as config_lib
from disentangle.methods import base


def default_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.beta = 4.0
  return c


RULES = {"betavae.beta": config_lib.NONNEG}
STEP_FIELDS = ()  # no field counts iterations


class BetaVAE(base.VAEMethod):
  name = "betavae"

  def latent_regularizer(self, params, outputs, rng, t):
    """beta sum_j KL_j (CascadeVAE Eq. 1), constant over training."""
    del params, rng, t
    return jnp.sum(self.config.betavae.beta * outputs.kl), {}
