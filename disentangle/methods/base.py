"""What every method shares: the train state, parameter groups and optimisers, the one step.

A method is a small object built from the config (``cls(config, image_shape, mesh=mesh)``). It
owns pure functions only:

- ``groups() -> {name: init_fn(rng) -> params}``: its parameter groups (default ``{"vae": ...}``);
- ``make_optimizers() -> {name: Optimizer(group, transform)}``
  (:mod:`disentangle.methods.optimizers`; default ``{"vae": Adam on the vae group}``);
- ``loss(params, batch, rng, t) -> (loss, aux)``: ``params`` is the dict of every group,
  ``batch`` the pipeline's dict (``"image"``; ``"targets"`` etc. when ``batch_spec`` asks),
  ``rng`` the step's key, ``t = step + 1`` the iteration counted from 1 (the papers'
  schedules), ``aux`` a flat dict of scalar (or small vector) metrics, read on host only at
  log steps. Default: :meth:`VAEMethod.elbo`, the Gaussian ELBO whose KL term is the method's
  ``latent_regularizer(params, outputs, rng, t) -> (scalar, metrics)`` (default the KL itself:
  the plain VAE), so a method that is "reconstruction + a regulariser" writes only that hook;
- ``represent(params, images) -> dict`` with ``mean``, ``logvar`` and, for methods with a
  discrete code, ``discrete`` (int) — what the metrics see;
- ``reconstruct(params, images)`` and ``decode(params, z, d)`` -> pixel means;
- ``evaluation_pictures(params, images, rep, *, decode, span, values) -> {name: RGB array}``:
  pictures of its own that the evaluator writes beside the shared ones (default none).

:meth:`VAEMethod.train_step` is the one step: rng = ``fold_in(state.rng, state.step)``, t =
``state.step + 1``, the gradient of ``loss`` with respect to every group, then every optimiser
updates its group (``value=loss`` passed on, for ``reduce_on_plateau``; :meth:`descend`). A
method overrides ``train_step`` only where its update order differs (FactorVAE: the VAE and the
discriminator gradients at the same parameters, through two losses), built from
:meth:`step_key`, :meth:`apply_update` and :meth:`advance`.

A method whose discrete code an exact assignment chooses (CascadeVAE) gives its step in two pure
parts, composed with the solve by `disentangle.train.codes`: ``code_solve`` (how the codes are
solved, an `assignment.Solve`; None in a phase without codes), ``code_costs(state, batch) ->
Costs`` and ``train_step_given_codes(state, batch, costs, d)``.
"""
from __future__ import annotations

from typing import Any, Callable, Hashable, NamedTuple, Optional

import flax
import jax
import jax.numpy as jnp
import optax

from disentangle import losses
from disentangle.data.labels import batch_spec as batch_spec_lib
from disentangle.methods import optimizers as optim
from disentangle.nn import networks


@flax.struct.dataclass
class TrainState:
  """A run's state; the runs trained at once stack theirs along a leading axis.

  Attributes:
    step: int32 scalar, the updates completed.
    params: one parameter tree per group, e.g. ``{'vae': {'encoder': ..., 'decoder': ...}}``.
    opt_state: one optax state per optimiser name, e.g. ``{'vae': ...}``.
    rng: the base key; the key of a step is ``fold_in(rng, step)`` (:meth:`VAEMethod.step_key`).
  """
  step: jax.Array    # int32 scalar: completed updates
  params: Any        # {'vae': {'encoder': ..., 'decoder': ...}, ...}: one tree per group
  opt_state: Any     # {'vae': optax state, ...}: one state per optimiser name
  rng: jax.Array     # base key; the step's key is fold_in(rng, step)


class Costs(NamedTuple):
  """The costs of a step's discrete codes (``code_costs``), computed without gradient."""
  u: jax.Array  # [B, S]: u[i, k], the gain of code k for example i (the assignment's input)
  reuse: Any    # what the update given the codes takes from computing u (a pytree)


class ElboOutputs(NamedTuple):
  """What :meth:`VAEMethod.elbo <disentangle.methods.base.VAEMethod.elbo>` computed on a batch,
  handed to ``latent_regularizer``."""
  batch: dict           # the pipeline's batch ("image", and what ``batch_spec`` asks)
  mean: jax.Array       # [B, m] posterior means
  logvar: jax.Array     # [B, m] posterior log-variances
  z: jax.Array          # [B, m] the sample the decoder saw (``posterior_sample``)
  kl: jax.Array         # [m] mean over the batch of KL(q(z_j | x) || N(0, 1))


