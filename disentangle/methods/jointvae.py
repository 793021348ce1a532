"""JointVAE (Dupont, NeurIPS 2018), the CascadeVAE Tables 1-4 baseline with a discrete code.

Latent: continuous z ~ q(z|x) = N(mean, diag exp(logvar)) and one or more categorical variables
c_i ~ q(c_i|x) = Cat(softmax(logits_i)) with uniform priors; the decoder sees concat(z, c_1, ...).
Loss of one minibatch at iteration t (Dupont 2018, Sec. 3, the joint capacity objective):

  -1/B sum_b log p(x_b | z_b, c_b) + gamma_z |C_z(t) - KL_z| + gamma_c |C_c(t) - KL_c|

- Reconstruction: Bernoulli, summed over pixels, mean over the batch (their BCE times num_pixels).
- KL_z = sum_j mean_b KL(q(z_j|x_b) || N(0, 1)); KL_c = sum_i mean_b KL(q(c_i|x_b) || U(K_i)),
  analytic (:func:`disentangle.losses.categorical_kl_uniform`).
- C(t) = :func:`disentangle.schedules.linear_capacity`: linear from C_min to C_max over N
  iterations, then constant; the discrete one is also capped at sum_i log K_i (the largest
  possible KL_c). Iterations count from 1, as their ``num_steps`` is incremented before the loss.
- Training samples z by reparameterisation and each c_i by Gumbel-softmax at temperature 0.67
  (:func:`disentangle.losses.gumbel_softmax_sample`); evaluation uses z = mean and c_i = the
  one-hot of argmax logits_i.

Settings in the authors' trained-model specs (C_min, C_max, N, gamma for z / for c): MNIST z10
c[10]: (0, 5, 25k, 30) both, Adam 5e-4; Fashion-MNIST z10 c[10]: (0, 5, 50k, 100) /
(0, 10, 50k, 100), 5e-4; dSprites z6 c[3]: (0, 40, 300k, 150) / (0, 1.1, 300k, 150), 5e-4;
batch 64 everywhere.

Where this differs from the authors' PyTorch code:
- The networks are the shared ones of CascadeVAE supplement Tables 5-6 (their own architecture
  "follows Dupont"): for 32x32 images Dupont's encoder is convs 32, 64, 64 where Table 6 says
  32, 32, 64 (``model.encoder_widths='dupont'`` gives Dupont's). The categorical heads are one
  dense layer of width sum_i K_i on the 256-unit trunk (``Encoder(extra_outputs=...)``) split into
  blocks (:mod:`disentangle.methods.categorical`): the same function as their one linear head per
  variable, only the initialisation scale differs.
- Their loss is divided by the number of pixels before the backward pass; Adam is nearly
  invariant to that scale (up to eps), so the loss here is not divided.
- log pi uses log_softmax rather than log(pi + 1e-12).

Evaluation interface: ``represent`` gives the encoder mean, log-variance and ``discrete`` =
argmax of the *first* categorical's logits (what the accuracy metrics read); ``decode(params, z,
d)`` takes d as int class indices of the first categorical (the other categoricals, if any, are
fed as zeros, as in Dupont's traversals without prior sampling); ``num_discrete`` is K_1.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections

from disentangle import config as config_lib
from disentangle import losses
from disentangle import schedules
from disentangle.methods import base
from disentangle.methods import categorical


def default_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.discrete_sizes = (3,)   # K_i of each categorical variable (dSprites: one with 3 classes)
  c.temperature = 0.67      # Gumbel-softmax temperature (Dupont's code)
  c.cont_min = 0.0          # C_z: from cont_min to cont_max over cont_steps, weight cont_gamma
  c.cont_max = 40.0
  c.cont_steps = 300_000
  c.cont_gamma = 150.0
  c.disc_min = 0.0          # C_c: the same, capped at sum_i log K_i
  c.disc_max = 1.1
  c.disc_steps = 300_000
  c.disc_gamma = 150.0
  return c


RULES = {
    "jointvae.discrete_sizes": config_lib.int_tuple(min_len=1, min_value=2),
    "jointvae.temperature": config_lib.POSITIVE,
    **schedules.linear_capacity_rules("jointvae.cont"),
    "jointvae.cont_gamma": config_lib.NONNEG,
    **schedules.linear_capacity_rules("jointvae.disc"),
    "jointvae.disc_gamma": config_lib.NONNEG,
}
STEP_FIELDS = ("jointvae.cont_steps", "jointvae.disc_steps")  # fields counting iterations


def smoke(c) -> None:
  """The smoke variant's schedule: both capacities reach their maxima within the short run."""
  c.jointvae.cont_steps = c.num_steps
  c.jointvae.disc_steps = c.num_steps


