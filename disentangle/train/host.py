"""Host (CPU process) settings: glibc malloc tuning and XLA:CPU compiler options.

`jit` is ``jax.jit`` with the compiler options below; the trainer, the evaluation and the
benchmarks compile through it.

**YNNPACK for dots only.** jaxlib's XLA:CPU hands convolutions (and some reductions) to YNNPACK
by default, and for the conv VAEs' shapes those convolutions are much slower than XLA's own
(Eigen) ones. `compiler_options` restricts YNNPACK to dot products
(``xla_cpu_experimental_ynn_fusion_type=LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT``, the default of later
XLA releases): convolutions go back to Eigen while the matmul-shaped pieces (dense layers,
`disentangle.nn.layers.col2im_conv_transpose`, `disentangle.nn.layers.add_bias`) keep YNNPACK.
``config.xla.cpu_ynn_dot = False`` switches it off; a jaxlib that does not accept the option
compiles without it, with a warning. Timings: ``benchmarks/HISTORY.md``, "Host settings".

**malloc.** XLA on CPU allocates each step's temporaries with ``malloc`` and frees them after the
step. glibc serves allocations above ``M_MMAP_THRESHOLD`` with fresh ``mmap`` calls and returns
freed memory at the top of the heap above ``M_TRIM_THRESHOLD`` to the OS, so every step pays page
faults for tens of MB of zeroed pages; glibc's dynamic threshold (raised to the size of the
largest freed mmap'd chunk, capped at 32 MiB) does not catch up with XLA's larger buffers.
`configure_malloc` sets both thresholds (1 GiB by default): any explicit threshold switches off
the dynamic mmap threshold, which would otherwise stay at 128 KiB. The same effect from the
environment, before the process starts:
``MALLOC_MMAP_THRESHOLD_=1073741824 MALLOC_TRIM_THRESHOLD_=1073741824``.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import platform
import sys
from typing import Any, Callable
import warnings

import jax
import jax.numpy as jnp

# glibc <malloc.h> parameter numbers.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8

DEFAULT_MMAP_THRESHOLD = 1 << 30
DEFAULT_TRIM_THRESHOLD = 1 << 30


def _glibc() -> ctypes.CDLL | None:
  """The process's glibc, or None when not on Linux with glibc."""
  if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
    return None
  try:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    libc.mallopt  # pylint: disable=pointless-statement  # musl etc. lack it
  except (OSError, AttributeError):
    return None
  libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
  libc.mallopt.restype = ctypes.c_int
  return libc


def configure_malloc(mmap_threshold: int = DEFAULT_MMAP_THRESHOLD,
                     trim_threshold: int = DEFAULT_TRIM_THRESHOLD,
                     arena_max: int | None = None) -> dict[str, int]:
  """Keeps XLA's per-step CPU temporaries in the malloc heap (Linux/glibc; a no-op elsewhere).

  Call it once, early (before JAX starts its threads, for ``arena_max`` to cover them): glibc
  creates per-thread arenas lazily and a thread keeps its arena.

  Args:
    mmap_threshold: bytes; allocations at least this large get their own ``mmap`` (1 GiB: only
      very large arrays, such as whole datasets, bypass the heap).
    trim_threshold: bytes of free memory at the top of the heap kept rather than returned to the OS.
    arena_max: if given, the maximum number of malloc arenas (1: every thread shares the main heap).
      Steadier page-fault counts; threads contend for one lock (measured harmless on 2 cores).

  Returns:
    The settings applied, e.g. ``{'M_MMAP_THRESHOLD': 1073741824, 'M_TRIM_THRESHOLD': 1073741824}``;
    empty where nothing was set (not glibc). A setting glibc rejects is left out.
  """
  libc = _glibc()
  if libc is None:
    return {}
  requested = {"M_MMAP_THRESHOLD": (M_MMAP_THRESHOLD, mmap_threshold),
               "M_TRIM_THRESHOLD": (M_TRIM_THRESHOLD, trim_threshold)}
  if arena_max is not None:
    requested["M_ARENA_MAX"] = (M_ARENA_MAX, arena_max)
  applied = {}
  for name, (param, value) in requested.items():
    if libc.mallopt(param, int(value)) == 1:  # mallopt returns 1 on success, 0 on error
      applied[name] = int(value)
  return applied


YNN_DOT_OPTIONS = {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"}


@functools.lru_cache(maxsize=None)
def _options_supported(items: tuple[tuple[str, str], ...]) -> bool:
  """Whether this jaxlib's CPU compiler accepts the options (one tiny compile, cached)."""
  try:
    jax.jit(lambda a: a @ a, compiler_options=dict(items)).lower(
        jnp.ones((2, 2), jnp.float32)).compile()
  except Exception as e:  # pylint: disable=broad-except  # XlaRuntimeError: INVALID_ARGUMENT
    warnings.warn(f"XLA compiler options {dict(items)} not accepted by this jaxlib "
                  f"({jax.__version__}); compiling without them: {e}", stacklevel=3)
    return False
  return True


def compiler_options(config=None) -> dict[str, str] | None:
  """XLA compiler options for this process's jits: YNNPACK dots on CPU, else None.

  Args:
    config: an experiment config; ``config.xla.cpu_ynn_dot`` (default True) switches the option.
      None: the default.

  Returns:
    A dict for ``jax.jit(..., compiler_options=...)``, or None (not CPU, switched off, or not
    supported by the installed jaxlib).
  """
  enabled = config is None or bool(config.xla.cpu_ynn_dot)
  if not enabled or jax.default_backend() != "cpu":
    return None
  items = tuple(sorted(YNN_DOT_OPTIONS.items()))
  return dict(items) if _options_supported(items) else None


def jit(fun: Callable, config=None, **kwargs: Any):
  """``jax.jit(fun, compiler_options=compiler_options(config), **kwargs)``."""
  return jax.jit(fun, compiler_options=compiler_options(config), **kwargs)
