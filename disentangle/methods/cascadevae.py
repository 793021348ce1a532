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
  uses the same eps with d as a constant; its decoder forward at (z, d) is the rows (d_i, i) of
  the S passes, differentiated from their cached layer inputs (:meth:`CascadeVAE.solve_and_decode`).
  ``discrete_start`` beyond the last step is the CascadeVAE-C ablation (no discrete code).
- No KL term for d (its prior term is the pairwise penalty, Lemma 1).

Before t_d nothing of the discrete branch runs in the trainer: it compiles one program per phase
(:meth:`CascadeVAE.phase` of the host's step number, :meth:`CascadeVAE.for_phase`) and switches
at t_d, so neither the S unary decoder passes nor the host assignment run before t_d, under
``vmap`` too (where a ``lax.cond`` on a batched step counter would become a ``select`` running
both branches), and no predicate is read back per step. A method called directly (no phase)
decides on device with ``lax.cond``; both give the same numbers.

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
from disentangle import sharding
from disentangle.methods import base
from disentangle.nn import networks
from disentangle.nn import replay


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
    self.discrete_phase = None  # None: decided on device; True / False: fixed (for_phase)
    super().__init__(config, image_shape, mesh=mesh)

  def phase(self, step: int) -> bool:
    """Whether 0-based ``step`` (t = step + 1) runs the discrete branch: t > t_d, on the host."""
    return step + 1 > self.config.cascade.discrete_start

  def for_phase(self, active: Optional[bool]) -> "CascadeVAE":
    """This method with the discrete branch fixed on (``True``) or off: no ``cond`` in the step;
    ``None``: itself (the branch decided on the device)."""
    if active is None:
      return self
    method = copy.copy(self)
    method.discrete_phase = bool(active)
    return method

  def _assign(self, u):
    """The exact assignment of ``u`` [B, S]: over the global batch, or per shard of the mesh.

    ``assignment_scope='global'`` (default) solves one problem over the whole global batch: the
    paper's semantics when the global batch is the paper's 64 (the host callback receives the
    gathered unaries). ``'local'`` solves each device's shard on its own inside ``shard_map``, so
    the host calls run in parallel on every host; with one device both are the same.
    """
    c = self.config.cascade
    solve = lambda v: assignment.assign(v, c.penalty, solver=c.solver)
    return sharding.local_or_global(solve, self.mesh, c.assignment_scope)(u)

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
    decode = lambda latent: (self.decode_logits(vae_params, latent), ())
    return self._passes(z, x, decode)[0]

  def _passes(self, z, x, decode):
    """(u [B, S], ``decode``'s outputs of the S passes, each stacked [S, B, ...]), batched as
    ``cascade.unary_batching`` says (:meth:`unary`); ``decode(latent) -> (logits, extra)``."""
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

  def solve_and_decode(self, vae_params, z, x):
    """(d, logits of the decoder at (z, d)): the assignment of the S passes and the update's pass.

    The S passes (:meth:`unary`, without gradient) keep every layer's input; the update's logits
    are the rows (d_i, i) of those passes, differentiated w.r.t. the decoder's parameters and z
    as a pass of their own (:func:`disentangle.nn.replay.replay`: the backward of B rows from
    their cached inputs), so no decoder forward runs twice.
    """
    sg = jax.lax.stop_gradient
    layers = networks.decoder_layers(self.decoder)
    frozen = sg(vae_params["decoder"])
    call = lambda name, layer, h: layer.apply({"params": frozen[name]}, h)
    u, (logits, inputs) = self._passes(sg(z), x,
                                       lambda latent: networks.chain(layers, call, latent))
    d = sg(self._assign(u).astype(jnp.int32))
    rows = lambda a: a[d, jnp.arange(z.shape[0])]
    return d, replay.replay(layers, vae_params["decoder"], self.decoder_input(z, d),
                            tuple(map(rows, inputs)), rows(logits))

  @property
  def reuses_passes(self) -> bool:
    """Whether the step's update takes its decoder forward from the S passes of u
    (:meth:`solve_and_decode`): the discrete phase fixed on and the codes solved in the step.
    Given codes (:meth:`with_codes`) are decoded afresh."""
    return self.discrete_phase is True and self.given_codes is None

  def host_assignment(self, state, batch):
    """(u [B, S], lambda') of the step's host assignment, or None where the step has none.

    u is :meth:`unary` at the step's own sample z (the same encoder pass, key and iteration as
    :meth:`terms`), so solving it and handing the codes to :meth:`with_codes` gives the step the
    codes it would solve itself. Several runs of one program (`disentangle.train.runs`) solve
    their problems in one host callback this way. None: the phase is not fixed on, the solver is
    on device, or each shard of the mesh solves its own part (``assignment_scope='local'``).
    """
    if not self.solves_on_host:
      return None
    c = self.config.cascade
    rng, _ = self.step_key(state)
    vae_params, x = jax.lax.stop_gradient(state.params["vae"]), batch["image"]
    mean, logvar = self.encode(vae_params, x)
    z = losses.reparameterize(rng, mean, logvar)
    return self.unary(vae_params, z, x), c.penalty

  @property
  def solves_on_host(self) -> bool:
    """Whether the step solves one assignment on the host: the discrete phase fixed on, the
    ``'scipy'`` solver, over the global batch (or on one device)."""
    c = self.config.cascade
    return (self.discrete_phase is True and c.solver == "scipy"
            and not (c.assignment_scope == "local" and sharding.is_sharded(self.mesh)))

  def with_codes(self, d) -> "CascadeVAE":
    """This method with the step's discrete codes given (int [B], solved outside the step)."""
    method = copy.copy(self)
    method.given_codes = d
    return method

  given_codes = None  # d handed in by with_codes: the step solves no assignment of its own

  def discrete_codes(self, vae_params, z, x, active):
    """The solved d (int32 [B]; -1 = no code yet) at the sampled z, as a constant."""
    if self.given_codes is not None:
      return jax.lax.stop_gradient(jnp.asarray(self.given_codes, jnp.int32))

    def solve(_):
      u = self.unary(jax.lax.stop_gradient(vae_params), jax.lax.stop_gradient(z), x)
      return self._assign(u).astype(jnp.int32)

    def none(_):
      return jnp.full((z.shape[0],), -1, jnp.int32)

    if self.discrete_phase is not None:  # fixed by the trainer: only one branch is traced
      return jax.lax.stop_gradient((solve if self.discrete_phase else none)(None))
    return jax.lax.stop_gradient(jax.lax.cond(active, solve, none, None))

  def terms(self, vae_params, batch, rng, t):
    """(loss, metrics, d) of one batch at iteration t (counted from 1, as in Algorithm 1)."""
    x = batch["image"]
    mean, logvar = self.encode(vae_params, x)
    z = losses.reparameterize(rng, mean, logvar)  # eps sampled once, reused for the update
    if self.discrete_phase is None:
      active = jnp.asarray(t) > self.config.cascade.discrete_start
    else:
      active = jnp.asarray(self.discrete_phase)
    if self.reuses_passes:
      d, logits = self.solve_and_decode(vae_params, z, x)
    else:
      d = self.discrete_codes(vae_params, z, x, active)
      logits = self.decode_logits(vae_params, self.decoder_input(z, d))
    log_px = self.log_likelihood(logits, x)
    rec = -jnp.mean(log_px)
    kl = jnp.mean(losses.gaussian_kl_per_dim(mean, logvar), axis=0)
    betas = self.betas(t)
    loss = rec + jnp.sum(betas * kl) + self.regularizer(vae_params)
    counts = jnp.sum(jax.nn.one_hot(d, self.num_discrete), axis=0)
    metrics = dict(loss=loss, reconstruction=rec, betas=betas,
                   discrete_active=active.astype(jnp.float32),
                   discrete_fraction=counts / x.shape[0], **base.kl_metrics(kl))
    return loss, metrics, d

  def loss(self, params, batch, rng, t):
    loss, metrics, _ = self.terms(params["vae"], batch, rng, t)
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
      d = self._assign(u)
    else:
      d = jnp.argmax(u, axis=-1)
    return {"mean": mean, "logvar": logvar, "discrete": d.astype(jnp.int32)}
