"""The backend a process computes on: its record, its line in the log, and a warning when an
accelerator is visible to the machine but JAX runs on the CPU.

A GPU machine whose ``jaxlib`` is a CPU build, or whose CUDA plugin is of another version than
``jaxlib``, trains on the CPU without an error, about a hundred times slower. `describe` is what
every run records (``environment.json`` beside ``config.json``, ``results.json``, the tables'
``reproduce.json``, the benchmarks' JSON lines); `announce` prints it and, before the first step,
`fallback_warning`'s line when the machine shows an NVIDIA GPU or a TPU that JAX does not use.
"""
from __future__ import annotations

import glob
import importlib.metadata
import os
import platform
from typing import Callable, Mapping

import jax

from disentangle import version

# The distributions that put JAX on an accelerator (jax[cuda12], jax[cuda13], jax[tpu]).
GPU_PLUGINS = ("jax-cuda13-plugin", "jax-cuda12-plugin")
TPU_RUNTIMES = ("libtpu", "libtpu-nightly")


def describe() -> dict:
  """The backend, the devices (kind and count, this process's and all processes') and the
  versions of this library (``disentangle.__version__``), JAX, jaxlib, Flax, scikit-learn and
  Python."""
  devices = jax.devices()
  return {"backend": jax.default_backend(),
          "device_kind": getattr(devices[0], "device_kind", str(devices[0])),
          "device_count": jax.device_count(),
          "local_device_count": jax.local_device_count(),
          "process_count": jax.process_count(),
          "disentangle": version.__version__,
          "jax": jax.__version__, "jaxlib": _version("jaxlib"), "flax": _version("flax"),
          "scikit-learn": _version("scikit-learn"), "python": platform.python_version()}


def summary(record: Mapping) -> str:
  """One line, e.g. ``device: gpu, 1 x NVIDIA H100 80GB HBM3 (1 process), jax 0.11.2 (jaxlib
  0.11.2), Python 3.12.1``."""
  processes = record["process_count"]
  return (f"device: {record['backend']}, {record['device_count']} x {record['device_kind']} "
          f"({processes} process{'es' if processes > 1 else ''}), jax {record['jax']} "
          f"(jaxlib {record['jaxlib']}), Python {record['python']}")


def visible_accelerators(exists: Callable[[str], list[str]] = glob.glob,
                         environ: Mapping[str, str] = os.environ) -> list[str]:
  """The accelerators the machine shows, whatever JAX uses: ``'gpu'`` for an NVIDIA device node
  (``/dev/nvidia0``...), ``'tpu'`` for a TPU chip (``/dev/accel*``, ``/dev/vfio/[0-9]*`` with a
  TPU VM's ``TPU_ACCELERATOR_TYPE`` or ``TPU_NAME``)."""
  found = []
  if exists("/dev/nvidia[0-9]*"):
    found.append("gpu")
  if exists("/dev/accel[0-9]*") or (
      (environ.get("TPU_ACCELERATOR_TYPE") or environ.get("TPU_NAME"))
      and exists("/dev/vfio/[0-9]*")):
    found.append("tpu")
  return found


def fallback_warning(backend: str, visible: list[str], packages: Mapping[str, str | None],
                     environ: Mapping[str, str] = os.environ) -> str | None:
  """The warning line when an accelerator in ``visible`` is unused (``backend`` is ``'cpu'``),
  with the likely cause read from ``packages`` (distribution name -> installed version or None);
  None when JAX runs on what the machine has."""
  if backend != "cpu" or not visible:
    return None
  kind = visible[0]
  jaxlib = packages.get("jaxlib")
  platforms = environ.get("JAX_PLATFORMS", "")
  if platforms and kind not in platforms and not (kind == "gpu" and "cuda" in platforms):
    cause = f"JAX_PLATFORMS={platforms!r} leaves it out"
  elif kind == "gpu":
    plugins = {name: packages.get(name) for name in GPU_PLUGINS if packages.get(name)}
    if not plugins:
      cause = (f"jaxlib {jaxlib} is a CPU build and no CUDA plugin is installed "
               f"(pip install -U \"jax[cuda13]\")")
    elif any(v != jaxlib for v in plugins.values()):
      cause = ", ".join(f"{n} {v}" for n, v in plugins.items()) + (
          f" does not match jaxlib {jaxlib} (install the plugin of jaxlib's version)")
    else:
      cause = ("the CUDA plugin is installed but did not load (JAX's log above says why: often a "
               "driver older than the plugin's CUDA, or CUDA_VISIBLE_DEVICES hides the GPUs)")
  else:
    runtimes = {name: packages.get(name) for name in TPU_RUNTIMES if packages.get(name)}
    cause = ("no libtpu is installed (pip install -U \"jax[tpu]\")" if not runtimes else
             "libtpu did not load (JAX's log above says why: often a libtpu of another JAX "
             "version, or another process holding the TPU)")
  return (f"warning: this machine has a {kind.upper()} but JAX runs on the CPU: {cause}; "
          f"training goes on, much slower")


def installed() -> dict[str, str | None]:
  """The installed versions of jaxlib and the accelerator plugins (None: not installed)."""
  return {name: _version(name) for name in ("jaxlib", *GPU_PLUGINS, *TPU_RUNTIMES)}


def announce(record: Mapping | None = None) -> dict:
  """Print `summary` and, where it applies, `fallback_warning`; return the record."""
  record = dict(record or describe())
  print(summary(record), flush=True)
  warning = fallback_warning(record["backend"], visible_accelerators(), installed())
  if warning:
    print(warning, flush=True)
  return record


def _version(distribution: str) -> str | None:
  try:
    return importlib.metadata.version(distribution)
  except importlib.metadata.PackageNotFoundError:
    return None
