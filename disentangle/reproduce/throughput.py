"""What the slot measures first (`disentangle.reproduce.slot`): the trainer's step of N runs, timed.

:func:`time_runs` builds the trainer's program of ``num_runs`` runs of a config
(`disentangle.train.runs.Program`, each phase's step built by `disentangle.train.trainer.phase_step`,
as training compiles it) on one synthetic batch, and times each phase of the method (CascadeVAE:
``before`` t_d, without the discrete branch, and ``after``; other methods: one phase ``all``).
Every step is blocked on, so one sample is the latency of one step; the figure is the median.

:func:`measure` is the slot's throughput figures: dSprites CascadeVAE ``m6`` and MNIST ``m10``
(or their ``smoke`` variants; the caller passes the config modules), N runs in one program for
each N asked, before t_d (where t_d >= 1; MNIST ``m10`` has t_d = 0) and after it with the host
solver (``cascade.solver='scipy'``), after it with the on-device one (``'hungarian'``) and with
the host's solves overlapped with the device's work (``'scipy_overlapped'``:
``assignment_placement='overlapped'``, `disentangle.train.codes`): run-steps/s, host callbacks per step,
compile time and the device's busy share, the mean ``utilization.gpu`` of nvidia-smi over the
timed steps (`utilisation.GpuSampler`; null without nvidia-smi). The speed benchmarks
(``benchmarks/``) share the synthetic batches and the records' fields from here.
"""
from __future__ import annotations

import datetime
import itertools
import os
import time
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from disentangle import backend
from disentangle.data import loading
from disentangle.reproduce import utilisation

DATA_NOTE = ("synthetic batches: uniform random images in [0, 1] of the configured shape, on "
             "device before timing (data loading and host-to-device copies excluded)")
CONFIGS = (("dsprites_cascade", "m6"), ("mnist_cascade", "m10"))
# (name, cascade.solver, overlapped placement, phases): the host solver in the step, the on-device
# solver and the host solver overlapped with the other half of the runs' device work (after t_d).
SOLVERS = (("scipy", "scipy", False, None), ("hungarian", "hungarian", False, ("after",)),
           ("scipy_overlapped", "scipy", True, ("after",)))
TIMING = {False: dict(steps=10, warmup=2, min_seconds=2.0),  # >= 2 s: several nvidia-smi samples
          True: dict(steps=2, warmup=1, min_seconds=0.0)}


# -- the machine and the config --------------------------------------------------------------
def num_cores() -> int:
  """The cores this process may run on (the affinity mask, else ``os.cpu_count()``)."""
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:  # not Linux
    return os.cpu_count() or 1


def load_average() -> list[float] | None:
  try:
    return [round(v, 2) for v in os.getloadavg()]
  except OSError:
    return None


def environment() -> dict[str, Any]:
  """Versions, devices and machine load, for every record."""
  record = backend.describe()
  return {
      "jax_version": record["jax"],
      "backend": record["backend"],
      "num_devices": record["device_count"],
      "device_kind": record["device_kind"],
      "jaxlib_version": record["jaxlib"],
      "cores": num_cores(),
      "loadavg": load_average(),
  }


def image_shape(config) -> tuple[int, int, int]:
  """The dataset's image shape as its loader gives it (`loading.IMAGE_SHAPES`), without the data."""
  return loading.IMAGE_SHAPES[config.dataset.name]


def model_summary(config) -> dict[str, Any]:
  """The model and batch fields every record repeats."""
  out = {"method": config.method, "conv_impl": config.model.conv_impl,
         "batch_size": int(config.batch_size), "latent_dim": int(config.model.latent_dim),
         "dataset": config.dataset.name}
  if config.method == "cascadevae":
    out.update(num_discrete=int(config.cascade.num_discrete),
               solver=config.cascade.solver, penalty=float(config.cascade.penalty))
  return out


