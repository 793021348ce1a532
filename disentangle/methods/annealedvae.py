"""AnnealedVAE (Burgess et al. 2018), one of the six models of Locatello et al. 2019.

The beta-VAE objective with a controlled capacity (Burgess et al., "Understanding disentangling
in beta-VAE", Eq. 8):

  loss = -1/B sum_b log p(x_b | z_b) + gamma |KL - C(t)|

with KL = sum_j mean_b KL(q(z_j | x_b) || N(0, 1)) (analytic, the batch mean, as in
disentanglement_lib) and the capacity C rising linearly from 0 to ``c_max`` over
``iteration_threshold`` updates, then constant (:func:`capacity`, through
:func:`disentangle.schedules.linear_capacity`; the penalty is
:func:`disentangle.losses.capacity_penalty`, JointVAE's continuous term).

disentanglement_lib (`methods/unsupervised/vae.py`: ``AnnealedVAE``, ``anneal``) reads
C = min(c_max, c_max * step / iteration_threshold) at the global step before the update, so
update t (counted from 1 here) sees C(t - 1): 0 at the first update, c_max from update
iteration_threshold + 1 on. Here the same. Their study (`unsupervised_study_v1`): gamma = 1000,
iteration_threshold = 100,000 of 300,000 steps, c_max in {5, 10, 25, 50, 75, 100}.
"""
from __future__ import annotations

import jax.numpy as jnp
import ml_collections

from disentangle import config as config_lib
from disentangle import losses
from disentangle import schedules
from disentangle.methods import base


def default_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.gamma = 1000.0                 # weight of |KL - C| (the study's fixed value)
  c.c_max = 25.0                   # the capacity reached, in nats (study grid: 5 ... 100)
  c.iteration_threshold = 100_000  # updates over which C rises from 0 to c_max
  return c


RULES = {
    "annealedvae.gamma": config_lib.NONNEG,
    "annealedvae.c_max": config_lib.NONNEG,
    "annealedvae.iteration_threshold": config_lib.POSITIVE,
}
STEP_FIELDS = ("annealedvae.iteration_threshold",)  # fields counting iterations


def smoke(c) -> None:
  """The smoke variant's schedule: C reaches c_max at the study's third of the run."""
  c.annealedvae.iteration_threshold = max(1, c.num_steps // 3)


def capacity(t, *, c_max, iteration_threshold):
  """C at update t (counted from 1): disentanglement_lib's ``anneal`` at its step t - 1."""
  return schedules.linear_capacity(jnp.asarray(t) - 1, c_min=0.0, c_max=c_max,
                                   num_steps=iteration_threshold)


class AnnealedVAE(base.VAEMethod):
  name = "annealedvae"

  def latent_regularizer(self, params, outputs, rng, t):
    """gamma |KL - C(t)| (Burgess et al., Eq. 8); it replaces the KL, which is only logged."""
    del params, rng
    a = self.config.annealedvae
    c = capacity(t, c_max=a.c_max, iteration_threshold=a.iteration_threshold)
    return losses.capacity_penalty(jnp.sum(outputs.kl), c, a.gamma), dict(capacity=c)
