"""FFVAE: flexibly fair representations (Creager et al., ICML 2019; shared: App. A-E).

Latent [z, b] of m = ``model.latent_dim`` Gaussian dimensions, prior N(0, I): the last
n_b = len(``ffvae.sensitive``) dimensions are b, b_j paired with the binary attribute a_j
(``sensitive_dims``: name -> column), the first m - n_b are z. Loss of one minibatch (Eq. 4 as
summarised in ``shared/notes/reference-facts.md``; Eqs. 5-6):

  L = -mean log p(x | z, b) + mean KL(q(z, b | x) || N(0, I))
      - alpha mean sum_j log p(a_j | b_j) + gamma mean (l_real - l_fake)(z, b),

log p(a_j | b_j) = a_j b_j - softplus(b_j) (Bernoulli with logit b_j: ``losses.
bernoulli_log_likelihood``), (l_real, l_fake) the discriminator's two logits at the sampled
[z, b]: Eq. 6's E_q[log d(u=1|z,b) - log d(u=0|z,b)], the density-ratio estimate of
KL(q(z, b) || q(z) prod_j q(b_j)).

Discriminator (App. A, C): the shared :class:`~disentangle.methods.discriminator.Discriminator`
(5 hidden dense layers of 1000 units, LeakyReLU 0.2, two logits) on stop-gradient [z, b]; fake
samples permute z as ONE block and each b_j alone along the batch (``permute_groups`` with the
groups of :func:`latent_groups`), B real and B fake rows, the standard cross-entropy (App. A's
Eq. 7 as printed puts both terms on the wrong classes; its text says "the standard cross entropy
loss"). Single-step alternating updates with both gradients at the same parameters (App. A),
Adam lr 1e-3, (0.9, 0.999) for both (App. D, App. A "optimizers with the same settings"). The
step, the discriminator loss and the parameter groups are FactorVAE's (this class subclasses it);
only the grouping of the fake samples, the predictor term and the settings differ.

alpha = 0 is FactorVAE on [z, b] with FFVAE's grouping (App. E: "alpha = 0 is equivalent to the
FactorVAE"): the b dimensions are then ordinary latents, unsupervised.

Our reading where the shared text is silent (config fields; the authors' code is not public and
would settle each):

- ``ffvae.b_kl`` (default True): the KL covers b as well (Eq. 4's KL(q(z, b|x) || p(z, b)));
  False: b is deterministic (its mean), with no KL, as one public re-implementation does.
- ``ffvae.predictor_input`` (default ``"sample"``): log p(a|b) at the sampled b, a one-sample
  estimate of its expectation under q; ``"mean"``: at the posterior mean.
- ``model.likelihood`` Bernoulli on logits (dSprites is binary; App. C does not say).
- The same minibatch feeds both updates (one data stream for every method, as FactorVAE here).
- ``ffvae.permute_scope``: ``"global"`` (default: over the global batch, the paper's when that is
  64) or ``"local"`` (within each device's shard; the product of marginals is then estimated per
  shard). ``batch_size`` (per shard for ``"local"``) must be >= 2.
"""
from __future__ import annotations

import jax.numpy as jnp
import ml_collections
import optax

from disentangle import config as config_lib
from disentangle import losses
from disentangle.data.labels import batch_spec as batch_spec_lib
from disentangle.methods import base
from disentangle.methods import discriminator as disc_lib
from disentangle.methods import factorvae
from disentangle.methods import optimizers as optim

# dSprites' binarised factors (App. B); "color" is constant there and never an attribute.
DSPRITES_SENSITIVE = ("shape", "scale", "orientation", "pos_x", "pos_y")
CONSTANT_ATTRIBUTES = ("color",)
PREDICTOR_INPUTS = ("sample", "mean")
PERMUTE_SCOPES = ("global", "local")
REMOVE_MODES = ("drop", "noise")  # = evaluation.fair_classification.REMOVE_MODES (methods/ may not
                                  # import train/; tests/test_ffvae.py checks they agree)


