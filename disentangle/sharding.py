"""Shardings for data parallelism: the one ``data`` axis, and per-shard work inside a step.

Parameters and optimiser states are replicated; batches are global arrays sharded along their
batch axis. Methods use :func:`per_shard` for work that must stay inside each device's shard of
the batch (``cascade.assignment_scope='local'``, ``factorvae.permute_scope='local'``). This module
sits below ``methods/``; the process-level parts (``jax.distributed``, building the mesh) live in
:mod:`disentangle.train.mesh`.
"""
from __future__ import annotations

from typing import Callable

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
import numpy as np

DATA_AXIS = "data"
RUNS_AXIS = "runs"     # the runs of one program (seeds x sweep points), on a 2-D mesh
BATCH = P(DATA_AXIS)   # an array sharded along its leading (batch) axis
REPLICATED = P()       # an array every shard sees whole


def replicated(mesh) -> NamedSharding:
  return NamedSharding(mesh, REPLICATED)


def batch_sharding(mesh, batch_axis: int = 0) -> NamedSharding:
  spec = [None] * batch_axis + [DATA_AXIS]
  return NamedSharding(mesh, P(*spec))


def global_batch(mesh, local_batch: dict, batch_axis: int = 0) -> dict:
  """Assemble this process's share into global arrays sharded along ``batch_axis``."""
  sharding = batch_sharding(mesh, batch_axis)
  return {k: jax.make_array_from_process_local_data(sharding, np.asarray(v))
          for k, v in local_batch.items()}


def is_sharded(mesh) -> bool:
  """Whether ``mesh`` splits the batch over more than one device."""
  return mesh is not None and mesh.size > 1


def per_shard(fn: Callable, mesh, in_specs, out_specs) -> Callable:
  """``fn`` run on each device's shard (``jax.shard_map`` over :data:`DATA_AXIS`).

  ``in_specs`` / ``out_specs``: :data:`BATCH` for batch-sharded arguments, :data:`REPLICATED` for
  arguments every shard sees whole (e.g. an rng key; :func:`shard_index` tells shards apart).
  """
  return jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs)


def shard_index() -> jax.Array:
  """The index of the current shard, inside :func:`per_shard`."""
  return jax.lax.axis_index(DATA_AXIS)


def local_or_global(fn: Callable, mesh, scope: str, *, keyed: bool = False) -> Callable:
  """``fn`` over the global batch (``scope='global'``) or on each shard alone (``'local'``).

  ``fn(*batch_args)`` or, with ``keyed=True``, ``fn(rng, *batch_args)``: then each shard gets its
  own key ``fold_in(rng, shard_index())``. With one device (or no mesh) both scopes are ``fn``.
  Every output is batch-sharded.
  """
  if scope not in ("global", "local"):
    raise ValueError(f"scope must be 'global' or 'local', got {scope!r}")
  if scope == "global" or not is_sharded(mesh):
    return fn

  def wrapped(*args):
    if not keyed:
      return per_shard(fn, mesh, in_specs=BATCH if len(args) == 1 else (BATCH,) * len(args),
                       out_specs=BATCH)(*args)
    local = lambda key, *xs: fn(jax.random.fold_in(key, shard_index()), *xs)
    return per_shard(local, mesh, in_specs=(REPLICATED,) + (BATCH,) * (len(args) - 1),
                     out_specs=BATCH)(*args)

  return wrapped
