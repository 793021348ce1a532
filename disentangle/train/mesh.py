"""The device mesh of a run and the processes behind it: one ``data`` axis over all devices, or
``(runs, data)`` for several runs in one program (`disentangle.train.runs`).

The shardings themselves (``DATA_AXIS``, replicated / batch shardings, per-shard work, assembling
global batches from each process's share) live in :mod:`disentangle.sharding`, below the methods;
they are re-exported here. Multi-host: :func:`initialize_distributed` wraps ``jax.distributed.initialize`` (auto-detected on
TPU pods and SLURM; explicit coordinator address, process count and id otherwise).
"""
from __future__ import annotations

import logging

import jax
import numpy as np

from disentangle.sharding import DATA_AXIS  # noqa: F401
from disentangle.sharding import RUNS_AXIS  # noqa: F401
from disentangle.sharding import batch_sharding  # noqa: F401
from disentangle.sharding import global_batch  # noqa: F401
from disentangle.sharding import replicated  # noqa: F401


def initialize_distributed(cfg) -> None:
  """``jax.distributed.initialize`` from ``config.distributed`` (no-op unless ``initialize``)."""
  if not cfg.initialize:
    return
  # CPU processes need a collectives backend (GPU/TPU bring their own).
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  kwargs = {}
  if cfg.coordinator_address:
    kwargs["coordinator_address"] = cfg.coordinator_address
  if cfg.num_processes > 0:
    kwargs["num_processes"] = cfg.num_processes
  if cfg.process_id >= 0:
    kwargs["process_id"] = cfg.process_id
  jax.distributed.initialize(**kwargs)
  logging.info("jax.distributed: process %d of %d, %d global devices", jax.process_index(),
               jax.process_count(), jax.device_count())


def make_mesh(num_devices: int = 0) -> jax.sharding.Mesh:
  """A 1-D mesh over the first ``num_devices`` devices (0 = all, across all processes)."""
  devices = jax.devices()
  n = len(devices) if num_devices in (0, None) else num_devices
  if n > len(devices):
    raise ValueError(f"config field 'mesh.num_devices' asks for {n} devices but only "
                     f"{len(devices)} exist")
  # Auto axes: the compiler propagates shardings (GSPMD), so method code needs no annotations.
  auto = (jax.sharding.AxisType.Auto,)
  if n == len(devices):
    return jax.make_mesh((n,), (DATA_AXIS,), axis_types=auto)
  return jax.sharding.Mesh(np.asarray(devices[:n]), (DATA_AXIS,), axis_types=auto)


def make_runs_mesh(runs: int, data: int) -> jax.sharding.Mesh:
  """A ``(runs, data)`` mesh over the first ``runs * data`` devices (runs-major order)."""
  devices = jax.devices()
  n = runs * data
  if n > len(devices):
    raise ValueError(f"config field 'mesh.num_devices' asks for {n} devices but only "
                     f"{len(devices)} exist")
  auto = (jax.sharding.AxisType.Auto,) * 2
  if n == len(devices):
    return jax.make_mesh((runs, data), (RUNS_AXIS, DATA_AXIS), axis_types=auto)
  return jax.sharding.Mesh(np.asarray(devices[:n]).reshape(runs, data), (RUNS_AXIS, DATA_AXIS),
                           axis_types=auto)


def local_block(sharding, num_runs: int, batch: int) -> tuple[slice, slice]:
  """(runs, rows) of a ``[runs, batch, ...]`` array that this process's devices hold."""
  index = sharding.addressable_devices_indices_map((num_runs, batch)).values()
  def span(axis, size):
    starts = [ix[axis].start or 0 for ix in index]
    stops = [size if ix[axis].stop is None else ix[axis].stop for ix in index]
    return slice(min(starts), max(stops))
  return span(0, num_runs), span(1, batch)
