"""Several independent seeds in one compiled program (``config.num_seeds = N > 1``).

Every seed keeps its own parameters, optimiser state, rng and batch, stacked along a leading axis
of length N; the program maps the single-seed ``train_step`` over that axis
(`disentangle.train.runs.Runs`). Two layouts compute the same numbers
(``tests/test_runs.py``) at different speeds:

- ``'vmap'``: ``jax.vmap(train_step)``. Batching the parameters makes each convolution a grouped
  convolution (``feature_group_count = N``) and its kernel gradient a batch-grouped one. Fast on
  GPU and TPU, where the N seeds fill the device; XLA:CPU runs grouped convolutions slower than
  N plain ones (``benchmarks.multi_seed``).
- ``'unroll'``: N copies of the step in one program, each on its own slice. Plain convolutions at
  the cost of N separate steps, and one dispatch, one input pipeline and one host read per step
  for all N seeds. Compile time grows N-fold.

``'auto'`` (default) picks ``'unroll'`` on the CPU backend and ``'vmap'`` elsewhere
(``config.BACKEND_DEFAULTS``, resolved by ``config.resolve``): on a GPU the grouped
convolutions cost no more than the unrolled copies and compile faster (``benchmarks.run_layout``;
figures in ``benchmarks/HISTORY.md``, "On a GPU").
"""
from __future__ import annotations

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
