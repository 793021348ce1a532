"""Schedules: pure functions of the training iteration.

Iterations are counted as in CascadeVAE's Algorithm 1: ``t = 1, ..., MAXITER``; the trainer's
``state.step`` counts completed updates, so the update being computed is ``t = step + 1``.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from disentangle import config as config_lib


def num_relieved(t, *, num_dims: int, relieve_every: int, relieved_at_start: int = 0,
                 pause_after: int | None = None):
  """How many continuous dimensions run at beta_l during iteration ``t`` (Algorithm 1).

  Algorithm 1: all beta_j start at beta_h; "if t is a multiple of r: switch beta_j to beta_l and
  j <- j + 1", so at iteration t, floor(t / r) dimensions are relieved, in index order.
  ``relieved_at_start=1`` is the authors' TensorFlow code, where one dimension is already relieved
  at step 0 (``../shared/notes/reference-facts.md``).

  ``pause_after=t_d`` is the authors' pause (``Dsprites_exp/CascadeVAE/model.py::run_batch``: the
  number relieved is ``k + 1`` for periods ``k = iter // r`` before the discrete step starts and
  ``k`` after it): once t > t_d, one dimension fewer is relieved than the plain count, so the
  cascade stands still for one period r while the discrete code starts learning. ``None`` (the
  paper's Algorithm 1) never pauses. With ``relieved_at_start=1`` and ``pause_after=t_d`` the count
  equals the authors' at every iteration but the first of each period: Algorithm 1 switches at
  the start of iteration t = k r, their loop (``iter = t - 1``) at t = k r + 1.
  """
  t = jnp.asarray(t)
  n = t // relieve_every + relieved_at_start
  if pause_after is not None:
    n = n - (t > pause_after).astype(n.dtype)
  return jnp.clip(n, 0, num_dims)


def cascade_betas(t, *, num_dims: int, beta_high: float, beta_low: float, relieve_every: int,
                  relieved_at_start: int = 0, pause_after: int | None = None):
  """Per-dimension beta_j at iteration ``t`` (CascadeVAE Section 6, Algorithm 1); float32 [m]."""
  n = num_relieved(t, num_dims=num_dims, relieve_every=relieve_every,
                   relieved_at_start=relieved_at_start, pause_after=pause_after)
  relieved = jnp.arange(num_dims) < n
  return jnp.where(relieved, jnp.float32(beta_low), jnp.float32(beta_high))


def linear_capacity(t, *, c_min: float, c_max: float, num_steps: int):
  """JointVAE's capacity C(t): linear from c_min to c_max over ``num_steps``, then constant."""
  steps = jnp.maximum(num_steps, 1) if isinstance(num_steps, jax.Array) else max(num_steps, 1)
  frac = jnp.clip(jnp.asarray(t, jnp.float32) / steps, 0.0, 1.0)  # num_steps traced in sweeps
  return c_min + (c_max - c_min) * frac


def linear_capacity_rules(prefix: str) -> dict:
  """The config ``RULES`` of one :func:`linear_capacity` schedule whose fields are
  ``<prefix>_min``, ``<prefix>_max`` (>= 0) and ``<prefix>_steps`` (> 0)."""
  return {f"{prefix}_min": config_lib.NONNEG, f"{prefix}_max": config_lib.NONNEG,
          f"{prefix}_steps": config_lib.POSITIVE}
