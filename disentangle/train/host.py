"""Host (CPU process) settings for training: glibc malloc tuning for XLA's CPU temporaries.

XLA on CPU allocates each step's temporaries with ``malloc`` and frees them after the step. glibc
serves allocations above ``M_MMAP_THRESHOLD`` with fresh ``mmap`` calls and returns freed memory at
the top of the heap above ``M_TRIM_THRESHOLD`` to the OS, so every step pays page faults for tens of
MB of zeroed pages. glibc's dynamic threshold (raised to the size of the largest freed mmap'd chunk,
capped at 32 MiB) does not catch up with XLA's larger buffers.

Measured on a jitted encoder + decoder forward/backward + Adam step (dSprites 64x64, batch 64,
2-core CPU shared with other jobs at load average 6-7; ``python -m benchmarks.layers --step``, two
fresh processes per setting), per step, default malloc -> `configure_malloc()` (1 GiB / 1 GiB):

  conv_impl='fast': minor page faults 22,400 -> 2,500-5,700; system CPU 38-41 -> 6-20 ms;
                    wall 396-432 -> 355-358 ms (median);
  conv_impl='flax': minor page faults 29,700 -> 1,100-1,900; system CPU 58-70 -> 4-13 ms;
                    wall 1560-1760 -> 1565-1635 ms (the 1.2 s of convolution time drowns it).

Other settings, same step (fast), minor page faults per step: mmap/trim thresholds 64/128 MiB
~6,300-7,300, 256/512 MiB ~5,400-5,900 (1 GiB/1 GiB ranged 1,300-10,000 across runs);
``arena_max=1`` on top of 1 GiB a steady ~950 (every thread on the main heap: presumably no
per-thread arena, whose heaps are at most 64 MiB, then falls back to ``mmap``); ``M_MMAP_MAX=0``
(no mmap at all) 1,100-3,600. Setting only ``M_TRIM_THRESHOLD`` is worse than nothing (~55,000):
any explicit threshold switches off glibc's dynamic mmap threshold, which then stays at 128 KiB.
glibc 2.36 accepts a 1 GiB M_MMAP_THRESHOLD.

The same effect from the environment, before the process starts:
``MALLOC_MMAP_THRESHOLD_=1073741824 MALLOC_TRIM_THRESHOLD_=1073741824``.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import platform
import sys

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