def default_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.alpha = 300.0   # ln(gamma / alpha) = -2.0: where Fig. 7b places the highest MIGs
  c.gamma = 40.0
  c.sensitive = DSPRITES_SENSITIVE  # attributes a_j with one b_j each (last dims of the latent)
  c.b_kl = True
  c.predictor_input = "sample"
  c.disc_hidden = 1000             # App. C: 5 hidden layers of 1000 units
  c.disc_layers = 5
  c.disc_learning_rate = 1e-3      # App. D / App. A: Adam 1e-3 (0.9, 0.999), as the VAE
  c.disc_b1 = 0.9
  c.disc_b2 = 0.999
  c.permute_scope = "global"
  # The fair-classification audit of a trained run (experiments/fair_classification.py;
  # evaluation.fair_classification): target, audited subgroup, removal, sizes, classifier settings.
  c.fair = ml_collections.ConfigDict()
  c.fair.target = "pos_x"          # a binarised attribute outside the subgroup
  c.fair.subgroup = ("shape",)     # attributes whose b_j are removed (each in ffvae.sensitive)
  c.fair.remove = "drop"
  c.fair.representation = "mean"  # 'mean': posterior means (represent); 'sample': a draw of q
  c.fair.train_size = 50_000
  c.fair.validation_size = 10_000
  c.fair.test_size = 10_000
  c.fair.seed = 0
  c.fair.batch_size = 64
  c.fair.max_epochs = 100
  return c


def _names_ok(v) -> bool:
  return (isinstance(v, (tuple, list)) and len(v) > 0 and all(isinstance(n, str) for n in v)
          and len(set(v)) == len(v) and not set(v) & set(CONSTANT_ATTRIBUTES))


# A non-empty tuple of distinct attribute names, none of them constant.
ATTRIBUTE_NAMES: config_lib.Rule = (
    _names_ok, "a non-empty tuple of distinct attribute names, without 'color' (constant in "
               "dSprites: one colour, App. B's 'Color >= 1' is always 0)")

RULES = {
    "ffvae.alpha": config_lib.NONNEG,
    "ffvae.gamma": config_lib.NONNEG,
    "ffvae.sensitive": ATTRIBUTE_NAMES,
    "ffvae.predictor_input": config_lib.one_of(*PREDICTOR_INPUTS),
    "ffvae.disc_hidden": config_lib.POSITIVE,
    "ffvae.disc_layers": config_lib.POSITIVE,
    "ffvae.disc_learning_rate": config_lib.POSITIVE,
    "ffvae.disc_b1": config_lib.PROBABILITY_OPEN1,
    "ffvae.disc_b2": config_lib.PROBABILITY_OPEN1,
    "ffvae.permute_scope": config_lib.one_of(*PERMUTE_SCOPES),
    "ffvae.fair.subgroup": ATTRIBUTE_NAMES,
    "ffvae.fair.remove": config_lib.one_of(*REMOVE_MODES),
    "ffvae.fair.representation": config_lib.one_of("mean", "sample"),
    "ffvae.fair.train_size": config_lib.POSITIVE,
    "ffvae.fair.validation_size": config_lib.POSITIVE,
    "ffvae.fair.test_size": config_lib.POSITIVE,
    "ffvae.fair.seed": config_lib.NONNEG,
    "ffvae.fair.batch_size": config_lib.POSITIVE,
    "ffvae.fair.max_epochs": config_lib.POSITIVE,
}
STEP_FIELDS = ()


def check_config(config, num_shards: int = 1) -> None:
  """The cross-field rules (``ConfigError`` naming the field), before anything compiles.

  z must keep a dimension (len(sensitive) <= latent_dim - 1); each permutation scope needs >= 2
  rows (``batch_size`` / ``num_shards`` for ``"local"``); the audit's subgroup must be sensitive
  and its target outside it.
  """
  f, m = config.ffvae, config.model.latent_dim
  names = tuple(f.sensitive)
  if len(names) > m - 1:
    raise config_lib.ConfigError(
        f"config field 'ffvae.sensitive' names {len(names)} attributes {list(names)}, but "
        f"model.latent_dim = {m} leaves z no dimension: at most {m - 1} (latent_dim - 1)")
  rows = config.batch_size // (num_shards if f.permute_scope == "local" else 1)
  if rows < 2:
    raise config_lib.ConfigError(
        f"config field 'batch_size' ({config.batch_size}) must give >= 2 rows per permutation "
        f"scope ({f.permute_scope!r}, {num_shards} shard(s)): the fake samples permute the batch")
  check_fair(config)


def check(config) -> None:
  """The registry's cross-field hook (``methods.validate``): :func:`check_config` on one shard
  (the per-shard rows of ``permute_scope='local'`` are checked again when the mesh is known)."""
  check_config(config)


def check_fair(config, target: str | None = None, subgroup=None) -> None:
  """``ffvae.fair``: the subgroup within ``ffvae.sensitive``, the target not in the subgroup."""
  fair, sensitive = config.ffvae.fair, tuple(config.ffvae.sensitive)
  target = fair.target if target is None else target
  subgroup = tuple(fair.subgroup if subgroup is None else subgroup)
  outside = [n for n in subgroup if n not in sensitive]
  if outside:
    raise config_lib.ConfigError(
        f"config field 'ffvae.fair.subgroup': {outside} have no b dimension; the sensitive "
        f"attributes (ffvae.sensitive) are {list(sensitive)}")
  if target in subgroup:
    raise config_lib.ConfigError(
        f"config field 'ffvae.fair.target' ({target!r}) lies in the audited subgroup "
        f"{list(subgroup)} (ffvae.fair.subgroup): pick a target outside it")
  if target in CONSTANT_ATTRIBUTES:
    raise config_lib.ConfigError(f"config field 'ffvae.fair.target': {target!r} is constant")


