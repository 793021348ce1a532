"""PartedVAE (Hajimiri, Lotfi, Soleymani Baghshah): class-related and class-independent factors.

Latents (Sec. 4, Figs. 1-3): z in R^{d_z} ~ q(z|x) (prior N(0, I)); K categorical variables c_i of
sizes ``parted.discrete_sizes`` = (L_1, ..., L_K), one dense head on h cut into blocks
(:mod:`disentangle.methods.categorical`); per variable a u_i in R^{d_u} ~ q(u_i | c_i, x) through
an attention block that sees c~_i alone (:mod:`disentangle.methods.partedvae_nets`), with a
learned Gaussian-mixture prior p_psi(u_i | c_i = k) (``params['vae']['prior']``). The decoder sees
concat(z, u_1, ..., u_K), never c (Tables 3-5 and the authors' code; Eq. 1 writes p(x|c,u,z)).

Objective of one minibatch of B images at iteration t = step + 1 (Eq. 6; multi-label form App. A.5):

  rec  = -1/B sum_b log p(x_b | z_b, u_b)        (Bernoulli, or L1 for CelebA: model.likelihood)
  z    = gamma_z |C_z(t) - sum_j mean_b KL(q(z_j|x_b) || N(0, 1))|
  u    = gamma_u |C_u(t) - sum_i mean_b sum_k q(c_i=k|x_b) KL(q(u_i|c_i=k, x_b) || p_psi(u_i|c_i=k))|
  h    = gamma_h sum_i mean_b H(q(c_i|x_b))      (replaces term A of Eq. 3)
  c    = gamma_c sum_i KL(q_hat(c_i) || p(c_i)), q_hat(c_i) = mean_b q(c_i|x_b) (Sec. 4.4)
  bc   = gamma_bc sum_i sum_{k<l} max(BC(p_psi(u_i|c_i=k), p_psi(u_i|c_i=l)) - delta, 0)
  loss = rec + z + u + h + c + bc + weight decay

- Every term comes from :mod:`disentangle.mixture` / :mod:`disentangle.losses`. Eq. 6 prints
  gamma (E KL - C) without the absolute value (C would then be a constant offset); Sec. 4.3 follows
  Burgess et al.'s controlled capacity and the authors' code uses gamma |C - KL|, as here
  (``losses.capacity_penalty``); C(t) = ``schedules.linear_capacity`` from the capacities' min.
- bc: Eqs. 5-6 sum j from i, so k = l is included, where BC = 1: a constant gamma_bc L_i
  max(1 - delta, 0) without gradient. The authors sum k > l; so does this (``mixture``).
- u (``parted.u_kl``): ``'expected'`` (default, Eq. 2): q(u_i | c_i = k, x) from the attention at
  c~_i = e_k, L_i small passes; ``'sampled'`` (authors' code): the one q(u_i|x) of the sampled c~_i,
  compared with every component k and weighted by q(c_i=k|x). The default stays Eq. 2: on MNIST
  with 256 labels at a fifth of the schedule (seed 0) it ended at 94.4 % against 91.3 %
  (docs/results.md).
- q_hat (``parted.qc_scope``): ``'global'`` (default) over the global batch (the paper's when it is
  64); ``'local'``: per shard inside ``shard_map``, the shards' KLs averaged.
- Training samples z, u by reparameterisation and c~_i by Gumbel-softmax at ``parted.temperature``
  (0.67); evaluation uses the means and c~_i = one-hot argmax, attention sharpness s_max.

Semi-supervision (Sec. 4.5, Eq. 7), both updates in one compiled step with one ``state.step``:
1. L_S = mean over the B_l labelled images of -sum_i log q(c_i = y_i | x) (y_i = -1 skips
   variable i), through its own Adam (``parted.sup_learning_rate``) on the encoder trunk and the c
   head only (``optimizers.on_subtrees``): every other leaf stays bitwise unchanged.
2. Eq. 6 on the image batch at the parameters after step 1 (the authors' order), every parameter
   through the model Adam.
``parted.num_labelled = 0`` drops step 1 (Table 1, unsupervised); ``parted.unsupervised = False``
keeps only step 1 (the paper's 256-label classifier, 83% on MNIST).

ReduceLROnPlateau (App. D; ``parted.plateau``): ``optax.contrib.reduce_on_plateau`` after each
Adam, fed the step's loss (model) / cross-entropy (supervised), averaged over
``parted.plateau_epoch_steps`` iterations (one epoch). ``*_patience`` are PyTorch's (reduce after
patience + 1 bad epochs); optax reduces after ``patience`` bad ones, so it gets patience + 1.

Evaluation interface: ``represent`` -> mean = concat(mu_z, mu_u), logvar likewise (the authors'
representation), ``discrete`` = argmax of the first variable, ``discrete_codes`` [n, K] every
argmax; ``decode(params, z, d)`` takes z = concat(z, u) and a d >= 0 replaces u_1 by the prior mean
mu_{1,d} (the decoder does not see c); ``generate`` samples the generative process (Sec. 4.4);
``evaluation_pictures`` draws Figs. 4-10 for the evaluator (`partedvae_figures.mixture_pictures`).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from disentangle import config as config_lib
from disentangle import losses
from disentangle import mixture
from disentangle import schedules
from disentangle import sharding
from disentangle.data.labels import batch_spec as batch_spec_lib
from disentangle.methods import base
from disentangle.methods import categorical
from disentangle.methods import optimizers as optim
from disentangle.methods import partedvae_config as cfg
from disentangle.methods import partedvae_figures
from disentangle.methods import partedvae_nets as nets
from disentangle.nn import networks

default_config = cfg.default_config
RULES = cfg.RULES
STEP_FIELDS = cfg.STEP_FIELDS
check = cfg.check
smoke = cfg.smoke
check_data = cfg.check_data


class PartedVAE(base.VAEMethod):
  name = "partedvae"

  def __init__(self, config, image_shape, *, mesh=None):
    p = config.parted
    self.sizes = tuple(int(k) for k in p.discrete_sizes)
    self.u_dim = int(p.u_dim)
    self.num_discrete = self.sizes[0]  # the code the evaluator sees (first variable)
    self.supervised = p.num_labelled > 0
    self.unsupervised = bool(p.unsupervised)
    if self.supervised and mesh is not None and p.labelled_batch_size % mesh.size:
      raise config_lib.ConfigError(
          f"config field 'parted.labelled_batch_size' ({p.labelled_batch_size}) must be "
          f"divisible by the number of devices ({mesh.size})")
    cfg.require_labels_file(config)
    if p.prior_c:
      self.prior_c = [jnp.asarray(v, jnp.float32) for v in p.prior_c]
    else:
      self.prior_c = [jnp.full((k,), 1.0 / k, jnp.float32) for k in self.sizes]
    super().__init__(config, image_shape, mesh=mesh)

  @classmethod
  def batch_spec(cls, config) -> batch_spec_lib.BatchSpec:
    """Images, plus the labelled stream of ``parted.targets`` when ``num_labelled > 0``."""
    p = config.parted
    if not p.num_labelled:
      return batch_spec_lib.IMAGES_ONLY
    fields = (("rule", "parted.labelled_subset"), ("num_labelled", "parted.num_labelled"),
              ("batch_size", "parted.labelled_batch_size"), ("seed", "parted.labelled_seed"))
    labelled = batch_spec_lib.LabelledSpec(
        rule=p.labelled_subset, num_labelled=p.num_labelled, batch_size=p.labelled_batch_size,
        seed=p.labelled_seed, field="parted", fields=fields)
    return batch_spec_lib.BatchSpec(targets=tuple(p.targets), labelled=labelled,
                                    fields=(("targets", "parted.targets"),))

  @classmethod
  def check_data(cls, config, dataset) -> None:
    """Label classes fit their variables (``ConfigError`` naming ``parted.targets``); for the
    trainer to call beside ``make_source`` (which checks the label names)."""
    cfg.check_data(config, dataset)

  # -- construction ----------------------------------------------------------------------------
  def make_encoder(self, extra_outputs: int = 0):
    return super().make_encoder(extra_outputs=sum(self.sizes))

  def decoder_input_dim(self) -> int:
    return self.latent_dim + len(self.sizes) * self.u_dim

  def init_params(self, rng):
    k_base, k_heads, k_prior = jax.random.split(rng, 3)
    params = super().init_params(k_base)
    params["heads"] = nets.init_heads(k_heads, self.sizes, self.config.model.hidden_units,
                                      self.u_dim, self.config.model.init)
    params["prior"] = nets.init_prior(k_prior, self.sizes, self.u_dim)
    return params

  def trunk_subtrees(self) -> tuple[str, ...]:
    """The supervised optimiser's leaves: the trunk's convs and dense layer, and the c head."""
    widths = networks.ENCODER_WIDTHS[self.config.model.encoder_widths][self.image_shape[0]]
    return tuple(f"encoder/conv{i}" for i in range(len(widths))) + ("encoder/fc", "encoder/extra")

  def make_optimizers(self):
    p = self.config.parted
    out = {}
    if self.unsupervised:
      tx = base.adam(self.config)
      if p.plateau:
        tx = optim.with_plateau(tx, factor=p.plateau_factor, patience=p.plateau_patience + 1,
                                rtol=p.plateau_rtol, cooldown=p.plateau_cooldown,
                                accumulation_size=p.plateau_epoch_steps)
      out["vae"] = optim.optimizer("vae", tx)
    if self.supervised:
      o = self.config.optimizer
      tx = optim.on_subtrees(optim.adam(p.sup_learning_rate, b1=o.b1, b2=o.b2, eps=o.eps),
                             self.trunk_subtrees())
      if p.plateau:
        tx = optim.with_plateau(tx, factor=p.sup_plateau_factor,
                                patience=p.sup_plateau_patience + 1, rtol=p.sup_plateau_rtol,
                                cooldown=p.sup_plateau_cooldown,
                                accumulation_size=p.plateau_epoch_steps)
      out["supervised"] = optim.optimizer("vae", tx)
    return out

  # -- pieces ----------------------------------------------------------------------------------
  def encode_all(self, vae_params, images):
    """(mu_z, logvar_z, c logit blocks, h) of ``images``."""
    mean, logvar, logits, h = self.encoder.apply({"params": vae_params["encoder"]}, images,
                                                 return_hidden=True)
    return mean, logvar, categorical.split_blocks(logits, self.sizes), h

  def sharpness(self, t):
    p = self.config.parted
    return nets.sharpness(t, start=p.sharpness_start, step=p.sharpness_step,
                          maximum=p.sharpness_max)

  def eval_sharpness(self) -> float:
    p = self.config.parted
    return nets.eval_sharpness(start=p.sharpness_start, step=p.sharpness_step,
                               maximum=p.sharpness_max)

  def capacities(self, t):
    """(C_z(t), C_u(t)): linear from min to max over their steps (Table 6), t from 1."""
    p = self.config.parted
    return (schedules.linear_capacity(t, c_min=p.z_capacity_min, c_max=p.z_capacity_max,
                                      num_steps=p.z_capacity_steps),
            schedules.linear_capacity(t, c_min=p.u_capacity_min, c_max=p.u_capacity_max,
                                      num_steps=p.u_capacity_steps))

  def prior_components(self, vae_params) -> list:
    return nets.prior_components(vae_params["prior"], self.sizes)

  def u_kls(self, vae_params, h, blocks, u_parts, s):
    """E_q(c_i|x) KL(q(u_i|c_i, x) || p_psi(u_i|c_i)) per variable [K] (``parted.u_kl``)."""
    out = []
    for i, (block, comp) in enumerate(zip(blocks, self.prior_components(vae_params))):
      q_c = jax.nn.softmax(block, axis=-1)
      if self.config.parted.u_kl == "expected":
        eye = jnp.eye(self.sizes[i], dtype=h.dtype)
        mean, logvar = nets.u_posterior(vae_params["heads"], i, h[:, None, :], eye, s)
      else:
        mean, logvar = u_parts[i]
      out.append(mixture.expected_gaussian_kl(q_c, mean, logvar, *comp))
    return jnp.stack(out)

  def qc_kl(self, block, prior):
    """KL(q_hat(c_i) || p(c_i)) over the global batch, or the mean of the shards' KLs."""
    fn = lambda l: mixture.aggregate_categorical_kl(l, prior)
    if self.config.parted.qc_scope == "global" or not sharding.is_sharded(self.mesh):
      return fn(block)
    per_shard = sharding.per_shard(lambda l: fn(l)[None], self.mesh, in_specs=sharding.BATCH,
                                   out_specs=sharding.BATCH)(block)
    return jnp.mean(per_shard)

  def loss(self, params, batch, rng, t):
    """Eq. 6 (App. A.5) of the image batch at iteration t (counted from 1)."""
    p = self.config.parted
    vae_params = params["vae"]
    x = batch["image"]
    mean_z, logvar_z, blocks, h = self.encode_all(vae_params, x)
    k_z, k_c, k_u = jax.random.split(rng, 3)
    z = losses.reparameterize(k_z, mean_z, logvar_z)
    codes = categorical.relaxed_codes(k_c, blocks, p.temperature)
    s = self.sharpness(t)
    u_parts = [nets.u_posterior(vae_params["heads"], i, h, c, s) for i, c in enumerate(codes)]
    mean_u = jnp.concatenate([m for m, _ in u_parts], axis=-1)
    logvar_u = jnp.concatenate([v for _, v in u_parts], axis=-1)
    u = losses.reparameterize(k_u, mean_u, logvar_u)
    logits = self.decode_logits(vae_params, jnp.concatenate([z, u], axis=-1))
    rec = -jnp.mean(self.log_likelihood(logits, x))

    kl_z = jnp.mean(losses.gaussian_kl_per_dim(mean_z, logvar_z), axis=0)
    kl_u = self.u_kls(vae_params, h, blocks, u_parts, s)
    entropy = jnp.stack([mixture.categorical_entropy(b) for b in blocks])
    kl_qc = jnp.stack([self.qc_kl(b, pr) for b, pr in zip(blocks, self.prior_c)])
    comps = self.prior_components(vae_params)
    bc = jnp.stack([mixture.bhattacharyya_penalty(m, v, p.bc_threshold) for m, v in comps])
    c_z, c_u = self.capacities(t)
    terms = dict(
        reconstruction=rec,
        z_term=losses.capacity_penalty(jnp.sum(kl_z), c_z, p.gamma_z),
        u_term=losses.capacity_penalty(jnp.sum(kl_u), c_u, p.gamma_u),
        h_term=p.gamma_h * jnp.sum(entropy),
        c_term=p.gamma_c * jnp.sum(kl_qc),
        bc_term=p.gamma_bc * jnp.sum(bc),
        regularizer=self.regularizer(vae_params))
    loss = sum(terms.values())
    metrics = dict(loss=loss, **terms, kl_u=jnp.sum(kl_u), kl_u_per_var=kl_u,
                   kl_qc=jnp.sum(kl_qc), kl_qc_per_var=kl_qc, entropy_per_var=entropy,
                   mean_bc=jnp.mean(jnp.concatenate(
                       [mixture.mean_offdiagonal_bc(m, v)[None] for m, v in comps])),
                   sharpness=s, capacity_z=c_z, capacity_u=c_u, **base.kl_metrics(kl_z))
    for i, b in enumerate(blocks):
      metrics[f"qc_hat_{i}"] = jnp.exp(mixture.aggregate_log_posterior(b))
    return loss, metrics

  def supervised_loss(self, params, batch):
    """Eq. 7: mean over the labelled batch of -sum_i log q(c_i = y_i | x); y_i = -1 skipped."""
    x, y = batch["labelled_image"], batch["labelled_targets"]
    _, _, blocks, _ = self.encode_all(params["vae"], x)
    ce = jnp.zeros(x.shape[0], jnp.float32)
    correct = known = jnp.zeros((), jnp.float32)
    for i, block in enumerate(blocks):
      yi = y[:, i]
      mask = yi >= 0
      log_q = jax.nn.log_softmax(block, axis=-1)
      picked = jnp.take_along_axis(log_q, jnp.maximum(yi, 0)[:, None], axis=-1)[:, 0]
      ce = ce - jnp.where(mask, picked, 0.0)
      correct = correct + jnp.sum(mask & (jnp.argmax(block, axis=-1) == yi))
      known = known + jnp.sum(mask)
    loss = jnp.mean(ce)
    return loss, dict(sup_loss=loss, sup_accuracy=correct / jnp.maximum(known, 1.0))

  # -- the step --------------------------------------------------------------------------------
  def train_step(self, state, batch):
    """Supervised update (trunk and c head), then Eq. 6 at the new parameters; one step."""
    rng, t = self.step_key(state)
    metrics = {}
    if self.supervised:
      (ce, sup), grads = self.gradients(self.supervised_loss, state.params, batch)
      state = self.apply_update(state, "supervised", grads["vae"], value=ce)
      metrics.update(sup)
      if not self.unsupervised:
        metrics["loss"] = ce
    if self.unsupervised:
      (loss, m), grads = self.gradients(self.loss, state.params, batch, rng, t)
      state = self.apply_update(state, "vae", grads["vae"], value=loss)
      metrics.update(m)
    for name in self.optimizers:
      scale = optim.plateau_scale(state.opt_state[name])
      if scale is not None:
        metrics[f"lr_scale_{name}"] = scale
    return self.advance(state), metrics

  # -- evaluation ------------------------------------------------------------------------------
  def eval_latents(self, vae_params, images):
    """(mu_z, logvar_z, mu_u, logvar_u, blocks) at evaluation: c~_i = one-hot argmax, s_max."""
    mean_z, logvar_z, blocks, h = self.encode_all(vae_params, images)
    codes = categorical.hard_codes(blocks, h.dtype)
    mean_u, logvar_u = nets.all_u_posteriors(vae_params["heads"], h, codes,
                                             self.eval_sharpness())
    return mean_z, logvar_z, mean_u, logvar_u, blocks

  def represent(self, params, images):
    """mean = concat(mu_z, mu_u), logvar likewise; ``discrete`` first argmax; all K argmaxes."""
    mean_z, logvar_z, mean_u, logvar_u, blocks = self.eval_latents(params["vae"], images)
    classes = categorical.argmax_classes(blocks)
    return {"mean": jnp.concatenate([mean_z, mean_u], axis=-1),
            "logvar": jnp.concatenate([logvar_z, logvar_u], axis=-1),
            "discrete": classes[..., 0], "discrete_codes": classes}

  def prior_mode_latent(self, vae_params, z, d=None):
    """z = concat(z, u); d >= 0 replaces u_1 by the prior mean mu_{1,d} (-1 / None: as is)."""
    if d is None:
      return z
    means = self.prior_components(vae_params)[0][0]  # [L_1, d_u]
    d = jnp.asarray(d)
    lo, hi = self.latent_dim, self.latent_dim + self.u_dim
    u1 = jnp.where((d >= 0)[..., None], means[jnp.maximum(d, 0)], z[..., lo:hi])
    return jnp.concatenate([z[..., :lo], u1, z[..., hi:]], axis=-1)

  def decode(self, params, z, d=None):
    """Pixel means of latents z = concat(z, u) [..., d_z + K d_u]; d: see prior_mode_latent."""
    latent = self.prior_mode_latent(params["vae"], z, d)
    return jax.nn.sigmoid(self.decode_logits(params["vae"], latent))

  def reconstruct(self, params, images):
    """Decode the evaluation means (mu_z, mu_u) of ``images``."""
    mean_z, _, mean_u, _, _ = self.eval_latents(params["vae"], images)
    latent = jnp.concatenate([mean_z, mean_u], axis=-1)
    return jax.nn.sigmoid(self.decode_logits(params["vae"], latent))

  def generate(self, params, rng, num: int):
    """Sec. 4.4: c0 ~ p(c), u_i ~ p_psi(u_i | c0_i), z ~ N(0, I); pixel means [num, H, W, C]."""
    keys = jax.random.split(rng, 2 * len(self.sizes) + 1)
    parts = [jax.random.normal(keys[-1], (num, self.latent_dim))]
    for i, ((means, logvars), prior) in enumerate(zip(self.prior_components(params["vae"]),
                                                      self.prior_c)):
      c0 = jax.random.categorical(keys[2 * i], jnp.log(prior), shape=(num,))
      eps = jax.random.normal(keys[2 * i + 1], (num, self.u_dim))
      parts.append(means[c0] + jnp.exp(0.5 * logvars[c0]) * eps)
    return jax.nn.sigmoid(self.decode_logits(params["vae"], jnp.concatenate(parts, axis=-1)))

  def mixture_prior(self, params) -> dict:
    """The mixture prior as plain arrays for `partedvae_figures.mixture_pictures`: per variable
    the component means and log-variances [L_i, d_u] and p(c_i) [L_i], d_z, d_u, and the
    variables' names (``parted.targets`` when they name every variable, else c0, c1, ...)."""
    pairs = self.prior_components(params["vae"])
    names = tuple(self.batch_spec(self.config).targets)
    if len(names) != len(pairs):
      names = tuple(f"c{i}" for i in range(len(pairs)))
    return {"means": [np.asarray(m, np.float64) for m, _ in pairs],
            "logvars": [np.asarray(v, np.float64) for _, v in pairs],
            "weights": [np.asarray(w, np.float64) for w in self.prior_c],
            "z_dim": int(self.latent_dim), "u_dim": int(self.u_dim), "names": names}

  def evaluation_pictures(self, params, images, rep, *, decode, span, values) -> dict:
    """z and u traversals, attribute transfer, prior components, samples (Figs. 4-10;
    `partedvae_figures.mixture_pictures`), concat(z, u) decoded as it is (d = None)."""
    def decode_latent(z):
      return np.asarray(decode(params, jnp.asarray(z, jnp.float32), None))
    return partedvae_figures.mixture_pictures(self.mixture_prior(params), decode_latent, images,
                                              rep, span=span, values=values)
