"""FactorVAE (Kim & Mnih, ICML 2018), a CascadeVAE Table 1 baseline.

VAE loss: -E log p(x|z) + beta * KL(q(z|x) || p(z)) + gamma * TC_hat, with the density-ratio
estimate TC_hat = E_q(z)[log D(z) / (1 - D(z))] = E[logit_real - logit_fake] of a discriminator
D that tells samples of q(z) from samples of prod_j q(z_j). The fake samples permute every latent
dimension independently along the batch (Kim & Mnih, Algorithm 2). The discriminator (6 layers of
1000 leaky-ReLU units, two logits) is trained with cross-entropy through its own Adam; its inputs
are stop-gradient, and the VAE update does not change the discriminator. ``disc_init``: Flax's
initialisers (``'flax'``) or TensorFlow's (``'tensorflow'``, disentanglement_lib's).

Kim & Mnih's settings for dSprites: gamma = 35, VAE Adam 1e-4 (0.9, 0.999), discriminator Adam
1e-4 (0.5, 0.9), batch 64. CascadeVAE Table 1: m = 5: 81.09 (2.63), best 85.12; m = 10: 82.15
(0.88), best 88.25. Kim & Mnih draw a second batch for the discriminator; here the same batch
serves both updates (one data stream for all methods).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import optax

from disentangle import config as config_lib
from disentangle.methods import base
from disentangle.methods import discriminator as disc_lib
from disentangle.methods import optimizers as optim


def default_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.beta = 1.0
  c.gamma = 35.0
  c.disc_hidden = 1000
  c.disc_layers = 6
  c.disc_learning_rate = 1e-4
  c.disc_b1 = 0.5
  c.disc_b2 = 0.9
  c.permute_scope = "global"  # 'global': permute over the global batch; 'local': within shards
  c.disc_init = "flax"        # the discriminator's initialisers (discriminator.INITS)
  return c


RULES = {
    "factorvae.beta": config_lib.NONNEG,
    "factorvae.gamma": config_lib.NONNEG,
    "factorvae.disc_hidden": config_lib.POSITIVE,
    "factorvae.disc_layers": config_lib.POSITIVE,
    "factorvae.disc_learning_rate": config_lib.POSITIVE,
    "factorvae.disc_b1": config_lib.PROBABILITY_OPEN1,
    "factorvae.disc_b2": config_lib.PROBABILITY_OPEN1,
    "factorvae.permute_scope": config_lib.one_of("global", "local"),
    "factorvae.disc_init": config_lib.one_of(*disc_lib.INITS),
}
STEP_FIELDS = ()

Discriminator = disc_lib.Discriminator  # the shared module (also FFVAE's)


class FactorVAE(base.VAEMethod):
  name = "factorvae"

  def __init__(self, config, image_shape, *, mesh=None):
    f = config.factorvae
    self.discriminator = disc_lib.Discriminator(hidden=f.disc_hidden, layers=f.disc_layers,
                                                init_scheme=f.disc_init)
    super().__init__(config, image_shape, mesh=mesh)

  def groups(self):
    return {"vae": self.init_params,
            "discriminator": lambda k: self.discriminator.init(
                k, jnp.zeros((1, self.latent_dim)))["params"]}

  def make_optimizers(self):
    f = self.config.factorvae
    return dict(super().make_optimizers(), discriminator=optim.optimizer(
        "discriminator", optax.adam(f.disc_learning_rate, b1=f.disc_b1, b2=f.disc_b2)))

  def tc_estimate(self, params, z):
    """TC_hat = mean over the batch of logit_real - logit_fake of D at the sampled z."""
    logits = self.discriminator.apply({"params": params["discriminator"]}, z)
    return jnp.mean(disc_lib.density_ratio(logits))

  def latent_regularizer(self, params, outputs, rng, t):
    """beta sum_j KL_j + gamma TC_hat (Kim & Mnih Eq. 2)."""
    del rng, t
    f = self.config.factorvae
    tc = self.tc_estimate(params, outputs.z)
    return f.beta * jnp.sum(outputs.kl) + f.gamma * tc, dict(tc_estimate=tc)

  def vae_terms(self, params, batch, rng, t=None):
    """(VAE loss, (metrics, z)): the ELBO with the TC term, and the sample D is trained on."""
    loss, (metrics, outputs) = self.elbo(params, batch, rng, t)
    return loss, (metrics, outputs.z)

  def loss(self, params, batch, rng, t):
    """The VAE loss (the one the ``vae`` optimiser follows) and its metrics."""
    loss, (metrics, _) = self.vae_terms(params, batch, jax.random.split(rng)[0], t)
    return loss, metrics

  def permute(self, rng, z):
    """The fake samples: every dimension its own group, over the global batch or per shard."""
    return disc_lib.permute_scoped(rng, z, disc_lib.singleton_groups(z.shape[1]),
                                   scope=self.config.factorvae.permute_scope, mesh=self.mesh)

  def disc_loss(self, params, z, rng):
    """Cross-entropy of D on B real rows (stop-gradient z) and B permuted fake rows."""
    z = jax.lax.stop_gradient(z)
    fake = self.permute(rng, z)
    logits = self.discriminator.apply({"params": params["discriminator"]},
                                      jnp.concatenate([z, fake]))
    return disc_lib.discriminator_loss(logits)

  def train_step(self, state, batch):
    """Both gradients at the same parameters, then both updates (Kim & Mnih, Algorithm 2)."""
    rng, t = self.step_key(state)
    k_vae, k_perm = jax.random.split(rng)
    (vae_loss, (metrics, z)), vae_grads = self.gradients(self.vae_terms, state.params, batch,
                                                         k_vae, t)
    (disc_loss, disc_metrics), disc_grads = self.gradients(self.disc_loss, state.params, z,
                                                           k_perm)
    state = self.apply_update(state, "vae", vae_grads["vae"], value=vae_loss)
    state = self.apply_update(state, "discriminator", disc_grads["discriminator"],
                              value=disc_loss)
    return self.advance(state), dict(metrics, **disc_metrics)
