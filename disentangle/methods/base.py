"""What every method shares: the train state, the VAE parameters, the optimiser, the step shape.

A method is a small object built from the config. It owns pure functions only:

- ``init(rng) -> TrainState``;
- ``train_step(state, batch) -> (state, metrics)``: one jit-compilable update; randomness is
  ``fold_in(state.rng, state.step)``; ``metrics`` is a flat dict of scalars (or small vectors),
  read on host only at log steps;
- ``represent(params, images) -> dict`` with ``mean``, ``logvar`` and, for methods with a discrete
  code, ``discrete`` (int) — what the metrics see;
- ``reconstruct(params, images)`` and ``decode(params, z, d)`` -> pixel probabilities.

The state holds a dict of parameter trees and a dict of optimiser states with the same keys, so a
method with a discriminator or a supervised encoder step adds entries and alternates updates.
"""
from __future__ import annotations

from typing import Any

import flax
import jax
import jax.numpy as jnp
import optax

from disentangle import losses
from disentangle.nn import networks


@flax.struct.dataclass
class TrainState:
  step: jax.Array    # int32 scalar: completed updates
  params: Any        # {'vae': {'encoder': ..., 'decoder': ...}, ...}
  opt_state: Any     # {'vae': optax state, ...}
  rng: jax.Array     # base key; the step's key is fold_in(rng, step)


def adam(config) -> optax.GradientTransformation:
  o = config.optimizer
  return optax.adam(o.learning_rate, b1=o.b1, b2=o.b2, eps=o.eps)


class VAEMethod:
  """Shared pieces of the Gaussian-encoder / Bernoulli-decoder methods of the papers."""

  name = "vae"
  num_discrete = 0  # size of the discrete code fed to the decoder (CascadeVAE's S)
  mesh = None       # the trainer's mesh, for per-shard host work (``assignment_scope='local'``)

  def __init__(self, config, image_shape):
    self.config = config
    self.image_shape = tuple(image_shape)
    m = config.model
    self.latent_dim = m.latent_dim
    self.encoder = networks.Encoder(latent_dim=m.latent_dim, posterior_head=m.posterior_head,
                                    init_scheme=m.init, conv_impl=m.conv_impl)
    self.decoder = networks.Decoder(image_shape=self.image_shape, init_scheme=m.init,
                                    conv_impl=m.conv_impl)
    self.tx = adam(config)

  # -- construction ----------------------------------------------------------------------------
  def init_params(self, rng):
    k_enc, k_dec = jax.random.split(rng)
    x = jnp.zeros((1,) + self.image_shape, jnp.float32)
    latent = jnp.zeros((1, self.latent_dim + self.num_discrete), jnp.float32)
    return {"encoder": self.encoder.init(k_enc, x)["params"],
            "decoder": self.decoder.init(k_dec, latent)["params"]}

  def init(self, rng) -> TrainState:
    k_params, k_state = jax.random.split(rng)
    params = {"vae": self.init_params(k_params)}
    return TrainState(step=jnp.zeros((), jnp.int32), params=params,
                      opt_state={"vae": self.tx.init(params["vae"])}, rng=k_state)

  # -- pure pieces -----------------------------------------------------------------------------
  def encode(self, vae_params, images):
    return self.encoder.apply({"params": vae_params["encoder"]}, images)

  def decode_logits(self, vae_params, latent):
    return self.decoder.apply({"params": vae_params["decoder"]}, latent)

  def decoder_input(self, z, d=None):
    """concat(z, one-hot d); d = None (or -1 entries) feeds zeros, as before CascadeVAE's t_d."""
    if not self.num_discrete:
      return z
    if d is None:
      onehot = jnp.zeros(z.shape[:-1] + (self.num_discrete,), z.dtype)
    else:
      onehot = jax.nn.one_hot(d, self.num_discrete, dtype=z.dtype)  # -1 -> all zeros
    return jnp.concatenate([z, onehot], axis=-1)

  def decode(self, params, z, d=None):
    """Pixel probabilities for latents z [..., m] (and discrete codes d [...])."""
    return jax.nn.sigmoid(self.decode_logits(params["vae"], self.decoder_input(z, d)))

  # Whether row i of `represent` depends on image i alone (so it may run in micro-batches).
  rowwise_represent = True

  def represent(self, params, images):
    mean, logvar = self.encode(params["vae"], images)
    return {"mean": mean, "logvar": logvar}

  def reconstruct(self, params, images):
    rep = self.represent(params, images)
    return self.decode(params, rep["mean"], rep.get("discrete"))

  def regularizer(self, vae_params):
    wd = self.config.weight_decay
    return losses.l2_kernel_penalty(vae_params, wd) if wd else jnp.zeros((), jnp.float32)

  def apply_update(self, state: TrainState, name: str, grads) -> TrainState:
    updates, opt = self.tx.update(grads, state.opt_state[name], state.params[name])
    params = dict(state.params, **{name: optax.apply_updates(state.params[name], updates)})
    return state.replace(params=params, opt_state=dict(state.opt_state, **{name: opt}))


def kl_metrics(kl_per_dim) -> dict:
  """Per-dimension KL (mean over the batch) as a vector metric plus its sum."""
  return {"kl": jnp.sum(kl_per_dim), "kl_per_dim": kl_per_dim}