# -- synthetic batches -----------------------------------------------------------------------
def synthetic_batches(image: Sequence[int], batch_size: int, num_seeds: int,
                      count: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
  """``count`` host batches {'image': float32 [(N,) B, H, W, C] uniform in [0, 1]}."""
  rng = np.random.default_rng(seed)
  lead = (num_seeds,) if num_seeds > 1 else ()
  shape = lead + (batch_size,) + tuple(image)
  return [{"image": rng.random(shape, dtype=np.float32)} for _ in range(count)]


def with_side_information(batch: dict, spec, num_seeds: int, seed: int,
                          num_factors: int = 1) -> dict:
  """``batch`` plus what a method's `BatchSpec` asks for, synthetic: ``targets`` /
  ``attributes`` (int32 in {0, 1}, valid for every class count), the labelled stream
  (``labelled_image`` uniform in [0, 1], ``labelled_targets``) of ``spec.labelled.batch_size``
  and, for pairs, ``image_pair`` (uniform in [0, 1]) with ``changed`` (int32 [B,
  ``num_factors``], one changed factor per pair)."""
  del num_seeds  # the batch's leading axes say it
  rng = np.random.default_rng([seed, 1])
  images = batch["image"]
  lead = images.shape[:-4]
  out = dict(batch)
  bits = lambda n, k: rng.integers(0, 2, lead + (n, k)).astype(np.int32)
  if spec.targets:
    out["targets"] = bits(images.shape[-4], len(spec.targets))
  if spec.attributes:
    out["attributes"] = bits(images.shape[-4], len(spec.attributes))
  if spec.labelled is not None:
    n = spec.labelled.batch_size
    out["labelled_image"] = rng.random(lead + (n,) + images.shape[-3:], dtype=np.float32)
    out["labelled_targets"] = bits(n, max(1, len(spec.targets)))
  if getattr(spec, "pairs", None) is not None:
    b = images.shape[-4]
    out["image_pair"] = rng.random(images.shape, dtype=np.float32)
    which = rng.integers(0, num_factors, lead + (b,))
    out["changed"] = (which[..., None] == np.arange(num_factors)).astype(np.int32)
  return out


# -- the step of N runs, timed ---------------------------------------------------------------
class CallbackCounter:
  """Counts the host assignment solves while entered (`disentangle.assignment.host_solver`
  wrapping the solver in place: the steps' ``pure_callback`` bodies and the overlapped solves)."""

  def __enter__(self):
    from disentangle import assignment  # pylint: disable=g-import-not-at-top
    self.calls = 0

    def counting(u, penalty):
      self.calls += 1
      return self.original(u, penalty)

    self._context = assignment.host_solver(counting)
    self.original = self._context.__enter__()
    return self

  def __exit__(self, *exc):
    return self._context.__exit__(*exc)


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


def phases(method) -> dict[str, int]:
  """{name: a step of that phase} (CascadeVAE: ``before`` / ``after`` t_d; else ``all``)."""
  if method.phase(0) is None:  # one phase (VAEMethod.phase)
    return {"all": 0}
  after = int(method.config.cascade.discrete_start)
  return {"after": after} if method.phase(0) else {"before": 0, "after": after}


def time_runs(config, num_runs: int, *, image: Sequence[int] | None = None, devices: int = 1,
              steps: int = 10, warmup: int = 2, only: Sequence[str] | None = None,
              min_seconds: float = 0.0, max_steps: int = 10_000,
              keep_going: Callable[[], bool] = lambda: True,
              counter: CallbackCounter | None = None,
              inspect: Callable[[Any, str], None] | None = None,
              trace_dir: str | None = None) -> dict[str, dict[str, Any]]:
  """{phase: record} of ``num_runs`` runs of ``config`` in the trainer's one program.

  The runs lie on the trainer's ``(runs, data)`` mesh of ``devices`` devices, each phase's step
  is `trainer.phase_step`'s, on one synthetic batch of ``image`` (default: the dataset's shape,
  :func:`image_shape`). Each phase is compiled, stepped ``warmup`` times, then timed step by
  step (blocked) until ``steps`` steps and ``min_seconds`` have passed (at most ``max_steps``).

  Args:
    only: the phases to time (names of :func:`phases`); None: all.
    keep_going: asked before each phase; False ends the measurement there.
    counter: a :class:`CallbackCounter` already entered (one is entered here without it).
    inspect: called with each phase's compiled program and the phase's name (where the phase is
      one program), e.g. to read its kernels.
    trace_dir: the timed steps are traced with ``jax.profiler`` into this folder (with a
      Perfetto trace, `disentangle.train.profiling.top_kernels`).

  Returns:
    Per phase: ``step_ms`` (median), ``run_steps_per_s``, ``callbacks_per_step``,
    ``top_level_ops`` (of the one program; None for the overlapped groups), ``compile_s``,
    ``timed_steps`` and the ``time.time()`` span of the timed steps (``timed_from``,
    ``timed_to``), with the layout and the load average.
  """
  from disentangle import methods  # pylint: disable=g-import-not-at-top
  from disentangle.train import runs  # pylint: disable=g-import-not-at-top
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  if counter is None:
    with CallbackCounter() as counter:
      return time_runs(config, num_runs, image=image, devices=devices, steps=steps,
                       warmup=warmup, only=only, min_seconds=min_seconds, max_steps=max_steps,
                       keep_going=keep_going, counter=counter, inspect=inspect,
                       trace_dir=trace_dir)
  c = config.copy_and_resolve_references()
  with c.unlocked():
    c.num_seeds, c.mesh.num_devices = num_runs, devices
  image = tuple(image) if image is not None else image_shape(c)
  cfgs = runs.run_configs(c)
  program = runs.Program(c, cfgs)
  method = methods.build(c, image, mesh=program.mesh)
  keys = jnp.stack([jax.random.PRNGKey(x.seed) for x in cfgs])
  init = (lambda k: method.init(k[0])) if num_runs == 1 else jax.vmap(method.init)
  state = jax.jit(init, out_shardings=program.states)(keys)
  batch = synthetic_batches(image, c.batch_size, num_runs, 1, 0)[0]
  batch = with_side_information(batch, type(method).batch_spec(c), num_runs, 0)
  batch = jax.device_put(batch, program.batches)
  out = {}
  for name, step in phases(method).items():
    if (only is not None and name not in only) or not keep_going():
      continue
    t0 = time.perf_counter()
    train_step, rest = trainer.phase_step(program, method, method.phase(step))
    ops = None
    if hasattr(train_step, "lower"):  # the one program of the phase
      compiled = train_step.lower(state, batch, *rest).compile()
      train_step, ops = compiled, top_level_ops(compiled)
      if inspect is not None:
        inspect(compiled, name)
    else:  # the overlapped groups: four programs a step, compiled at the first call
      state, _ = jax.block_until_ready(train_step(state, batch, *rest))
    compile_s = time.perf_counter() - t0
    for _ in range(warmup):
      state, _ = jax.block_until_ready(train_step(state, batch, *rest))
    calls, times, started = counter.calls, [], time.time()
    if trace_dir is not None:
      jax.profiler.start_trace(trace_dir, create_perfetto_trace=True)
    try:
      while len(times) < steps or (sum(times) < min_seconds and len(times) < max_steps):
        t = time.perf_counter()
        state, _ = jax.block_until_ready(train_step(state, batch, *rest))
        times.append(time.perf_counter() - t)
    finally:
      if trace_dir is not None:
        jax.profiler.stop_trace()
    ms = 1e3 * float(np.median(times))
    out[name] = {"runs": num_runs, "devices": devices,
                 "mesh": {"runs": program.runs_axis, "data": program.data_axis},
                 "phase": name, "step_ms": round(ms, 2),
                 "run_steps_per_s": round(num_runs / (ms / 1e3), 3),
                 "callbacks_per_step": (counter.calls - calls) / len(times),
                 "top_level_ops": ops, "compile_s": round(compile_s, 2),
                 "timed_steps": len(times), "timed_from": started, "timed_to": time.time(),
                 "loadavg": load_average()}
  return out


# -- the slot's figures ----------------------------------------------------------------------
def measure(counts: Sequence[int], smoke: bool, sampler: utilisation.GpuSampler,
            budget_end: float, log: Callable[[str], None], *,
            modules: Mapping[str, Any]) -> dict[str, Any]:
  """The slot's figures (module docstring) until ``budget_end`` (the first always), for each
  count of ``counts`` (runs per program); ``smoke``: the smoke variants, 2 steps.
  ``modules``: ``{name: config module}`` holding those of :data:`CONFIGS` (``get_config``), as
  `disentangle.reproduce.run.run_table` takes them (the library reads no experiment of its own)."""
  from disentangle.reproduce import run  # pylint: disable=g-import-not-at-top
  timing = TIMING[smoke]
  started = time.time()
  figures, skipped, configs = [], [], {}

  def keep_going():  # asked before each unit and each phase: until a figure, always
    return not figures or time.time() < budget_end
  with CallbackCounter() as counter:
    for runs, (name, variant), (solver, cascade_solver, overlapped, only) in itertools.product(
        counts, CONFIGS, SOLVERS):
      variant = f"{variant},smoke" if smoke else variant
      config = modules[name].get_config(variant)
      with config.unlocked():
        config.cascade.solver = cascade_solver
        config.assignment_placement = "overlapped" if overlapped else "step"
      # CascadeVAE's steps before t_d (t <= t_d) exist when t_d >= 1 (MNIST m10: t_d = 0).
      wanted = only or (("before", "after") if config.cascade.discrete_start > 0 else ("after",))
      where = dict(config=name, variant=variant, runs=runs, solver=solver)
      label = f"{name}:{variant} runs={runs} solver={solver}"
      configs.setdefault(f"{name}:{variant}", dict(
          model_summary(config), discrete_start=int(config.cascade.discrete_start)))
      if not keep_going():
        skipped += [dict(where, phase=p, reason="throughput budget spent") for p in wanted]
        continue
      sampler.label = label
      log(f"throughput: {label}")
      try:
        records = time_runs(config, runs, only=only, keep_going=keep_going, counter=counter,
                            **timing)
      except Exception as e:  # pylint: disable=broad-except
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        log(f"throughput: {label}: failed: {reason}")
        skipped += [dict(where, phase=p, reason=f"failed: {reason}") for p in wanted]
        continue
      for r in records.values():
        figure = dict(where, **r, **sampler.window(r["timed_from"], r["timed_to"]))
        figures.append(figure)
        log(f"throughput: {label} {r['phase']}: {r['run_steps_per_s']} run-steps/s, busy share "
            f"{figure['busy_share']}")
      skipped += [dict(where, phase=p, reason="throughput budget spent")
                  for p in wanted if p not in records]
  return {
      "device": run.device(), "jax_version": jax.__version__, "smoke": smoke,
      "runs": list(counts), "configs": configs, "timing": timing,
      "budget_until": datetime.datetime.fromtimestamp(budget_end).isoformat(timespec="seconds"),
      "spent_s": round(time.time() - started, 1),
      "figures": figures, "skipped": skipped, "solver_comparison": solver_comparison(figures),
      "environment": environment(), "data": DATA_NOTE,
      "notes": {
          "run_steps_per_s": "runs / median step time of the one program (steps blocked on)",
          "phase": "CascadeVAE before t_d (no discrete branch) and after it (the assignment "
                   "solved each step: 'scipy' on the host through a callback, 'hungarian' on "
                   "the device, 'scipy_overlapped' on the host beside the other group of runs' "
                   "device work, assignment_placement)",
          "busy_share": "mean nvidia-smi utilization.gpu / 100 over the timed steps (null: no "
                        "nvidia-smi or no sample in the span)",
          "timed_from": "time.time() span of the timed steps (utilisation.csv's time column)"},
  }


def solver_comparison(figures: Sequence[dict]) -> list[dict[str, Any]]:
  """Per config and run count after t_d: the other solvers' run-steps/s over the host's."""
  after = {(f["config"], f["runs"], f["solver"]): f for f in figures if f["phase"] == "after"}
  comparison = []
  for (name, runs, solver), f in after.items():
    if solver != "scipy":
      continue
    row = {"config": name, "runs": runs, "scipy_run_steps_per_s": f["run_steps_per_s"]}
    for other_name in ("hungarian", "scipy_overlapped"):
      other = after.get((name, runs, other_name))
      if other is not None:
        row[f"{other_name}_run_steps_per_s"] = other["run_steps_per_s"]
        row[f"{other_name}_over_scipy"] = round(other["run_steps_per_s"] / f["run_steps_per_s"],
                                                3)
    if len(row) > 3:
      comparison.append(row)
  return comparison
