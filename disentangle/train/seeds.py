"""Several independent seeds in one compiled program (``config.num_seeds = N > 1``).

Every seed keeps its own parameters, optimiser state, rng and batch, stacked along a leading axis
of length N; the program maps the single-seed ``train_step`` over that axis. Two layouts compute
the same numbers (``tests/test_multi_seed.py``) at different speeds:

- ``'vmap'``: ``jax.vmap(train_step)``. Batching the parameters makes each convolution a grouped
  convolution (``feature_group_count = N``) and its kernel gradient a batch-grouped one. Fast on
  GPU and TPU, where the N seeds fill the device; XLA:CPU runs grouped convolutions 3-4x slower
  than N plain ones (``benchmarks/README.md``).
- ``'unroll'``: N copies of the step in one program, each on its own slice. Plain convolutions at
  the cost of N separate steps, and one dispatch, one input pipeline and one host read per step
  for all N seeds. Compile time grows N-fold.

``'auto'`` (default) picks ``'unroll'`` on the CPU backend and ``'vmap'`` elsewhere
(``config.BACKEND_DEFAULTS``, resolved by ``config.resolve``). On an H100
the encoder and decoder of 10 dSprites runs took 18.6 ms vmapped, 24.4 ms unrolled and 19.6 ms
for the same images folded into one batch through one network (``benchmarks/run_layout.py``):
the grouped convolutions cost nothing there, and compile 3x faster than the unrolled copies.
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from disentangle import config as config_lib


def layout(config, backend: str | None = None) -> str:
  """The layout ``config.seed_layout`` resolves to on ``backend`` (default: JAX's)."""
  return config_lib.resolve("seed_layout", config.seed_layout, backend)


def take(tree, i: int):
  """Seed ``i`` of a stacked pytree."""
  return jax.tree_util.tree_map(lambda a: a[i], tree)


def stack(trees):
  """The inverse of :func:`take` over all seeds."""
  return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *trees)


def over_seeds(step: Callable, num_seeds: int, how: str) -> Callable:
  """``step(state, batch)`` of one seed -> the same step over ``num_seeds`` stacked seeds.

  Args:
    step: a single-seed function ``(state, batch) -> outputs`` (any pytrees).
    num_seeds: N, the length of the leading axis of every leaf of ``state`` and ``batch``.
    how: ``'vmap'`` or ``'unroll'``, one of ``config.SEED_LAYOUTS_RESOLVED`` (see the module
      docstring; :func:`layout` resolves ``'auto'``).

  Raises:
    ValueError: ``how`` is not one of them (``'auto'`` included).
  """
  if how not in config_lib.SEED_LAYOUTS_RESOLVED:
    raise ValueError(f"how must be one of {config_lib.SEED_LAYOUTS_RESOLVED} (resolve 'auto' "
                     f"with seeds.layout), got {how!r}")
  if how == "vmap":
    return jax.vmap(step)

  def unrolled(state, batch):
    return stack([step(take(state, i), take(batch, i)) for i in range(num_seeds)])

  return unrolled