def adam(config) -> optax.GradientTransformation:
  """Adam with ``config.optimizer``'s settings."""
  return optim.adam_from_config(config)


class VAEMethod:
  """Shared pieces of the Gaussian-encoder methods of the papers (Bernoulli or L1 decoder)."""

  name = "vae"
  num_discrete = 0  # size of the discrete code fed to the decoder (CascadeVAE's S)

  def __init__(self, config, image_shape, *, mesh=None):
    self.config = config
    self.image_shape = tuple(image_shape)
    self.mesh = mesh  # the trainer's mesh, for per-shard work (``*_scope='local'``)
    self.latent_dim = config.model.latent_dim
    self.encoder = self.make_encoder()
    self.decoder = networks.Decoder(image_shape=self.image_shape, init_scheme=config.model.init,
                                    conv_impl=config.model.conv_impl,
                                    hidden_units=config.model.hidden_units,
                                    architecture=config.model.architecture,
                                    dtype=config.model.dtype, precision=config.model.precision)
    self.optimizers = self.make_optimizers()

  @classmethod
  def batch_spec(cls, config) -> batch_spec_lib.BatchSpec:
    """What the method's batches carry besides images (default: images only)."""
    del config
    return batch_spec_lib.IMAGES_ONLY

  # -- phases ----------------------------------------------------------------------------------
  def phase(self, step: int) -> Optional[Hashable]:
    """The phase of 0-based ``step``, decided on the host. The trainer compiles one program per
    phase (:meth:`for_phase`) and switches between them by the step number, so no predicate is
    read back from the device. ``None`` (the default): one phase, one program."""
    del step
    return None

  def for_phase(self, phase: Optional[Hashable]) -> "VAEMethod":
    """This method with its step fixed to ``phase``; ``None``: itself."""
    del phase
    return self

  # -- construction ----------------------------------------------------------------------------
  def make_encoder(self, extra_outputs: int = 0) -> networks.Encoder:
    """The encoder of ``config.model`` (``extra_outputs``: a further dense head on h)."""
    m = self.config.model
    return networks.Encoder(latent_dim=m.latent_dim, posterior_head=m.posterior_head,
                            init_scheme=m.init, conv_impl=m.conv_impl,
                            extra_outputs=extra_outputs, hidden_units=m.hidden_units,
                            widths=m.encoder_widths, activation=m.activation,
                            leaky_slope=m.leaky_slope, activation_last=m.activation_last,
                            architecture=m.architecture, dtype=m.dtype, precision=m.precision)

  def make_trunk(self) -> networks.Trunk:
    """The encoder's trunk (hidden features h), applied to ``params['vae']['encoder']``."""
    m = self.config.model
    return networks.Trunk(init_scheme=m.init, conv_impl=m.conv_impl, hidden_units=m.hidden_units,
                          widths=m.encoder_widths, activation=m.activation,
                          leaky_slope=m.leaky_slope, activation_last=m.activation_last,
                          architecture=m.architecture, dtype=m.dtype, precision=m.precision)

  def decoder_input_dim(self) -> int:
    """The decoder's input width: m latents plus the one-hot discrete code (``num_discrete``)."""
    return self.latent_dim + self.num_discrete

  def init_params(self, rng):
    """The ``vae`` group: encoder and decoder parameters."""
    k_enc, k_dec = jax.random.split(rng)
    x = jnp.zeros((1,) + self.image_shape, jnp.float32)
    latent = jnp.zeros((1, self.decoder_input_dim()), jnp.float32)
    return {"encoder": self.encoder.init(k_enc, x)["params"],
            "decoder": self.decoder.init(k_dec, latent)["params"]}

  def groups(self) -> dict[str, Callable]:
    """Parameter groups in order: name -> ``init(rng) -> params``."""
    return {"vae": self.init_params}

  def make_optimizers(self) -> dict[str, optim.Optimizer]:
    """Optimisers by name (each on a group): default one Adam on ``vae``."""
    return {"vae": optim.optimizer("vae", adam(self.config))}

  def init(self, rng) -> TrainState:
    """Keys ``split(rng, G + 1)``: one per group in order, the last is the state's base key."""
    groups = self.groups()
    *keys, k_state = jax.random.split(rng, len(groups) + 1)
    params = {name: init(k) for (name, init), k in zip(groups.items(), keys)}
    opt_state = {name: opt.transform.init(params[opt.group])
                 for name, opt in self.optimizers.items()}
    return TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=opt_state,
                      rng=k_state)

  # -- pure pieces -----------------------------------------------------------------------------
  def encode(self, vae_params, images):
    """(mean, logvar) [B, m] of q(z | x) for ``images`` (and the extra head's output where
    :meth:`make_encoder` adds one), from the ``vae`` group's encoder."""
    return self.encoder.apply({"params": vae_params["encoder"]}, images)

  def hidden(self, vae_params, images):
    """The trunk's features h of ``images`` [B, hidden_units]."""
    return self.make_trunk().apply({"params": vae_params["encoder"]}, images)

  def decoder_pass(self, vae_params, latent):
    """(logits, every layer's input) of the decoder at ``latent``: the one form of its forward
    pass (`networks.chain` of `networks.decoder_layers`), whose inputs let `networks.replay`
    differentiate the pass without running it again."""
    call = lambda name, layer, h: layer.apply({"params": vae_params["decoder"][name]}, h)
    return networks.chain(networks.decoder_layers(self.decoder), call, latent)

  def decode_logits(self, vae_params, latent):
    """The decoder's pixel logits at ``latent`` [B, :meth:`decoder_input_dim`]."""
    return self.decoder_pass(vae_params, latent)[0]

  def log_likelihood(self, logits, images):
    """log p(x | logits) per image under ``model.likelihood`` (Bernoulli or L1)."""
    return losses.log_likelihood(logits, images, self.config.model.likelihood)

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
    """Pixel means for latents z [..., m] (and discrete codes d [...])."""
    return jax.nn.sigmoid(self.decode_logits(params["vae"], self.decoder_input(z, d)))

  # Whether row i of `represent` depends on image i alone (so it may run in micro-batches).
  rowwise_represent = True

  def represent(self, params, images):
    """What the metrics see of ``images``: ``{"mean", "logvar"}`` [B, m] of the posterior
    (methods with a discrete code add ``"discrete"``)."""
    mean, logvar = self.encode(params["vae"], images)
    return {"mean": mean, "logvar": logvar}

  def reconstruct(self, params, images):
    """Pixel means decoded at the posterior mean of ``images`` (and their discrete code, if any)."""
    rep = self.represent(params, images)
    return self.decode(params, rep["mean"], rep.get("discrete"))

  def regularizer(self, vae_params):
    """The L2 penalty on the kernels of ``vae_params`` with coefficient ``config.weight_decay``
    (`losses.l2_kernel_penalty`); 0 when that is 0."""
    wd = self.config.weight_decay
    return losses.l2_kernel_penalty(vae_params, wd) if wd else jnp.zeros((), jnp.float32)

  def posterior_sample(self, rng, mean, logvar):
    """(z [B, m], KL per example and dimension [B, m]) of the ELBO: a reparameterised sample
    of q(z | x) and its closed-form KL to N(0, I) (CascadeVAE Eq. 1, footnote 1)."""
    return losses.reparameterize(rng, mean, logvar), losses.gaussian_kl_per_dim(mean, logvar)

  def latent_regularizer(self, params, outputs: ElboOutputs, rng, t):
    """(term, metrics): what :meth:`elbo` adds to the reconstruction; here sum_j KL_j, the
    plain VAE (Kingma & Welling 2013). ``rng`` is independent of the posterior sample."""
    del params, rng, t
    return jnp.sum(outputs.kl), {}

  def elbo(self, params, batch, rng, t):
    """(loss, (metrics, outputs)): the Gaussian ELBO with the method's regulariser.

    loss = -1/B sum_b log p(x_b | z_b) + ``latent_regularizer`` + weight decay, with z_b from
    ``posterior_sample(rng, ...)`` and the regulariser's key ``fold_in(rng, 1)``. Metrics:
    ``loss``, ``reconstruction``, the regulariser's, ``kl`` and ``kl_per_dim`` (analytic).
    """
    vae_params = params["vae"]
    x = batch["image"]
    mean, logvar = self.encode(vae_params, x)
    z, kl_per_example = self.posterior_sample(rng, mean, logvar)
    rec = -jnp.mean(self.log_likelihood(self.decode_logits(vae_params, z), x))
    outputs = ElboOutputs(batch, mean, logvar, z, jnp.mean(kl_per_example, axis=0))
    term, extra = self.latent_regularizer(params, outputs, jax.random.fold_in(rng, 1), t)
    loss = rec + term + self.regularizer(vae_params)
    metrics = dict(loss=loss, reconstruction=rec, **extra, **kl_metrics(outputs.kl))
    return loss, (metrics, outputs)

  def loss(self, params, batch, rng, t):
    """(loss, metrics) of one batch at iteration t: :meth:`elbo` unless the method's loss is
    not "reconstruction + regulariser" (CascadeVAE, JointVAE, PartedVAE override it)."""
    loss, (metrics, _) = self.elbo(params, batch, rng, t)
    return loss, metrics

  # -- a discrete code chosen by an exact assignment (`disentangle.train.codes`) --------------
  code_solve = None  # how this step's codes are solved (`assignment.Solve`); None: no codes

  @classmethod
  def run_solve(cls, config, mesh=None):
    """How a run of ``config`` on ``mesh`` solves its codes in the phases that have them (an
    `assignment.Solve`), None where it never does: what decides the solve's placement
    (`disentangle.train.codes.placement`) before any method is built."""
    del config, mesh
    return None

  def code_costs(self, state: TrainState, batch) -> Costs:
    """The costs of the step's codes at its own key and iteration (where ``code_solve``)."""
    raise NotImplementedError(f"{self.name} solves no discrete codes")

  def train_step_given_codes(self, state: TrainState, batch, costs: Costs, d):
    """The step's update with its codes ``d`` (int32 [B]) solved from ``costs``."""
    raise NotImplementedError(f"{self.name} solves no discrete codes")

  def evaluation_pictures(self, params, images, rep, *, decode, span: float,
                          values) -> dict:
    """{name: RGB array [H, W, C]}: the method's own pictures at an evaluation step, written
    by the evaluator as ``<name>.png`` beside the shared ones (reconstructions, traversals,
    discrete traversal). ``images`` [n, H, W, C] and ``rep`` (a ``metrics.Representation``)
    are the evaluation images and their encodings, ``decode(params, z, d)`` the jitted
    :meth:`decode`, ``span`` / ``values`` the traversal range of the data set. Default: none."""
    del params, images, rep, decode, span, values
    return {}

  # -- the step --------------------------------------------------------------------------------
  def step_key(self, state: TrainState):
    """(rng, t) of the step: ``fold_in(state.rng, state.step)`` and ``state.step + 1``."""
    return jax.random.fold_in(state.rng, state.step), state.step + 1

  def gradients(self, loss_fn, params, *args):
    """((loss, aux), grads of every group) of ``loss_fn(params, *args)``."""
    return jax.value_and_grad(loss_fn, has_aux=True)(params, *args)

  def apply_update(self, state: TrainState, name: str, grads, value=None) -> TrainState:
    """Optimiser ``name`` updates its group with ``grads`` (of that group); ``value=`` the loss."""
    opt = self.optimizers[name]
    value = jnp.zeros((), jnp.float32) if value is None else value
    updates, new = opt.transform.update(grads, state.opt_state[name], state.params[opt.group],
                                        value=value)
    params = dict(state.params, **{opt.group: optax.apply_updates(state.params[opt.group],
                                                                  updates)})
    return state.replace(params=params, opt_state=dict(state.opt_state, **{name: new}))

  def advance(self, state: TrainState) -> TrainState:
    """``state`` with ``step`` incremented, the end of every step."""
    return state.replace(step=state.step + 1)

  def train_step(self, state: TrainState, batch):
    """One update: every optimiser steps its group on the gradient of ``loss`` (one value).

    Methods whose optimisers follow different losses, or share a group (a ``supervised``
    optimiser on part of ``vae``), override this with their own order of ``gradients`` /
    ``apply_update`` calls, ending in ``advance`` (one ``state.step`` increment per step).
    """
    return self.descend(state, batch, self.loss)

  def descend(self, state: TrainState, batch, loss_fn):
    """The update of :meth:`train_step` on ``loss_fn(params, batch, rng, t) -> (loss, metrics)``."""
    rng, t = self.step_key(state)
    (loss, metrics), grads = self.gradients(loss_fn, state.params, batch, rng, t)
    for name, opt in self.optimizers.items():
      state = self.apply_update(state, name, grads[opt.group], value=loss)
    return self.advance(state), metrics


def kl_metrics(kl_per_dim) -> dict:
  """Per-dimension KL (mean over the batch) as a vector metric plus its sum."""
  return {"kl": jnp.sum(kl_per_dim), "kl_per_dim": kl_per_dim}
