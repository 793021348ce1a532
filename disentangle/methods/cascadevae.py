"""CascadeVAE (Jeong & Song, ICML 2019): information cascading + alternating discrete inference.

Loss of one minibatch at iteration t (Algorithm 1, Eq. 6):

  -1/B sum_i log p(x_i | z_i, d_i) + sum_j beta_j(t) KL_j,  KL_j = 1/B sum_i KL(q(z_ij|x_i) || N(0,1))

- beta_j(t): :func:`disentangle.schedules.cascade_betas` (all beta_h = 10, one dimension relieved
  to beta_l every r iterations, in index order). ``cascade=False`` is the CascadeVAE-D ablation:
  one constant beta (= ``beta_low``) on every dimension.
- d: before t_d the decoder sees d = 0 (an all-zero one-hot). For t > t_d, eps is sampled once,
  the decoder is evaluated at the same z for every e_k (batched, without gradient), giving
  u[i, k] = log p(x_i | z_i, e_k); the discrete codes solve max_d sum_i u[i, d_i] - lambda' *
  #(same-class unordered pairs) exactly (:func:`disentangle.assignment.assign`), and the update
  uses the same eps with d as a constant.
  ``discrete_start`` beyond the last step is the CascadeVAE-C ablation (no discrete code).
- No KL term for d (its prior term is the pairwise penalty, Lemma 1).

The step: the trainer composes two pure parts with one solve (`disentangle.train.codes`, the
one place that produces the step's codes): :meth:`CascadeVAE.code_costs` (the encoder, the sample
z and the S decoder passes: u and every layer's input) and
:meth:`CascadeVAE.train_step_given_codes` (the update, whose decoder pass at (z, d) is the rows
(d_i, i) of the S passes, differentiated from their cached inputs). It compiles one program per
phase (:meth:`CascadeVAE.phase` of the host's step number, :meth:`CascadeVAE.for_phase`) and
switches at t_d, so nothing of the discrete branch runs before t_d, under ``vmap`` too, and no
predicate is read back per step. :meth:`CascadeVAE.loss` takes the codes (``given``) or has
none yet (before t_d: the zero code); Algorithm 1 as written, the solve inside the loss, is the
oracle ``tests/test_codes.py`` holds the composed step against.

Inference for new data: d = argmax_k log p(x | mu(x), e_k) (``eval_discrete='argmax'``) or the
exact assignment over the evaluation batch (``'assignment'``).
"""
from __future__ import annotations

import copy
from typing import Optional

import jax
import jax.numpy as jnp
import ml_collections

from disentangle import assignment
from disentangle import config as config_lib
from disentangle import losses
from disentangle import schedules
from disentangle.methods import base
from disentangle.nn import networks


def default_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.num_discrete = 3          # S
  c.penalty = 0.001           # lambda', per unordered same-class pair (authors' code)
  c.beta_high = 10.0          # beta_h (supplement B)
  c.beta_low = 1.0            # beta_l
  c.relieve_every = 20000     # r
  c.relieved_at_start = 0     # 1 = the authors' code (one dim relieved at step 0)
  c.pause_at_discrete_start = False  # True = the authors' code: relieving pauses one period r
  c.discrete_start = 100000   # t_d
  c.cascade = True            # False: CascadeVAE-D (constant beta_low on every dim)
  c.solver = "scipy"          # 'scipy' (host, exact) or 'hungarian' (on device, exact)
  c.assignment_scope = "global"  # 'global': one assignment over the global batch; 'local': per shard
  c.eval_discrete = "argmax"  # or 'assignment'
  c.unary_batching = "auto"   # 'per_class': S decoder calls of B rows; 'stacked': one call of
                              # S*B rows; 'auto': per backend (config.BACKEND_DEFAULTS)
  return c


RULES = {
    "cascade.num_discrete": config_lib.in_range(2, None),
    "cascade.penalty": config_lib.NONNEG,
    "cascade.beta_high": config_lib.NONNEG,
    "cascade.beta_low": config_lib.NONNEG,
    "cascade.relieve_every": config_lib.POSITIVE,
    "cascade.relieved_at_start": config_lib.NONNEG,
    "cascade.pause_at_discrete_start": config_lib.one_of(True, False),
    "cascade.discrete_start": config_lib.NONNEG,
    "cascade.solver": config_lib.one_of(*assignment.SOLVERS),
    "cascade.assignment_scope": config_lib.one_of("global", "local"),
    "cascade.eval_discrete": config_lib.one_of("argmax", "assignment"),
    "cascade.unary_batching": config_lib.one_of("auto", "per_class", "stacked"),
}
STEP_FIELDS = ("cascade.relieve_every", "cascade.discrete_start")  # fields counting iterations
NEVER = 2**31 - 1  # a t_d no run reaches: the CascadeVAE-C ablation (no discrete code)


