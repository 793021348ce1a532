"""Shared pieces of the speed benchmarks: the trainer's jitted step on synthetic batches.

Every benchmark times the step exactly as :func:`disentangle.train.trainer.train` compiles it
(:func:`disentangle.train.trainer.phase_step` of the runs' program, for one run or N) in the phase
its figure names (:func:`build_step`'s ``phase``: CascadeVAE's step after t_d unless told), fed with
synthetic batches of the configured shape (uniform random images in [0, 1], placed on the devices
before timing) so that data loading and host-to-device copies are excluded.

Timing: every step is followed by ``block_until_ready`` on the new state and metrics, so one
sample is the latency of one step; figures are medians (and 10th / 90th percentiles) after a
warm-up. The host assignment callback (CascadeVAE, ``cascade.solver='scipy'``) is timed by
:class:`CallbackTimer`, which wraps the host solver of :mod:`disentangle.assignment`
(``assignment.host_solver``) while it is entered.
"""
from __future__ import annotations

import dataclasses
import importlib
import pathlib
import threading
import time
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from disentangle import config as config_lib
from disentangle.reproduce import throughput

# N seeds in one program: the trainer's layouts, and ``jax.lax.map`` over the seeds.
SEED_BATCHINGS = (*config_lib.SEED_LAYOUTS_RESOLVED, "map")
# The phase every benchmark times unless told otherwise: CascadeVAE's step after t_d
# (`CascadeVAE.phase`), whose codes are solved; a method of one phase has no other.
AFTER_T_D = True


# ---------------------------------------------------------------------------------------------
# Host and configs (the environment, image shapes and synthetic batches:
# `disentangle.reproduce.throughput`).
# ---------------------------------------------------------------------------------------------
def configure_host() -> dict[str, Any] | str:
  """Calls ``disentangle.train.host.configure_malloc()`` (as the trainer does) when it exists.

  Call it early, before JAX starts its threads.

  Returns:
    For the JSON output: the malloc settings applied (``{}`` where none could be), or
    ``'absent'`` when the module or function does not exist.
  """
  try:
    host = importlib.import_module("disentangle.train.host")
  except ImportError:
    return "absent"
  configure = getattr(host, "configure_malloc", None)
  if configure is None:
    return "absent"
  applied = configure()
  return dict(applied) if isinstance(applied, dict) else "configure_malloc"


def describe_config(config_flag) -> dict[str, Any]:
  """Name, variant and command-line overrides of an ml_collections ``--config`` flag."""
  from ml_collections import config_flags  # pylint: disable=g-import-not-at-top
  spec = config_flags.get_config_filename(config_flag)
  path, _, variant = spec.partition(":")
  overrides = {k: _jsonable(v) for k, v in config_flags.get_override_values(config_flag).items()}
  return {"config": pathlib.Path(path).stem, "variant": variant or None,
          "config_overrides": overrides}


def _jsonable(v):
  if isinstance(v, (bool, int, float, str)) or v is None:
    return v
  if isinstance(v, (tuple, list)):
    return [_jsonable(x) for x in v]
  return str(v)


def force_discrete(config: ml_collections.ConfigDict, enabled: bool = True) -> dict[str, Any]:
  """For CascadeVAE, sets ``cascade.discrete_start = 0`` so every timed step has t > t_d.

  Args:
    config: the experiment config (changed in place; existing field, so a locked config is fine).
    enabled: False leaves the config alone (e.g. to time the CascadeVAE-C ablation as configured).

  Returns:
    JSON fields saying what was done (``discrete_forced`` and the configured ``t_d``).
  """
  if config.method != "cascadevae":
    return {"discrete_forced": None}
  original = int(config.cascade.discrete_start)
  if enabled:
    config.cascade.discrete_start = 0
  return {"discrete_forced": bool(enabled), "discrete_start_config": original,
          "discrete_start_used": int(config.cascade.discrete_start)}


# ---------------------------------------------------------------------------------------------
# The host assignment callback.
# ---------------------------------------------------------------------------------------------
class CallbackTimer:
  """Times the host assignment solves while entered (the ``pure_callback`` body of
  :mod:`disentangle.assignment`): `disentangle.assignment.host_solver` puts a timed wrapper of
  the solver in place.

  Measures the Python body of the callback (the scipy solve, float64 conversion and checks); the
  callback machinery around it (argument copies, the GIL, XLA's callback dispatch) is part of the
  step but not of this figure, so the share is a lower bound.
  """

  def __init__(self):
    self._durations: list[float] = []
    self._lock = threading.Lock()
    self._context = None
    self._solve: Callable | None = None
    self.last_problem: tuple[np.ndarray, np.ndarray] | None = None  # latest (u, penalty)

  def __enter__(self) -> "CallbackTimer":
    from disentangle import assignment  # pylint: disable=g-import-not-at-top

    def timed(u, penalty):
      t0 = time.perf_counter()
      try:
        return self._solve(u, penalty)
      finally:
        dt = time.perf_counter() - t0
        with self._lock:
          self._durations.append(dt)
          self.last_problem = (np.array(u), np.array(penalty))

    self._context = assignment.host_solver(timed)
    self._solve = self._context.__enter__()  # the solver in place before this timer's
    return self

  def __exit__(self, *exc) -> None:
    self._context.__exit__(*exc)

  def mark(self) -> int:
    with self._lock:
      return len(self._durations)

  def since(self, mark: int) -> list[float]:
    """Durations (s) of the calls made after ``mark``."""
    with self._lock:
      return list(self._durations[mark:])



