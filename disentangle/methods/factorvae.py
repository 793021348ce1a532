"""FactorVAE (Kim & Mnih, ICML 2018), a CascadeVAE Table 1 baseline.

VAE loss: -E log p(x|z) + beta * KL(q(z|x) || p(z)) + gamma * TC_hat, with the density-ratio
estimate TC_hat = E_q(z)[log D(z) / (1 - D(z))] = E[logit_real - logit_fake] of a discriminator
D that tells samples of q(z) from samples of prod_j q(z_j). The fake samples permute every latent
dimension independently along the batch (Kim & Mnih, Algorithm 2). The discriminator (6 layers of
1000 leaky-ReLU units, two logits) is trained with cross-entropy through its own Adam; its inputs
are stop-gradient, and the VAE update does not change the discriminator.

Kim & Mnih's settings for dSprites: gamma = 35, VAE Adam 1e-4 (0.9, 0.999), discriminator Adam
1e-4 (0.5, 0.9), batch 64. CascadeVAE Table 1: m = 5: 81.09 (2.63), best 85.12; m = 10: 82.15
(0.88), best 88.25. Kim & Mnih draw a second batch for the discriminator; here the same batch
serves both updates (one data stream for all methods).
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import optax

from disentangle import losses
from disentangle.methods import base
from disentangle.train import mesh as mesh_lib


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
  return c


RULES = {
    "factorvae.beta": (lambda v: v >= 0, ">= 0"),
    "factorvae.gamma": (lambda v: v >= 0, ">= 0"),
    "factorvae.disc_hidden": (lambda v: v > 0, "> 0"),
    "factorvae.disc_layers": (lambda v: v > 0, "> 0"),
    "factorvae.disc_learning_rate": (lambda v: v > 0, "> 0"),
    "factorvae.permute_scope": (lambda v: v in ("global", "local"), "'global' or 'local'"),
}


class Discriminator(nn.Module):
  """MLP z -> 2 logits (class 0: a sample of q(z); class 1: of prod_j q(z_j))."""
  hidden: int = 1000
  layers: int = 6

  @nn.compact
  def __call__(self, z):
    h = z
    for i in range(self.layers):
      h = nn.leaky_relu(nn.Dense(self.hidden, name=f"fc{i}")(h), 0.2)
    return nn.Dense(2, name="logits")(h)


def permute_dims(rng, z):
  """Permute each column of z [B, m] independently along the batch (Kim & Mnih, Alg. 2)."""
  keys = jax.random.split(rng, z.shape[1])
  cols = [jax.random.permutation(k, z[:, j]) for j, k in enumerate(keys)]
  return jnp.stack(cols, axis=1)


class FactorVAE(base.VAEMethod):
  name = "factorvae"

  def __init__(self, config, image_shape):
    super().__init__(config, image_shape)
    f = config.factorvae
    self.discriminator = Discriminator(hidden=f.disc_hidden, layers=f.disc_layers)
    self.disc_tx = optax.adam(f.disc_learning_rate, b1=f.disc_b1, b2=f.disc_b2)

  def init(self, rng):
    k_vae, k_disc, k_state = jax.random.split(rng, 3)
    params = {"vae": self.init_params(k_vae),
              "discriminator": self.discriminator.init(
                  k_disc, jnp.zeros((1, self.latent_dim)))["params"]}
    return base.TrainState(
        step=jnp.zeros((), jnp.int32), params=params,
        opt_state={"vae": self.tx.init(params["vae"]),
                   "discriminator": self.disc_tx.init(params["discriminator"])},
        rng=k_state)

  def vae_loss(self, vae_params, disc_params, batch, rng):
    f = self.config.factorvae
    x = batch["image"]
    mean, logvar = self.encode(vae_params, x)
    z = losses.reparameterize(rng, mean, logvar)
    rec = -jnp.mean(losses.bernoulli_log_likelihood(self.decode_logits(vae_params, z), x))
    kl = jnp.mean(losses.gaussian_kl_per_dim(mean, logvar), axis=0)
    logits = self.discriminator.apply({"params": disc_params}, z)
    tc = jnp.mean(logits[:, 0] - logits[:, 1])
    loss = rec + f.beta * jnp.sum(kl) + f.gamma * tc + self.regularizer(vae_params)
    return loss, (dict(loss=loss, reconstruction=rec, tc_estimate=tc, **base.kl_metrics(kl)), z)

  def permute(self, rng, z):
    """The fake samples: over the global batch (default), or within each device's shard.

    ``permute_scope='local'`` permutes inside ``shard_map`` with a per-shard key, so no sample
    crosses devices (cheaper on large meshes; the product of marginals is then estimated per
    shard). With one device both are the same.
    """
    if self.config.factorvae.permute_scope == "local" and self.mesh is not None \
        and self.mesh.size > 1:
      spec = jax.sharding.PartitionSpec(mesh_lib.DATA_AXIS)

      def local(key, zz):
        return permute_dims(jax.random.fold_in(key, jax.lax.axis_index(mesh_lib.DATA_AXIS)), zz)

      return jax.shard_map(local, mesh=self.mesh, in_specs=(jax.sharding.PartitionSpec(), spec),
                           out_specs=spec)(rng, z)
    return permute_dims(rng, z)

  def disc_loss(self, disc_params, z, rng):
    z = jax.lax.stop_gradient(z)
    fake = self.permute(rng, z)
    logits = self.discriminator.apply({"params": disc_params}, jnp.concatenate([z, fake]))
    labels = jnp.concatenate([jnp.zeros(len(z), jnp.int32), jnp.ones(len(z), jnp.int32)])
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
    acc = jnp.mean(jnp.argmax(logits, -1) == labels)
    return jnp.mean(ce), dict(disc_loss=jnp.mean(ce), disc_accuracy=acc)

  def train_step(self, state, batch):
    rng = jax.random.fold_in(state.rng, state.step)
    k_vae, k_perm = jax.random.split(rng)
    disc_params = state.params["discriminator"]
    vae_grads, (metrics, z) = jax.grad(self.vae_loss, has_aux=True)(
        state.params["vae"], disc_params, batch, k_vae)
    disc_grads, disc_metrics = jax.grad(self.disc_loss, has_aux=True)(disc_params, z, k_perm)
    state = self.apply_update(state, "vae", vae_grads)
    updates, opt = self.disc_tx.update(disc_grads, state.opt_state["discriminator"], disc_params)
    params = dict(state.params, discriminator=optax.apply_updates(disc_params, updates))
    state = state.replace(params=params, opt_state=dict(state.opt_state, discriminator=opt))
    return state.replace(step=state.step + 1), dict(metrics, **disc_metrics)