def sensitive_dims(config) -> dict[str, int]:
  """Attribute name -> column of its b_j: the last n_b of the m latent dimensions, in order."""
  names, m = tuple(config.ffvae.sensitive), config.model.latent_dim
  return {name: m - len(names) + j for j, name in enumerate(names)}


def latent_groups(latent_dim: int, num_sensitive: int) -> tuple[tuple[int, ...], ...]:
  """FFVAE's product of marginals q(z) prod_j q(b_j): z one group, each b_j its own (App. A)."""
  num_z = latent_dim - num_sensitive
  return (tuple(range(num_z)),) + tuple((j,) for j in range(num_z, latent_dim))


def predictor_log_likelihood(b_logits, attributes):
  """log p(a | b) = sum_j a_j b_j - softplus(b_j) per example (Bernoulli with logits b)."""
  return losses.bernoulli_log_likelihood(b_logits, attributes.astype(b_logits.dtype), axis=-1)


class FFVAE(factorvae.FactorVAE):
  """FFVAE on [z, b]; FactorVAE's step, discriminator loss and groups with FFVAE's grouping."""

  name = "ffvae"

  def __init__(self, config, image_shape, *, mesh=None):
    num_shards = 1 if mesh is None else mesh.devices.size
    check_config(config, num_shards)
    f = config.ffvae
    self.sensitive = tuple(f.sensitive)
    self.sensitive_dims = sensitive_dims(config)
    self.discriminator = disc_lib.Discriminator(hidden=f.disc_hidden, layers=f.disc_layers)
    base.VAEMethod.__init__(self, config, image_shape, mesh=mesh)  # FactorVAE's reads .factorvae
    self.groups_of_latent = latent_groups(self.latent_dim, len(self.sensitive))

  @classmethod
  def batch_spec(cls, config) -> batch_spec_lib.BatchSpec:
    """Images and the sensitive attributes a_j, by name (checked against the dataset)."""
    return batch_spec_lib.BatchSpec(attributes=tuple(config.ffvae.sensitive),
                                    fields=(("attributes", "ffvae.sensitive"),))

  def make_optimizers(self):
    f = self.config.ffvae
    return {"vae": optim.optimizer("vae", base.adam(self.config)),
            "discriminator": optim.optimizer("discriminator", optax.adam(
                f.disc_learning_rate, b1=f.disc_b1, b2=f.disc_b2))}

  @property
  def num_sensitive(self) -> int:
    return len(self.sensitive)

  def posterior_sample(self, rng, mean, logvar):
    """A sample of [z, b] and its KL per example and dimension; ``b_kl=False``: b is its mean,
    with no KL."""
    code, kl_per_dim = super().posterior_sample(rng, mean, logvar)
    if not self.config.ffvae.b_kl:
      nz = self.latent_dim - self.num_sensitive
      code = jnp.concatenate([code[:, :nz], mean[:, nz:]], axis=1)
      kl_per_dim = kl_per_dim * (jnp.arange(self.latent_dim) < nz)
    return code, kl_per_dim

  def latent_regularizer(self, params, outputs, rng, t):
    """KL - alpha mean sum_j log p(a_j | b_j) + gamma TC_hat (Eqs. 4-6; module docstring)."""
    del rng, t
    f = self.config.ffvae
    nz = self.latent_dim - self.num_sensitive
    attributes = outputs.batch["attributes"]
    b_in = outputs.z[:, nz:] if f.predictor_input == "sample" else outputs.mean[:, nz:]
    log_p_a = jnp.mean(predictor_log_likelihood(b_in, attributes))
    tc = self.tc_estimate(params, outputs.z)
    accuracy = jnp.mean((b_in > 0) == (attributes > 0), axis=0)
    term = jnp.sum(outputs.kl) - f.alpha * log_p_a + f.gamma * tc
    return term, dict(tc_estimate=tc, predictor_log_lik=log_p_a, predictor_accuracy=accuracy)

  def permute(self, rng, code):
    """The fake samples: z permuted as one block, each b_j alone, globally or per shard."""
    return disc_lib.permute_scoped(rng, code, self.groups_of_latent,
                                   scope=self.config.ffvae.permute_scope, mesh=self.mesh)