def header(benchmark: str, config_flag, config, force: bool) -> dict[str, Any]:
  """The fields every benchmark line starts with: name, config, discrete forcing, model."""
  out: dict[str, Any] = {"benchmark": benchmark}
  out.update(describe_config(config_flag))
  out.update(force_discrete(config, force))
  out.update(throughput.model_summary(config))
  from disentangle.train import host  # pylint: disable=g-import-not-at-top
  out["compiler_options"] = host.compiler_options(config)
  return out


def finish_record(record: dict[str, Any], malloc) -> dict[str, Any]:
  """Adds the environment, the host settings and the data note to a final record."""
  record.update(throughput.environment())
  record.update(host_setup=malloc, data=throughput.DATA_NOTE)
  return record

def time_callback_jit(u: np.ndarray, penalty: np.ndarray, reps: int = 20) -> float:
  """Median ms of ``jax.jit(assign(., penalty, solver='scipy'))`` alone on the problem ``u``.

  The second measurement of the callback: the same problem sizes (the step's own latest ``u``),
  through ``jax.pure_callback`` in a jitted program of its own, so the figure includes the callback
  machinery (and one tiny program's dispatch) that :class:`CallbackTimer` does not see.
  """
  from disentangle import assignment  # pylint: disable=g-import-not-at-top
  u_dev = jnp.asarray(u, jnp.float32)
  lam = np.asarray(penalty, np.float64)
  lam = float(lam) if lam.ndim == 0 else lam  # a Python penalty, as the methods pass it
  fn = jax.jit(lambda v: assignment.assign(v, lam, solver="scipy"))
  jax.block_until_ready(fn(u_dev))
  times = []
  for _ in range(reps):
    t0 = time.perf_counter()
    jax.block_until_ready(fn(u_dev))
    times.append(time.perf_counter() - t0)
  return 1e3 * float(np.median(times))


# ---------------------------------------------------------------------------------------------
# The step.
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass
class StepBench:
  """A compiled train step with its (donated) state and a few synthetic batches on device."""

  method: Any
  phase: Any             # the method's phase of the step (``method.phase``; None: one phase)
  compiled: Any          # the trainer's compiled step, called (state, batch)
  state: Any
  batches: list[dict]
  num_seeds: int
  compile_s: float       # lower + compile (s)
  flops: float | None    # XLA cost analysis of one step (all seeds)
  last_metrics: Any = None
  cpu_times: list[float] = dataclasses.field(default_factory=list)
  _cursor: int = 0

  def next_batch(self) -> dict:
    """The next of ``batches``, cycled through in order."""
    batch = self.batches[self._cursor % len(self.batches)]
    self._cursor += 1
    return batch

  def step(self) -> None:
    """One step, blocked until done."""
    self.state, self.last_metrics = self.compiled(self.state, self.next_batch())
    jax.block_until_ready((self.state, self.last_metrics))

  def run(self, n: int) -> list[float]:
    """Wall seconds of each of ``n`` steps (process CPU seconds go to ``self.cpu_times``)."""
    times = []
    for _ in range(n):
      c0, t0 = time.process_time(), time.perf_counter()
      self.step()
      times.append(time.perf_counter() - t0)
      self.cpu_times.append(time.process_time() - c0)
    return times

  def metrics_summary(self) -> dict[str, Any]:
    """Loss finiteness and whether the discrete branch ran, from the last step's metrics."""
    m = jax.device_get(self.last_metrics)
    out = {"loss_finite": bool(np.all(np.isfinite(np.asarray(m["loss"]))))}
    if "discrete_active" in m:
      out["discrete_active"] = float(np.min(m["discrete_active"]))
    return out


