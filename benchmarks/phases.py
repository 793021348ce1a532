"""The trainer's program of N runs, timed phase by phase (`benchmarks.sweep`, the slot's
throughput figures `benchmarks.throughput`).

:func:`measure_program` builds :class:`disentangle.train.runs.Program` for ``num_runs`` runs of a
config on ``devices`` devices, on one synthetic batch (`benchmarks.common`), and times each phase
of the method (CascadeVAE: ``before`` t_d, without the discrete branch, and ``after``; other
methods: one phase ``all``) as the trainer compiles it: one program per phase. Every step is
blocked on, so one sample is the latency of one step; the figure is the median.
"""
from __future__ import annotations

import functools
import time
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import common


def top_level_ops(compiled) -> int:
  """Instructions of the compiled program's ENTRY computation (fusions count once)."""
  lines = compiled.as_text().splitlines()
  start = next(i for i, l in enumerate(lines) if l.startswith("ENTRY"))
  count = 0
  for line in lines[start + 1:]:
    if line.startswith("}"):
      break
    count += " = " in line
  return count


class CallbackCounter:
  """Counts the host assignment calls (wraps `disentangle.assignment._assign_host`)."""

  def __enter__(self):
    from disentangle import assignment  # pylint: disable=g-import-not-at-top
    self.module, self.calls = assignment, 0
    self.original = assignment._assign_host  # pylint: disable=protected-access

    def counting(u, penalty):
      self.calls += 1
      return self.original(u, penalty)

    assignment._assign_host = counting  # pylint: disable=protected-access
    return self

  def __exit__(self, *exc):
    self.module._assign_host = self.original  # pylint: disable=protected-access
    return False


def phases(method) -> dict[str, int]:
  """{name: a step of that phase} (CascadeVAE: ``before`` / ``after`` t_d; else ``all``)."""
  if method.phase(0) is None:  # one phase (VAEMethod.phase)
    return {"all": 0}
  after = int(method.config.cascade.discrete_start)
  return {"after": after} if method.phase(0) else {"before": 0, "after": after}


def _call(compiled, rest, state, batch):
  return compiled(state, batch, *rest)


def measure_program(config, image, num_runs: int, devices: int, counter: CallbackCounter, *,
                    steps: int, warmup: int, only: Sequence[str] | None = None,
                    min_seconds: float = 0.0, max_steps: int = 10_000,
                    keep_going: Callable[[], bool] = lambda: True) -> list[dict[str, Any]]:
  """One record per phase of ``num_runs`` runs of ``config`` as the trainer's one program.

  The program is :class:`disentangle.train.runs.Program` (the runs on a ``(runs, data)`` mesh of
  ``devices``, one compiled step per phase) on one synthetic batch. Each phase is compiled,
  stepped ``warmup`` times, then timed step by step (blocked) until ``steps`` steps and
  ``min_seconds`` have passed (at most ``max_steps``).

  Args:
    only: the phases to time (names of :func:`phases`); None: all.
    keep_going: asked before each phase; False ends the measurement there.

  Returns:
    Per phase: ``step_ms`` (median), ``run_steps_per_s``, ``callbacks_per_step``,
    ``top_level_ops``, ``compile_s``, ``timed_steps`` and the ``time.time()`` span of the timed
    steps (``timed_from``, ``timed_to``), with the layout and the load average.
  """
  from disentangle import methods  # pylint: disable=g-import-not-at-top
  from disentangle.train import runs  # pylint: disable=g-import-not-at-top
  c = config.copy_and_resolve_references()
  with c.unlocked():
    c.num_seeds, c.mesh.num_devices = num_runs, devices
  cfgs = runs.run_configs(c)
  program = runs.Program(c, cfgs)
  method = methods.build(c, image, mesh=program.mesh)
  keys = jnp.stack([jax.random.PRNGKey(x.seed) for x in cfgs])
  init = (lambda k: method.init(k[0])) if num_runs == 1 else jax.vmap(method.init)
  state = jax.jit(init, out_shardings=program.states)(keys)
  batch = common.synthetic_batches(image, c.batch_size, num_runs, 1, 0)[0]
  batch = common.with_side_information(batch, type(method).batch_spec(c), num_runs, 0)
  batch = jax.device_put(batch, program.batches)
  out = []
  for name, step in phases(method).items():
    if (only is not None and name not in only) or not keep_going():
      continue
    t0 = time.perf_counter()
    # The runs' host assignments overlapped (assignment_overlap): four programs a step, compiled
    # at the first call (compile_s includes that step); else the one program of the phase.
    run_step = program.overlapped_step(method, image, method.phase(step))
    ops = None
    if run_step is None:
      jitted, rest = program.jitted_step(method, image, method.phase(step))
      compiled = jitted.lower(state, batch, *rest).compile()
      run_step, ops = functools.partial(_call, compiled, rest), top_level_ops(compiled)
    else:
      state, _ = jax.block_until_ready(run_step(state, batch))
    compile_s = time.perf_counter() - t0
    for _ in range(warmup):
      state, _ = jax.block_until_ready(run_step(state, batch))
    calls, times, started = counter.calls, [], time.time()
    while len(times) < steps or (sum(times) < min_seconds and len(times) < max_steps):
      t = time.perf_counter()
      state, _ = jax.block_until_ready(run_step(state, batch))
      times.append(time.perf_counter() - t)
    ms = 1e3 * float(np.median(times))
    out.append({"runs": num_runs, "devices": devices, "mesh": {"runs": program.runs_axis,
                                                              "data": program.data_axis},
                "phase": name, "step_ms": round(ms, 2),
                "run_steps_per_s": round(num_runs / (ms / 1e3), 3),
                "callbacks_per_step": (counter.calls - calls) / len(times),
                "top_level_ops": ops, "compile_s": round(compile_s, 2),
                "timed_steps": len(times), "timed_from": started, "timed_to": time.time(),
                "loadavg": common.load_average()})
  return out
