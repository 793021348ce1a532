"""A profile of a few training steps on request (``config.profile``), and its top kernels.

As CLU's ``periodic_actions.Profile`` and flax's examples do: with ``profile.num_steps = n > 0``
the steps ``first_step + 1 .. first_step + n`` (after the first compilations and warm-up) are
traced with ``jax.profiler`` into ``<workdir>/profile``: ``plugins/profile/<time>/`` holds the
XPlane trace that TensorBoard's profile plugin (or XProf) shows, and a Perfetto trace
(``perfetto_trace.json.gz``, open it at ui.perfetto.dev). :func:`top_kernels` reads the latter:
the device's kernels (on a CPU, XLA's operations) by total time.
"""
from __future__ import annotations

import collections
import gzip
import json
import pathlib
from typing import Callable

import jax

FOLDER = "profile"


def hook(config, workdir) -> Callable | None:
  """A trainer hook ``(state, done)`` that traces ``config.profile.num_steps`` steps after step
  ``config.profile.first_step``, or None when profiling is off."""
  steps, first = config.profile.num_steps, config.profile.first_step
  if not steps:
    return None
  folder = pathlib.Path(workdir) / FOLDER
  active = []

  def profile(state, done: int) -> None:
    if done == first and not active:
      jax.block_until_ready(state)  # the trace starts with no step in flight
      jax.profiler.start_trace(str(folder), create_perfetto_trace=True)
      active.append(done)
    elif active and done == first + steps:
      jax.block_until_ready(state)
      jax.profiler.stop_trace()
      active.clear()
      if jax.process_index() == 0:
        print(f"profile of steps {first + 1}-{done}: {folder} (tensorboard --logdir {folder}, "
              f"or perfetto_trace.json.gz at ui.perfetto.dev)", flush=True)
  return profile


def trace_files(folder) -> list[pathlib.Path]:
  """The Perfetto traces under a profile ``folder``, oldest first."""
  return sorted(pathlib.Path(folder).glob("plugins/profile/*/perfetto_trace.json.gz"))


def top_kernels(trace: str | pathlib.Path, k: int = 10, device: str = "GPU") -> list[dict]:
  """The ``k`` kernels of ``trace`` (a ``perfetto_trace.json.gz``) that took the most time on the
  processes whose name contains ``device`` (a GPU's streams; ``''``: every process, e.g. XLA:CPU's
  operations on the host): name, calls, total and mean microseconds, share of the total."""
  with gzip.open(trace, "rt") as f:
    events = json.load(f)
  events = events.get("traceEvents", events) if isinstance(events, dict) else events
  names = {e["pid"]: e.get("args", {}).get("name", "") for e in events
           if e.get("ph") == "M" and e.get("name") == "process_name"}
  total, calls = collections.Counter(), collections.Counter()
  for e in events:
    if e.get("ph") == "X" and device in names.get(e.get("pid"), "") and "dur" in e:
      total[e["name"]] += float(e["dur"])
      calls[e["name"]] += 1
  overall = sum(total.values()) or 1.0
  return [{"name": name, "calls": calls[name], "total_us": round(us, 1),
           "mean_us": round(us / calls[name], 2), "share": round(us / overall, 4)}
          for name, us in total.most_common(k)]