def build_step(config, image: Sequence[int], *, num_seeds: int = 1, num_batches: int = 4,
               seed: int = 0, seed_batching: str = "vmap", phase=AFTER_T_D) -> StepBench:
  """Builds, initialises and compiles the trainer's step of ``phase`` for ``config`` on synthetic
  batches.

  The step is :func:`disentangle.train.trainer.phase_step`'s, for every run count: the runs'
  program (`disentangle.train.runs.Program`) of ``num_seeds`` seeds in the layout
  ``seed_batching``, jitted with the trainer's shardings and donation.

  Args:
    config: a validated experiment config (``config.num_seeds`` and ``config.seed_layout`` are
      ignored: ``num_seeds`` and ``seed_batching`` rule).
    image: image shape (H, W, C).
    num_seeds: 1 = one run's step; N > 1 = the step over N stacked states and per-seed batches,
      as the trainer builds it with ``config.num_seeds = N``.
    num_batches: distinct synthetic batches cycled through.
    seed: seed of the parameters and the synthetic images.
    seed_batching: how N > 1 seeds are batched in one program: ``'vmap'`` or ``'unroll'`` (the
      trainer's layouts, ``seeds.layout``: unroll on CPU), or ``'map'`` (``jax.lax.map`` over the
      seeds: not a layout of the trainer, the alternative ``benchmarks.multi_seed`` measures).
    phase: the method's phase, as the trainer takes it from the step number (``method.phase``)
      and fixes it (``method.for_phase``): CascadeVAE's ``True`` after t_d (the default: the
      codes' costs, their solve and the update given them) or ``False`` before t_d (no codes). A
      method of one phase (``method.phase`` None) has one step, whatever ``phase`` says.

  Returns:
    A :class:`StepBench` ready to step (not yet warmed up).
  """
  from disentangle import methods  # pylint: disable=g-import-not-at-top
  from disentangle.train import codes  # pylint: disable=g-import-not-at-top
  from disentangle.train import host  # pylint: disable=g-import-not-at-top
  from disentangle.train import runs as runs_lib  # pylint: disable=g-import-not-at-top
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top

  if seed_batching not in SEED_BATCHINGS:
    raise ValueError(f"seed_batching must be one of {SEED_BATCHINGS}, got {seed_batching!r}")
  multi = num_seeds > 1
  c = config_lib.copy(config)
  c.num_seeds, c.seed, c.sweep = num_seeds, seed, ""
  if seed_batching in config_lib.SEED_LAYOUTS_RESOLVED:
    c.seed_layout = seed_batching
  cfgs = runs_lib.run_configs(c)
  program = runs_lib.Program(c, cfgs)
  if c.batch_size % program.mesh.devices.size:
    raise ValueError(f"batch_size {c.batch_size} is not divisible by the "
                     f"{program.mesh.devices.size} devices")
  method = methods.build(c, image, mesh=program.mesh)
  phase = _phase_of(method, phase)
  state = methods.init_states_of(method, [x.seed for x in cfgs], out_shardings=program.states)
  if multi and seed_batching == "map":
    fixed = method.for_phase(phase)
    step = host.jit(lambda s, b: jax.lax.map(lambda sb: codes.step(fixed)(*sb), (s, b)), c,
                    donate_argnums=0, in_shardings=(program.states, program.batches),
                    out_shardings=(program.states, program.repl))
    rest = ()
  else:
    step, rest = trainer.phase_step(program, method, phase)
  spec = type(method).batch_spec(c)
  factors = min(c.model.latent_dim, 5)  # a pair's label: as many factors as dSprites
  synthetic = throughput.synthetic_batches(image, c.batch_size, num_seeds, num_batches, seed)
  batches = [jax.device_put(
      throughput.with_side_information(b, spec, num_seeds, seed + i, factors), program.batches)
             for i, b in enumerate(synthetic)]
  jax.block_until_ready((state, batches))

  t0 = time.perf_counter()
  if hasattr(step, "lower"):
    compiled = step.lower(state, batches[0], *rest).compile()
    flops = _flops(compiled)
  else:  # the overlapped groups (`codes.Overlapped`): their programs compile at first use
    compiled, flops = step, None
  compile_s = time.perf_counter() - t0
  call = (lambda s, b: compiled(s, b, *rest)) if rest else compiled
  return StepBench(method=method, phase=phase, compiled=call, state=state, batches=batches,
                   num_seeds=num_seeds, compile_s=compile_s, flops=flops)


def _phase_of(method, phase):
  """``phase`` as the trainer names it (``method.phase(step)``): None for a method of one phase
  (`methods.base.VAEMethod.phase`); a method with phases needs one of its own."""
  if method.phase(0) is None:
    return None
  if phase is None:
    raise ValueError(f"{method.name} has phases (method.phase): build_step needs one of them "
                     f"(CascadeVAE: True after t_d, False before), not None")
  return phase