def smoke(c, *, relieve_every: int = 50, discrete_start: int | None = None) -> None:
  """The smoke variant's schedule: r shortened; t_d moved unless it is the CascadeVAE-C NEVER."""
  c.cascade.relieve_every = relieve_every
  if discrete_start is not None and c.cascade.discrete_start != NEVER:
    c.cascade.discrete_start = discrete_start


class CascadeVAE(base.VAEMethod):
  name = "cascadevae"

  def __init__(self, config, image_shape, *, mesh=None):
    self.num_discrete = config.cascade.num_discrete
    self.discrete_phase = False  # True: the step's codes are solved (for_phase, t > t_d)
    super().__init__(config, image_shape, mesh=mesh)

  def phase(self, step: int) -> bool:
    """Whether 0-based ``step`` (t = step + 1) runs the discrete branch: t > t_d, on the host."""
    return step + 1 > self.config.cascade.discrete_start

  def for_phase(self, active: Optional[bool]) -> "CascadeVAE":
    """This method with the discrete branch on (``True``: :attr:`code_solve`) or off; ``None``:
    itself."""
    if active is None:
      return self
    method = copy.copy(self)
    method.discrete_phase = bool(active)
    return method

  @property
  def code_solve(self):
    """How the step's codes are solved (`assignment.Solve`) in the discrete phase
    (:meth:`for_phase`); else None."""
    return self.run_solve(self.config, self.mesh) if self.discrete_phase else None

  @classmethod
  def run_solve(cls, config, mesh=None):
    """The solve of lambda' (``cascade.penalty``) by ``cascade.solver``; None where t_d is past
    the run's last step (the CascadeVAE-C ablation).

    ``assignment_scope='global'`` (default) solves one problem over the whole global batch: the
    paper's semantics when the global batch is the paper's 64 (the host callback receives the
    gathered unaries). ``'local'`` solves each device's shard on its own inside ``shard_map``, so
    the host calls run in parallel on every host; with one device both are the same.
    """
    c = config.cascade
    if c.discrete_start >= config.num_steps:
      return None
    return assignment.Solve(c.penalty, c.solver, c.assignment_scope, mesh)

  def betas(self, t):
    c = self.config.cascade
    if not c.cascade:
      return jnp.full((self.latent_dim,), c.beta_low, jnp.float32)
    return schedules.cascade_betas(t, num_dims=self.latent_dim, beta_high=c.beta_high,
                                   beta_low=c.beta_low, relieve_every=c.relieve_every,
                                   relieved_at_start=c.relieved_at_start,
                                   pause_after=(c.discrete_start if c.pause_at_discrete_start
                                                else None))

  def unary(self, vae_params, z, x):
    """u[i, k] = log p(x_i | z_i, e_k) for every k; [B, S].

    One decoder call of B rows per k (``cascade.unary_batching='per_class'``, the CPU's
    ``'auto'``: there the stacked activations outgrow the caches, `benchmarks.train_step`) or one
    call of S*B rows (``'stacked'``, other backends' ``'auto'``); the same numbers.
    """
    return self._passes(vae_params, z, x)[0]

  def _passes(self, vae_params, z, x):
    """(u [B, S], the S decoder passes (`decoder_pass`: logits and every layer's input), each
    stacked [S, B, ...]), batched as ``cascade.unary_batching`` says (:meth:`unary`)."""
    decode = lambda latent: self.decoder_pass(vae_params, latent)
    S, B = self.num_discrete, z.shape[0]
    if self.config.cascade.unary_batching == "per_class":
      outs = [decode(self.decoder_input(z, jnp.full((B,), k))) for k in range(S)]
      u = jnp.stack([self.log_likelihood(logits, x) for logits, _ in outs], axis=-1)
      return u, jax.tree_util.tree_map(lambda *a: jnp.stack(a), *outs)
    zs = jnp.broadcast_to(z[None], (S,) + z.shape).reshape(S * B, -1)
    ks = jnp.repeat(jnp.arange(S), B)
    out = decode(self.decoder_input(zs, ks))
    xs = jnp.broadcast_to(x[None], (S,) + x.shape).reshape((S * B,) + x.shape[1:])
    u = self.log_likelihood(out[0], xs).reshape(S, B).T
    return u, jax.tree_util.tree_map(lambda a: a.reshape((S, B) + a.shape[1:]), out)

  def code_costs(self, state, batch) -> base.Costs:
    """u [B, S] at the step's own sample z (its key, as :meth:`loss` draws it), without gradient,
    and what the update reuses of the S passes: every decoder layer's input and the logits."""
    rng, _ = self.step_key(state)
    vae_params, x = jax.lax.stop_gradient(state.params["vae"]), batch["image"]
    mean, logvar = self.encode(vae_params, x)
    z = losses.reparameterize(rng, mean, logvar)
    return base.Costs(*self._passes(vae_params, z, x))

  def train_step_given_codes(self, state, batch, costs: base.Costs, d):
    """The update with codes d: the decoder's pass at (z, d) is the rows (d_i, i) of the S
    passes of ``costs``, differentiated w.r.t. the decoder's parameters and z as a pass of its
    own (:func:`disentangle.nn.networks.replay`: the backward of B rows from their cached inputs),
    so no decoder forward runs twice."""
    return self.descend(state, batch,
                        lambda params, b, rng, t: self.loss(params, b, rng, t,
                                                            given=(d, costs.reuse)))

  def terms(self, vae_params, batch, rng, t, given=None):
    """(loss, metrics, d) of one batch at iteration t (counted from 1, as in Algorithm 1).

    ``given``: (d, the S passes of :meth:`code_costs`), the codes the step solved
    (`disentangle.train.codes`) and the decoder pass they pick; None: no code yet (before t_d:
    the decoder sees the zero one-hot), d = -1.
    """
    x = batch["image"]
    mean, logvar = self.encode(vae_params, x)
    z = losses.reparameterize(rng, mean, logvar)  # eps sampled once, reused for the update
    if given is None:
      d = jnp.full((z.shape[0],), -1, jnp.int32)
      logits = self.decode_logits(vae_params, self.decoder_input(z, d))
    else:
      d, (logits, inputs) = given
      d = jax.lax.stop_gradient(d)
      rows = lambda a: jax.lax.stop_gradient(a[d, jnp.arange(z.shape[0])])
      logits = networks.replay(networks.decoder_layers(self.decoder), vae_params["decoder"],
                               self.decoder_input(z, d), tuple(map(rows, inputs)), rows(logits))
    log_px = self.log_likelihood(logits, x)
    rec = -jnp.mean(log_px)
    kl = jnp.mean(losses.gaussian_kl_per_dim(mean, logvar), axis=0)
    betas = self.betas(t)
    loss = rec + jnp.sum(betas * kl) + self.regularizer(vae_params)
    counts = jnp.sum(jax.nn.one_hot(d, self.num_discrete), axis=0)
    metrics = dict(loss=loss, reconstruction=rec, betas=betas,
                   discrete_active=jnp.asarray(given is not None, jnp.float32),
                   discrete_fraction=counts / x.shape[0], **base.kl_metrics(kl))
    return loss, metrics, d

  def loss(self, params, batch, rng, t, given=None):
    loss, metrics, _ = self.terms(params["vae"], batch, rng, t, given)
    return loss, metrics

  @property
  def rowwise_represent(self) -> bool:
    """The batch assignment (``eval_discrete='assignment'``) couples the rows of a batch."""
    return self.config.cascade.eval_discrete == "argmax"

  def represent(self, params, images):
    """Encoder means/log-variances and the discrete code of new data (Section 4)."""
    mean, logvar = self.encode(params["vae"], images)
    u = self.unary(params["vae"], mean, images)
    if self.config.cascade.eval_discrete == "assignment":
      c = self.config.cascade
      d = assignment.Solve(c.penalty, c.solver, c.assignment_scope, self.mesh)(u)
    else:
      d = jnp.argmax(u, axis=-1)
    return {"mean": mean, "logvar": logvar, "discrete": d.astype(jnp.int32)}