discrete_capacity_cap = categorical.capacity_cap  # sum_i log K_i


class JointVAE(base.VAEMethod):
  name = "jointvae"

  def __init__(self, config, image_shape, *, mesh=None):
    self.discrete_sizes = tuple(int(k) for k in config.jointvae.discrete_sizes)
    self.num_discrete = self.discrete_sizes[0]  # the code the evaluator sees (first categorical)
    super().__init__(config, image_shape, mesh=mesh)

  # -- construction ----------------------------------------------------------------------------
  def make_encoder(self, extra_outputs: int = 0):
    return super().make_encoder(extra_outputs=sum(self.discrete_sizes))

  def decoder_input_dim(self) -> int:
    return self.latent_dim + sum(self.discrete_sizes)

  # -- pieces ----------------------------------------------------------------------------------
  def split_logits(self, logits) -> list:
    """The encoder's extra head [..., sum K_i] -> one logits block [..., K_i] per categorical."""
    return categorical.split_blocks(logits, self.discrete_sizes)

  def decoder_input(self, z, d=None):
    """concat(z, one-hot d, zeros for the other categoricals); d = None (or -1) feeds zeros."""
    codes = [categorical.one_hot_or_zeros(d if i == 0 else None, k, z.shape[:-1], z.dtype)
             for i, k in enumerate(self.discrete_sizes)]
    return jnp.concatenate([z] + codes, axis=-1)

  def capacities(self, t):
    """(C_z(t), C_c(t)) at iteration t (counted from 1); C_c capped at sum_i log K_i."""
    j = self.config.jointvae
    c_z = schedules.linear_capacity(t, c_min=j.cont_min, c_max=j.cont_max,
                                    num_steps=j.cont_steps)
    c_c = schedules.linear_capacity(t, c_min=j.disc_min, c_max=j.disc_max,
                                    num_steps=j.disc_steps)
    return c_z, jnp.minimum(c_c, discrete_capacity_cap(self.discrete_sizes))

  def loss(self, params, batch, rng, t):
    """t: the iteration counted from 1 (Dupont's ``num_steps`` is incremented before the loss)."""
    j = self.config.jointvae
    vae_params = params["vae"]
    x = batch["image"]
    mean, logvar, logits = self.encode(vae_params, x)
    groups = self.split_logits(logits)
    k_z, k_c = jax.random.split(rng)
    z = losses.reparameterize(k_z, mean, logvar)
    codes = categorical.relaxed_codes(k_c, groups, j.temperature)
    latent = jnp.concatenate([z] + codes, axis=-1)
    rec = -jnp.mean(self.log_likelihood(self.decode_logits(vae_params, latent), x))
    kl_z = jnp.mean(losses.gaussian_kl_per_dim(mean, logvar), axis=0)
    kl_c = jnp.stack([jnp.mean(losses.categorical_kl_uniform(l)) for l in groups])
    c_z, c_c = self.capacities(t)
    cont_term = losses.capacity_penalty(jnp.sum(kl_z), c_z, j.cont_gamma)
    disc_term = losses.capacity_penalty(jnp.sum(kl_c), c_c, j.disc_gamma)
    loss = rec + cont_term + disc_term + self.regularizer(vae_params)
    metrics = dict(loss=loss, reconstruction=rec, capacity_cont=c_z, capacity_disc=c_c,
                   capacity_loss_cont=cont_term, capacity_loss_disc=disc_term,
                   kl_disc=jnp.sum(kl_c), kl_disc_per_var=kl_c, **base.kl_metrics(kl_z))
    return loss, metrics

  # -- evaluation ------------------------------------------------------------------------------
  def represent(self, params, images):
    """Means, log-variances and the argmax class of the first categorical (int32)."""
    mean, logvar, logits = self.encode(params["vae"], images)
    classes = categorical.argmax_classes(self.split_logits(logits))
    return {"mean": mean, "logvar": logvar, "discrete": classes[..., 0]}

  def reconstruct(self, params, images):
    """Dupont's reconstruction mode: z = mean and every c_i = one-hot(argmax logits_i)."""
    mean, _, logits = self.encode(params["vae"], images)
    codes = categorical.hard_codes(self.split_logits(logits), mean.dtype)
    latent = jnp.concatenate([mean] + codes, axis=-1)
    return jax.nn.sigmoid(self.decode_logits(params["vae"], latent))