def _flops(compiled) -> float | None:
  try:
    analysis = compiled.cost_analysis()
  except Exception:  # pylint: disable=broad-except
    return None
  if isinstance(analysis, (list, tuple)):  # older jax: one dict per program
    analysis = analysis[0] if analysis else None
  if not analysis or "flops" not in analysis:
    return None
  return float(analysis["flops"])


# ---------------------------------------------------------------------------------------------
# Statistics.
# ---------------------------------------------------------------------------------------------
def median_ms(fn: Callable[[int], object], reps: int, *, warmup: int = 0,
              digits: int = 3) -> float:
  """Median ms of ``fn(i)`` over ``i in range(reps)``, each timed alone, after ``warmup`` calls
  ``fn(10_000 + w)`` (other inputs than the timed ones)."""
  for w in range(warmup):
    fn(10_000 + w)
  times = []
  for i in range(reps):
    t0 = time.perf_counter()
    fn(i)
    times.append(time.perf_counter() - t0)
  return round(1e3 * float(np.median(times)), digits)


def summarize_ms(times_s: Sequence[float]) -> dict[str, float]:
  """Median, 10th and 90th percentile and mean of ``times_s``, in ms."""
  ms = 1e3 * np.asarray(times_s, np.float64)
  return {"median_ms": round(float(np.median(ms)), 3),
          "p10_ms": round(float(np.percentile(ms, 10)), 3),
          "p90_ms": round(float(np.percentile(ms, 90)), 3),
          "mean_ms": round(float(np.mean(ms)), 3),
          "timed_steps": int(ms.size)}


def summarize_cpu_ms(cpu_s: Sequence[float]) -> dict[str, Any]:
  """Median process CPU time per step (all threads): less sensitive to other processes' load
  than wall time (but it includes spin-waiting of idle worker threads)."""
  return {"cpu_median_ms": round(1e3 * float(np.median(cpu_s)), 3)}


def callback_summary(callback_s: Sequence[float], step_s: Sequence[float], solver: str | None,
                     callback_jit_ms: float | None = None) -> dict[str, Any]:
  """Share of the timed steps spent in the host assignment callback.

  Args:
    callback_s: durations of the callback body during the timed steps (:class:`CallbackTimer`).
    step_s: wall time of the timed steps.
    solver: ``cascade.solver`` (None for methods without a discrete code).
    callback_jit_ms: optional :func:`time_callback_jit` figure on the same problem.

  Returns:
    ``callback_share`` (measured body time / step time) and friends, or None fields when the
    step has no host callback.
  """
  if solver != "scipy":
    return {"callback_share": None, "callback_note": f"no host callback (solver={solver!r})"}
  total = float(np.sum(step_s))
  cb = np.asarray(callback_s, np.float64)
  out = {
      "callback_share": round(float(cb.sum()) / total, 4) if total > 0 else None,
      "callback_median_ms": round(1e3 * float(np.median(cb)), 3) if cb.size else None,
      "callback_calls_per_step": round(cb.size / max(len(step_s), 1), 3),
  }
  note = ("callback_share: measured in the step, disentangle.assignment's host solver wrapped "
          "with a timer for the benchmark (assignment.host_solver): its wall time summed over the "
          "timed steps / their total wall time (callback dispatch outside the Python body not "
          "included)")
  if callback_jit_ms is not None:
    out["callback_jit_median_ms"] = round(callback_jit_ms, 3)
    out["callback_share_jit"] = round(callback_jit_ms / (1e3 * float(np.median(step_s))), 4)
    note += ("; callback_share_jit: jax.jit(assign(u, solver='scipy')) timed alone on the step's "
             "own u (includes the pure_callback machinery) / median step time")
  out["callback_note"] = note
  return out


def bare_step(config, warmup: int) -> StepBench:
  """The bare step of `benchmarks.loop`'s timed steps (``warmup`` to ``config.num_steps``): the trainer's
  step of their phase (``method.phase``; CascadeVAE after t_d: the codes' costs, their solve and
  the update), compiled on its own. ``--config.num_seeds=N``: the step over the N runs' stacked
  states and batches, in the trainer's seed layout.

  Raises:
    ValueError: the timed steps are in two phases (t_d among them).
  """
  from disentangle import methods  # pylint: disable=g-import-not-at-top
  from disentangle.train import seeds  # pylint: disable=g-import-not-at-top
  image = throughput.image_shape(config)
  method = methods.build(config, image)
  phase = method.phase(warmup)
  if method.phase(config.num_steps - 1) != phase:
    raise ValueError(f"the timed steps {warmup} to {config.num_steps} are in two phases of "
                     f"{config.method} (t_d among them): time one (--warmup, --steps, "
                     f"--force_discrete)")
  return build_step(config, image, num_seeds=config.num_seeds, seed=config.seed,
                                seed_batching=seeds.layout(config), phase=phase)
