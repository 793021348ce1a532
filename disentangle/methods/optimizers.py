"""Named optimisers over named parameter groups.

A method's parameters are a dict of groups (``{"vae": ..., "discriminator": ...}``) and its
optimisers a dict of :class:`Optimizer` (name -> the group it updates and an optax transform).
Usually one optimiser per group under the group's name; an optimiser may also update only part of
a group (:func:`on_subtrees`: e.g. a ``supervised`` optimiser over the encoder trunk of ``vae``,
every other leaf frozen). ``TrainState.opt_state`` is keyed by optimiser name, so every
optimiser's state (Adam moments, a plateau scale, ...) is checkpointed and resumes.

Every transform is called as ``update(grads, state, params, value=loss)`` (the base step passes
the loss it differentiated), so :func:`with_plateau` (``optax.contrib.reduce_on_plateau``
chained after the optimiser) works anywhere.
"""
from __future__ import annotations

from typing import Iterable, NamedTuple

import jax
import optax


class Optimizer(NamedTuple):
  group: str                                        # key of the parameter group it updates
  transform: optax.GradientTransformationExtraArgs  # called with value=loss


def optimizer(group: str, transform: optax.GradientTransformation) -> Optimizer:
  """``transform`` on ``group``, made to accept (and ignore or use) ``value=``."""
  return Optimizer(group, optax.with_extra_args_support(transform))


def adam(learning_rate: float, *, b1: float = 0.9, b2: float = 0.999,
         eps: float = 1e-8) -> optax.GradientTransformation:
  return optax.adam(learning_rate, b1=b1, b2=b2, eps=eps)


def adam_from_config(config) -> optax.GradientTransformation:
  """Adam with ``config.optimizer``'s settings (every method's ``vae`` optimiser)."""
  o = config.optimizer
  return adam(o.learning_rate, b1=o.b1, b2=o.b2, eps=o.eps)


def with_plateau(transform: optax.GradientTransformation, **settings
                 ) -> optax.GradientTransformationExtraArgs:
  """``transform`` followed by ``optax.contrib.reduce_on_plateau(**settings)``.

  The plateau transform scales the updates by a factor that drops when the loss (``value=``,
  averaged over ``accumulation_size`` steps) stops improving: ReduceLROnPlateau on Adam's step.
  Its state (``scale``, ``best_value``, counters) lives in the optimiser state.
  """
  return optax.chain(transform, optax.contrib.reduce_on_plateau(**settings))


def plateau_scale(opt_state) -> jax.Array | None:
  """The current learning-rate scale of the first plateau transform in ``opt_state`` (or None)."""
  for leaf in jax.tree_util.tree_leaves(
      opt_state, is_leaf=lambda s: isinstance(s, optax.contrib.ReduceLROnPlateauState)):
    if isinstance(leaf, optax.contrib.ReduceLROnPlateauState):
      return leaf.scale
  return None


def _path_names(path) -> tuple:
  return tuple(str(getattr(p, "key", getattr(p, "idx", p))) for p in path)


def on_subtrees(transform: optax.GradientTransformation, subtrees: Iterable[str]
                ) -> optax.GradientTransformationExtraArgs:
  """``transform`` on the leaves under ``subtrees`` of a group, the other leaves frozen.

  ``subtrees``: '/'-separated paths inside the group, e.g. ``("encoder/conv0", "encoder/fc",
  "encoder/extra")``. Frozen leaves get ``optax.set_to_zero()`` updates (so they stay bitwise
  unchanged) and no optimiser state. Built on ``optax.multi_transform``.
  """
  prefixes = [tuple(s.split("/")) for s in subtrees]
  if not prefixes:
    raise ValueError("on_subtrees needs at least one subtree")

  def labels(params):
    def label(path, _):
      names = _path_names(path)
      return "train" if any(names[:len(p)] == p for p in prefixes) else "frozen"
    return jax.tree_util.tree_map_with_path(label, params)

  return optax.multi_transform({"train": optax.with_extra_args_support(transform),
                                "frozen": optax.set_to_zero()}, labels)
