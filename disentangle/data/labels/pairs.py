"""Pairs of observations that share all ground-truth factors but k (Locatello et al. 2020).

The weak supervision of "Weakly-Supervised Disentanglement Without Compromises" (ICML 2020,
Sec. 3, Eq. 2 and Sec. 5): x1 = g(z), x2 = g(z~) where z~ equals z except on a set S of k factors,
drawn uniformly among the factors, whose values are drawn anew. k is fixed, or drawn per pair
uniformly from 1 ... K - 1 (the paper's "k = rnd"; disentanglement_lib's ``dynamics.k = -1``).

:func:`draw` makes the second factor vector of each pair in one of two ways
(``PairSpec.dynamics``):

- ``"paper"``: exactly k factors differ; each changed factor takes one of its other values,
  uniformly (the paper's description: the pair differs in k factors).
- ``"dlib"``: disentanglement_lib's ``simple_dynamics`` (``methods/weak/train_weak_lib.py``):
  the number of factors redrawn is 1 or k with equal odds (its ``choice([1, k_observed])``),
  and each is redrawn uniformly from all its values, so it keeps its value with probability
  1 / size (the pair then differs in fewer factors than the label says). Their redraw reads the
  global numpy stream, not the seeded one; here every draw is seeded.

Only factors of more than one value are ever changed (K counts those). ``changed`` is the mask
of the factors chosen for a redraw: the label of the "labels" variants (GVAE, ML-VAE).
"""
from __future__ import annotations

import numpy as np

from disentangle import config as config_lib

DYNAMICS = ("paper", "dlib")


def variable_factors(sizes) -> np.ndarray:
  """Indices of the factors of more than one value: those a pair may change."""
  return np.flatnonzero(np.asarray(sizes, np.int64) > 1)


def draw(factors, sizes, k: int, rng: np.random.Generator, dynamics: str = "paper"):
  """(partner [n, K] int64, changed [n, K] int32): the second factor vector of each pair.

  Args:
    factors: int [n, K], the factors of the first observations.
    sizes: the number of values of each of the K factors.
    k: the factors changed per pair, or -1: drawn per pair uniformly from 1 ... K_v - 1 (K_v:
      the factors of more than one value).
    rng: the generator every draw reads, in this order: k per pair (for k = -1), the coin of
      ``"dlib"``, the order of the factors, the new values.
    dynamics: ``"paper"`` or ``"dlib"`` (module docstring).
  """
  factors = np.asarray(factors, np.int64)
  sizes = np.asarray(sizes, np.int64)
  n, num = factors.shape
  variable = variable_factors(sizes)
  kv = len(variable)
  ks = np.full(n, k, np.int64) if k != -1 else rng.integers(1, kv, size=n)
  if dynamics == "dlib":
    ks = np.where(rng.integers(0, 2, size=n) == 0, 1, ks)
  elif dynamics != "paper":
    raise ValueError(f"dynamics must be one of {list(DYNAMICS)}, got {dynamics!r}")
  # A uniform subset of ks[b] variable factors: those ranked first by a random order.
  rank = np.argsort(np.argsort(rng.random((n, kv)), axis=1), axis=1)
  changed = np.zeros((n, num), bool)
  changed[:, variable] = rank < ks[:, None]
  u = rng.random((n, num))
  if dynamics == "paper":  # one of the size - 1 other values
    new = (factors + 1 + np.floor(u * (sizes - 1)).astype(np.int64)) % sizes
  else:  # any of the size values
    new = np.floor(u * sizes).astype(np.int64)
  return np.where(changed, new, factors), changed.astype(np.int32)


def check(dataset, spec) -> None:
  """A pair spec against ``dataset``: a ground-truth set on a full factor grid, k in range.

  Raises:
    ConfigError: naming ``dataset.name`` (no factors, or not every factor vector is stored) or
      the spec's ``k`` / ``dynamics`` field.
  """
  name = getattr(dataset, "name", "") or type(dataset).__name__
  if not all(hasattr(dataset, a) for a in ("factor_sizes", "factors_of", "indices_of_factors")):
    raise config_lib.ConfigError(
        f"config field 'dataset.name' must be a ground-truth dataset (factors of every row) for "
        f"the pairs of {spec.field_of('k')!r}, got {name}")
  if spec.dynamics not in DYNAMICS:
    raise config_lib.ConfigError(f"config field {spec.field_of('dynamics')!r} must be one of "
                                 f"{list(DYNAMICS)}, got {spec.dynamics!r}")
  sizes = tuple(int(s) for s in dataset.factor_sizes)
  kv = len(variable_factors(sizes))
  if kv < 2:
    raise config_lib.ConfigError(
        f"config field 'dataset.name' must have two factors of several values for the pairs of "
        f"{spec.field_of('k')!r}, got {name} with factor sizes {sizes}")
  if spec.k != -1 and not 1 <= spec.k <= kv - 1:
    raise config_lib.ConfigError(
        f"config field {spec.field_of('k')!r} must be -1 (drawn per pair) or in [1, {kv - 1}] "
        f"for the {kv} factors of {name}, got {spec.k}")
  every = np.asarray(dataset.factors_of(np.arange(int(dataset.num_examples))), np.int64)
  radix = np.cumprod((1,) + sizes[:-1]).astype(np.int64)
  # The distinct codes (non-negative): counted through their histogram, about 100x faster than
  # numpy 2.4's hash-based np.unique of a million integers.
  stored = int(np.count_nonzero(np.bincount(every @ radix)))
  if stored != int(np.prod(sizes)):
    raise config_lib.ConfigError(
        f"config field 'dataset.name' must store every factor vector for the pairs of "
        f"{spec.field_of('k')!r}, got {name} with {stored} of {int(np.prod(sizes))}")
