"""beta-VAE (Higgins et al. 2017): CascadeVAE Eq. (1) with a single beta.

loss = E_x[ -E_q log p(x|z) + beta * KL(q(z|x) || N(0, I)) ]: Bernoulli reconstruction summed over
pixels, KL summed over dimensions, both averaged over the batch. CascadeVAE Table 1 rows:
beta = 10 with m = 5 (70.11 mean score) and beta = 4 with m = 10 (74.41).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections

from disentangle import losses
from disentangle.methods import base


def default_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.beta = 4.0
  return c


RULES = {"betavae.beta": (lambda v: v >= 0, ">= 0")}


class BetaVAE(base.VAEMethod):
  name = "betavae"

  def loss(self, vae_params, batch, rng, beta):
    x = batch["image"]
    mean, logvar = self.encode(vae_params, x)
    z = losses.reparameterize(rng, mean, logvar)
    log_px = losses.bernoulli_log_likelihood(self.decode_logits(vae_params, z), x)
    rec = -jnp.mean(log_px)
    kl = jnp.mean(losses.gaussian_kl_per_dim(mean, logvar), axis=0)
    loss = rec + jnp.sum(beta * kl) + self.regularizer(vae_params)
    return loss, dict(loss=loss, reconstruction=rec, **base.kl_metrics(kl))

  def train_step(self, state, batch):
    rng = jax.random.fold_in(state.rng, state.step)
    grads, metrics = jax.grad(self.loss, has_aux=True)(
        state.params["vae"], batch, rng, self.config.betavae.beta)
    state = self.apply_update(state, "vae", grads)
    return state.replace(step=state.step + 1), metrics
