"""Device mesh and shardings for data parallelism (one ``data`` axis over all devices).

Parameters and optimiser states are replicated; batches are global arrays sharded along their
batch axis, assembled from each process's share with ``jax.make_array_from_process_local_data``.
Multi-host: :func:`initialize_distributed` wraps ``jax.distributed.initialize`` (auto-detected on
TPU pods and SLURM; explicit coordinator address, process count and id otherwise).
"""
from __future__ import annotations

import logging

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

DATA_AXIS = "data"


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


def replicated(mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def batch_sharding(mesh, batch_axis: int = 0) -> NamedSharding:
  spec = [None] * batch_axis + [DATA_AXIS]
  return NamedSharding(mesh, P(*spec))


def global_batch(mesh, local_batch: dict, batch_axis: int = 0) -> dict:
  """Assemble this process's share into global arrays sharded along ``batch_axis``."""
  sharding = batch_sharding(mesh, batch_axis)
  return {k: jax.make_array_from_process_local_data(sharding, np.asarray(v))
          for k, v in local_batch.items()}
