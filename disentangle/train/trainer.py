"""The one trainer every method runs on.

``train(config, workdir)`` is :func:`setup`, :func:`loop` and :func:`close`. ``setup`` validates
the config, builds mesh, data and method (so that a bad config or a missing / corrupt data file
fails before anything is created on disk), then creates the run directories and resumes from
``<workdir>/checkpoints`` if a checkpoint exists. ``loop`` calls the compiled step of each step's
phase, built by :func:`phase_step` (its wrappers listed in order: the route from the loop to the
loss is drawn in `disentangle.train`). Metrics are read on
host only at log steps and handed to a writer thread (`writers.BackgroundWriter`), flushed and
synced before each checkpoint, at a stop and at the end; the evaluators run every
``eval_every`` steps, beside the training steps (``eval.background``,
`disentangle.train.background`: one evaluation in flight on a worker thread, reading copies of
that step's parameters; the eval points of every run encoded in one call on the device when the
factory offers ``runs_encoder``); checkpoints are started every ``checkpoint_every`` steps and
at the end and written atomically on orbax's threads (`checkpoint.Checkpointer`
``asynchronous``), each waited for before the next, at a stop and at the end. A non-finite loss
(or parameters, or a CascadeVAE step's assignment costs) ends the run with
:class:`NonFiniteError`, one line naming the step and the last good checkpoint, before anything
bad is saved or evaluated (`disentangle.train.nonfinite`: nothing read back between the steps
that log, evaluate or save). A signal
(`disentangle.train.preemption`) or
``deadline`` ends the loop at a step with a checkpoint, closed writers and `preemption.Preempted`
(`preemption.DeadlineReached`); an evaluation that would end past the deadline (as long as the
last one took; the first: its encoding estimated from one timed batch, `train.eval_duration`) is
not started and is owed to the resumed run (``eval_pending.json``). Any exception out of the loop closes the writers, the
selectors and the checkpointer too. What a user sees of this (stops, resumes, kills):
docs/reliability.md.

``config.num_seeds = N > 1`` and ``config.sweep`` train R runs (sweep points x seeds,
`disentangle.train.runs`) in one program over stacked parameters, optimiser states, rng and
per-run batches (`disentangle.train.seeds`: ``vmap`` on accelerators, unrolled copies on CPU,
``config.seed_layout``), laid out on a ``(runs, data)`` mesh; each run gets its own run directory
with its own config, metrics and images. A method with phases (CascadeVAE's discrete branch from
t_d on) gets one program per phase, switched on the host by the step number.

``eval.select`` other than ``'final'`` (`disentangle.train.selection`): after each evaluation
the checkpoint with the best ``eval.select_metric`` (held-out validation split, or the evaluated
data itself for ``'best_metric'``) is kept per run directory in ``<run_dir>/checkpoints_best``,
with its step and value; a resumed run compares against the kept value.

``workdir`` may be a bucket URL (``gs://bucket/run``): every file of the run goes through
`disentangle.paths` (config and JSON files as whole objects, `disentangle.atomic`; metrics lines
and TensorBoard, `writers`; checkpoints, `checkpoint`), and a run stopped or killed there resumes
as on a disk. Every process of a multi-process run reads and writes the same URL.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import pathlib
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from disentangle import atomic
from disentangle import backend
from disentangle import config as config_lib
from disentangle import data as data_lib
from disentangle import methods
from disentangle import paths
from disentangle.train import background as background_lib
from disentangle.train import checkpoint as checkpoint_lib
from disentangle.train import codes
from disentangle.train import device_data
from disentangle.train import host
from disentangle.train import input_pipeline
from disentangle.train import mesh as mesh_lib
from disentangle.train import nonfinite
from disentangle.train import preemption
from disentangle.train import profiling
from disentangle.train import runs as runs_lib
from disentangle.train import seeds
from disentangle.train import selection
from disentangle.train import writers

# The step whose evaluation is owed: deferred at the deadline, or in flight (`background`).
PENDING_EVAL = "eval_pending.json"
ENVIRONMENT = "environment.json"  # the backend of each start of the run (`record_environment`)
# Fields that may change between a run and its resumption.
RESUMABLE_FIELDS = ("num_steps", "log_every", "eval_every", "checkpoint_every", "keep_checkpoints",
                    "progress_bar", "eval.background", "assignment_placement", "dataset.data_dir",
                    "dataset.allow_download", "dataset.placement", "mesh.num_devices",
                    "mesh.runs", "mesh.data", "model.conv_impl", "cascade.unary_batching",
                    "distributed.initialize", "distributed.coordinator_address",
                    "distributed.num_processes", "distributed.process_id", "seed_layout",
                    "eval.max_points")


NonFiniteError = nonfinite.NonFiniteError  # what a NaN/Inf loss, state or cost raises


def check_config_matches(path: pathlib.Path, config) -> None:
  """On resume, the saved config must equal the new one except for ``RESUMABLE_FIELDS``; a field
  the saved config lacks (added to the schema since) counts only when set off its default."""
  saved = ml_collections.ConfigDict(json.loads(path.read_text()))
  old = dict(config_lib.flatten(config_lib.fill_missing(saved, methods.schema(config.method))))
  new = dict(config_lib.flatten(config))
  diff = sorted(k for k in set(old) | set(new)
                if k not in RESUMABLE_FIELDS and _norm(old.get(k)) != _norm(new.get(k)))
  if diff:
    details = ", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in diff[:6])
    raise config_lib.ConfigError(
        f"{path.parent} holds a run with a different config ({details}); use a new --workdir "
        f"or the same config to resume")


def record_environment(dirs: list[pathlib.Path], start: int, record: dict) -> None:
  """Append ``record`` (`backend.describe`) with the step this start begins at to each run's
  ``environment.json``; the starts of a resumed run after ``start`` (undone by the resume) are
  dropped, so the file lists the machines that computed the run's steps, in order."""
  for d in dirs:
    path = d / ENVIRONMENT
    starts = json.loads(path.read_text())["starts"] if path.exists() else []
    starts = [s for s in starts if s["step"] < start] + [{"step": start, **record}]
    atomic.write_text(path, json.dumps({"starts": starts}, indent=1))


def _norm(v):
  return list(v) if isinstance(v, tuple) else v


def load_training_data(config):
  """The training set ``dataset.name`` / ``dataset.train_split``; says which folder it reads.

  A dSprites-based set with ``dataset.source='auto'`` needs the official file unless the config
  takes stand-ins (``dataset.synthetic_if_missing``, set by the smoke variants): a paper run never
  trains on the procedural renderer by accident; without the file it stops here, before anything
  is compiled or written, in one line (`data.loading.require_official_dsprites`)."""
  d = config.dataset
  data_lib.check_split(d.name, d.train_split, "dataset.train_split")
  data_lib.check_variant_draw(d)
  root, origin = data_lib.data_dir_origin(d.data_dir)
  if jax.process_index() == 0:
    where = (f"TFDS {d.tfds_name or d.name} under {d.tfds_data_dir or '$TFDS_DATA_DIR'} "
             f"(dataset.tfds_data_dir)" if d.source == "tfds" else f"{root} ({origin})")
    print(f"data: {d.name} split={d.train_split!r} from {where}", flush=True)
  return data_lib.load_dataset(d.name, data_dir=root, split=d.train_split, source=d.source,
                               synthetic_if_missing=d.synthetic_if_missing,
                               allow_download=d.allow_download, **data_lib.tfds_kwargs(d),
                               unfair=data_lib.unfair_settings(d),
                               variant_draw=d.variant_draw,
                               render_if_missing=bool(d.synthetic_if_missing))


@dataclasses.dataclass
class Run:
  """What the loop works on, built by :func:`setup` (every check passed, the directories
  created, the state restored). Its config is the program's (:attr:`config`)."""
  workdir: pathlib.Path
  dirs: list                      # one directory per run (sweep point x seed)
  program: runs_lib.Program       # the runs on their mesh (shardings, the runs' step)
  method: Any                     # built from the whole config: its phases (`phase_step`)
  source: Any                     # the batches (their rows, with the set on the device)
  data: device_data.DeviceData | None  # the training set on the device, or None (the host's)
  state: Any                      # the runs' stacked train state, restored when resuming
  start: int                      # the first step to run
  ckpt: checkpoint_lib.Checkpointer
  metric_writers: list            # one `writers.BackgroundWriter` per run
  evaluators: list                # process 0's evaluators (none without a factory)
  selectors: list                 # the best-checkpoint keepers (eval.select)
  encoder: Callable | None        # every run's eval points encoded in one call, where offered
  evals: background_lib.Evaluations
  owed: int | None                # an evaluation owed at ``start`` (deferred or killed)
  is_main: bool

  @property
  def config(self) -> ml_collections.ConfigDict:
    """The whole config, its backend choices resolved (`config.resolve_run`)."""
    return self.program.config

  @property
  def multi(self) -> bool:
    """Whether the program trains several runs at once (more than one of ``dirs``)."""
    return len(self.dirs) > 1


def train(config, workdir, *, dataset=None, hooks: list[Callable] | None = None,
          evaluator_factory: Callable | None = None, deadline: float | None = None,
          validated: bool = False):
  """Train ``config`` in ``workdir`` (resuming if it holds a checkpoint). Returns the state.

  ``deadline``: a `time.time()` at which training stops with a checkpoint
  (`preemption.DeadlineReached`); None: none. ``validated``: the caller has run
  `methods.validate` on ``config`` (the entry point does, before it announces the run); else it
  is validated here, once: the modules below trust a validated config.
  """
  run = setup(config, workdir, dataset=dataset, evaluator_factory=evaluator_factory,
              validated=validated)
  hooks = [*(hooks or ()), *filter(None, [profiling.hook(config, workdir)])]
  state, stopped, stop, deferred = loop(run, hooks=hooks, deadline=deadline,
                                        evaluating=evaluator_factory is not None)
  if stopped is not None:
    close(run, stopped, stop, deferred)
  return state


def setup(config, workdir, *, dataset=None, evaluator_factory=None, validated=False) -> Run:
  """Checks ``config`` against the data and the devices, then creates the run directories and
  restores the last checkpoint: nothing is written before every check has passed. ``config`` is
  validated here unless the caller did (``validated``, `train`)."""
  if not validated:
    methods.validate(config)
  selection.check(config)
  if selection.rule(config) != "final" and evaluator_factory is None:
    raise config_lib.ConfigError(f"config field 'eval.select' ({selection.rule(config)!r}) "
                                 f"selects at eval steps: train with an evaluator_factory")
  mesh_lib.initialize_distributed(config.distributed)  # before anything asks JAX its backend
  requested, config = config, config_lib.resolve_run(config)  # every backend 'auto', once
  host.configure_malloc()
  workdir = paths.as_path(workdir)  # a local folder or a bucket URL
  is_main = jax.process_index() == 0
  cfgs = runs_lib.run_configs(config)  # ConfigError for a bad sweep, before anything is created
  dirs = runs_lib.run_dirs(config, workdir, cfgs)
  for d, cfg_i in zip(dirs, cfgs):  # a resumed run must have the same config (before any write)
    if (d / "config.json").exists():
      check_config_matches(d / "config.json", cfg_i)

  program = runs_lib.Program(config, cfgs)  # the mesh; ConfigError for an impossible one
  mesh, multi = program.mesh, len(cfgs) > 1
  dataset = dataset if dataset is not None else load_training_data(config)
  if is_main and hasattr(evaluator_factory, "load_data"):  # the evaluation split, checked too
    evaluator_factory.load_data()
  method = methods.build(config, dataset.image_shape, mesh=mesh)
  run_methods = [methods.build(c, dataset.image_shape, mesh=mesh) for c in cfgs] if multi \
      else [method]
  # The batch the method asks for; make_source checks its names against the data (ConfigError)
  # before anything compiles.
  spec = type(method).batch_spec(config)
  source = runs_lib.make_source(dataset, spec, config, cfgs,
                                program.batches if program.runs_axis > 1 else None)
  check_data = getattr(type(method), "check_data", None)  # e.g. label classes fit the variables
  if check_data is not None:
    check_data(config, dataset)
  # The set on the devices (dataset.placement): the source then yields the batches' rows only.
  source, on_device = device_data.prepare(config, dataset, spec, source, mesh)

  # Everything is valid: only now the run directories are created.
  for d, cfg_i in zip(dirs, program.cfgs):  # as the program decided them (the solve's placement)
    d.mkdir(parents=True, exist_ok=True)
    if is_main:
      atomic.write_text(d / "config.json", config_lib.to_json(config_lib.resolve_run(
          cfg_i, placement="device" if on_device is not None else "host"), requested=requested))
  if is_main and config.sweep:  # the runs in the checkpoint's order (evaluation)
    atomic.write_text(workdir / "runs.json", json.dumps(
        {"runs": [d.name for d in dirs], "sweep": config.sweep}, indent=1))

  state = methods.init_states_of(method, [c.seed for c in cfgs], out_shardings=program.states)
  # The loop only starts each save and hands each metrics line over (module docstring).
  ckpt = checkpoint_lib.Checkpointer(workdir, keep=config.keep_checkpoints, asynchronous=True)
  metric_writers = [writers.BackgroundWriter(writers.MetricWriter(d, enabled=is_main))
                    for d in dirs]
  if ckpt.latest_step() is not None:
    state = ckpt.restore(state)
    if is_main:
      print(f"resumed from {ckpt.directory} at step {int(_first(state.step))}", flush=True)
  start = int(_first(state.step))
  if is_main:  # the device line, and the warning of an unused accelerator, before the first step
    record_environment(dirs, start, backend.announce())
  # The evaluation owed at the restored step (`PENDING_EVAL`) is done again first.
  owed = None
  if is_main and (workdir / PENDING_EVAL).exists():
    owed = json.loads((workdir / PENDING_EVAL).read_text()).get("step")
    if owed != start or evaluator_factory is None:
      owed = None
      (workdir / PENDING_EVAL).unlink()
  for w in metric_writers:  # lines past the checkpoint (all, without one) are logged again
    w.truncate_after(start, evaluated=owed)

  evaluators = []
  if evaluator_factory is not None and is_main:  # evaluation runs on process 0, on a host copy
    evaluators = [evaluator_factory(m, d, i) for i, (m, d) in enumerate(zip(run_methods, dirs))]
  selectors = []  # the kept best checkpoint of each run dir (eval.select), process 0
  if evaluators and selection.rule(config) != "final":
    selectors = [selection.Selector(cfg_i, d) for d, cfg_i in zip(dirs, cfgs)]
  runs_encoder = getattr(evaluator_factory, "runs_encoder", None)
  encoder = runs_encoder(evaluators) if evaluators and runs_encoder is not None else None
  evals = background_lib.Evaluations(bool(evaluators) and background(config),
                                     workdir / PENDING_EVAL if evaluators else None)
  return Run(workdir=workdir, dirs=dirs, program=program, method=method,
             source=source, data=on_device, state=state, start=start, ckpt=ckpt,
             metric_writers=metric_writers, evaluators=evaluators, selectors=selectors,
             encoder=encoder, evals=evals, owed=owed, is_main=is_main)


def phase_step(program: runs_lib.Program, method, phase,
               data: device_data.DeviceData | None = None) -> tuple[Callable, tuple]:
  """The compiled step of ``phase`` (``method.phase(step)``) and what it takes after
  ``(state, batch)``: ``train_step(state, batch, *rest) -> (state, metrics)``.

  Its wrappers, in the order they apply to a batch:

  1. device data (``data``, `device_data.DeviceData.compose`): the step receives the batch's
     rows, takes the placed set in ``rest`` and gathers the batch on the device first;
  2. the overlapped solve (``assignment_placement`` as `codes.placement` decided it): the runs
     in two groups, each step four programs around the host's solves (`codes.overlapped`);
  3. jit and shardings (`host.jit`): the state donated, states and batches laid out on the
     program's mesh, the metrics replicated;
  4. the runs (`runs.Program.runs_step`): several runs over the leading axis (``vmap`` or
     unrolled, `shard_map` on a runs axis), taking their swept values in ``rest``; one run: none;
  5. the method's step (`codes.step`): where the phase has discrete codes, the method's costs,
     the assignment and its update given the codes; else ``method.for_phase(phase).train_step``
     (`methods.base.VAEMethod`: ``step_key``, ``gradients`` of ``loss``, ``apply_update``).
  """
  config, image_shape = program.config, method.image_shape
  multi = len(program.cfgs) > 1
  rest, shardings = ((program.values(),), (program.states,)) if multi else ((), ())
  gathered = lambda step: step
  if data is not None:  # 1.
    rest, shardings = (data.placed,) + rest, (program.repl,) + shardings
    gathered = lambda step: data.compose(step, program.batches)
  ins = (program.states, program.batches) + shardings
  if codes.overlaps(config, method, phase):  # 2., each group's programs through 3. to 5.
    compile_costs = lambda costs: host.jit(gathered(costs), config, in_shardings=ins)
    compile_update = lambda update: host.jit(
        gathered(update), config, donate_argnums=0, in_shardings=ins + (None, program.repl),
        out_shardings=(program.states, program.repl))
    return codes.overlapped(program.runs(image_shape, phase), rest[-1], compile_costs,
                            compile_update), rest
  step = program.runs_step(image_shape, phase)  # 4. and 5.
  return host.jit(gathered(step), config, donate_argnums=0, in_shardings=ins,  # 3.
                  out_shardings=(program.states, program.repl)), rest


def loop(run: Run, *, hooks, deadline, evaluating: bool):
  """The training steps from ``run.start``: log, evaluate and save at their steps; stop after a
  step at a signal or the deadline. Returns ``(state, stopped step or None, the signals'
  `preemption.Signals`, whether the stopping step's evaluation was deferred)``."""
  config, ckpt, evals, multi = run.config, run.ckpt, run.evals, run.multi
  evaluators, selectors, metric_writers = run.evaluators, run.selectors, run.metric_writers
  # NaN/Inf: the losses read at the steps that read the device anyway, the state before it is
  # saved or evaluated, the host solves' costs (`nonfinite`).
  watch = nonfinite.Watch([d.name for d in run.dirs] if multi else None, ckpt.last_good_step,
                          ckpt.directory, run.program.repl)
  pending = run.workdir / PENDING_EVAL
  bar = _progress(config, run.start, run.is_main)
  last_time, last_step = time.perf_counter(), run.start
  # The device transfer runs on the prefetch thread and is waited for there: the step is
  # dispatched on ready inputs (a copy still pending costs XLA:CPU more CPU a step: `benchmarks.loop`,
  # benchmarks/HISTORY.md, "The training loop against the bare step").
  to_device = lambda local: jax.block_until_ready(
      _global_batch(local, run.program.batches, len(run.dirs), config.batch_size))
  stopped, deferred, state = None, False, run.state
  steps = {}  # phase -> (its compiled step, what it takes after (state, batch)), built at first use

  def evaluate(done, state) -> None:
    """Hands over every run's evaluation at step ``done`` (process 0): in the background it
    reads a copy on the device of the parameters (of the state, for the selectors) of ``done``,
    which the next step's donation leaves intact."""
    kept = state if selectors else state.params
    kept = _device_copy(kept) if evals.background else kept

    def job():
      params_dev = kept.params if selectors else kept
      reps = run.encoder(_on_first_device(params_dev)) if run.encoder is not None else None
      params = _local_copy(params_dev)
      for i, ev in enumerate(evaluators):
        params_i = seeds.take(params, i) if multi else params
        result = ev.run(params_i, done) if reps is None else ev.run(params_i, done, rep=reps[i])
        metric_writers[i].write_now(done, result)
        if selectors:
          selectors[i].offer(done, result, lambda i=i: _seed_state(kept, i, multi),
                             num_points=len(getattr(ev, "indices", ())) or None)

    evals.submit(done, job)

  # SIGTERM / SIGINT / the deadline: stop after a step. The bar is closed on any exit, so that an
  # error's message starts its own line; the writers, selectors and checkpointer too.
  with _closed_on_exit([evals, *metric_writers], selectors, ckpt), \
      preemption.Signals(run.start, deadline) as stop, _closing(bar), watch.solves():
    if run.is_main and run.owed == run.start:  # deferred at the deadline or killed: first
      evaluate(run.start, state)
    for step, batch in input_pipeline.prefetch(run.source, run.start, config.num_steps,
                                               transfer=to_device):
      phase = run.method.phase(step)  # decided on the host: no predicate read back
      if phase not in steps:
        steps[phase] = phase_step(run.program, run.method, phase, run.data)
      train_step, rest = steps[phase]
      state, metrics = train_step(state, batch, *rest)
      done = step + 1
      watch.add(done, metrics["loss"])
      if bar is not None:
        bar.update(1)
      is_last = done == config.num_steps
      log_now = done % config.log_every == 0 or is_last
      save_now = done % config.checkpoint_every == 0 or is_last
      eval_now = evaluating and (done % config.eval_every == 0 or is_last)
      if log_now or save_now or eval_now or watch.due:
        watch.check_losses(done)
      if log_now or save_now:
        m = jax.device_get(metrics)
        losses = np.atleast_1d(m["loss"])
        now = time.perf_counter()
        rate = (done - last_step) / max(now - last_time, 1e-9)
        last_time, last_step = now, done
        for i, w in enumerate(metric_writers):  # after the evaluation in flight
          mi = seeds.take(m, i) if multi else m
          evals.write(w, done, dict(mi, steps_per_sec=rate))
        if bar is not None:
          bar.set_postfix(loss=f"{float(losses.mean()):.2f}")
      evals.poll()  # an evaluation's error stops the loop here
      if eval_now:
        evals.wait()
        expected = evals.expected_seconds(lambda: _first_evaluation(evaluators, state, multi)) \
            if stop.deadline is not None and evaluators else evals.seconds
        deferred = stop.too_late(expected)  # it would end past the deadline: stop here
        if deferred and run.is_main:
          print(f"the evaluation of step {done} would take {expected:.0f} s"
                f"{'' if evals.finished else ' (estimated)'}, past the deadline: not started; "
                "the resumed run evaluates it first", flush=True)
          atomic.write_text(pending, json.dumps({"step": done}))
        elif evaluators:
          watch.check_state(done, state, "evaluated")
          evaluate(done, state)
      for hook in hooks:
        hook(state, done)
      # A signal or the deadline: this step's checkpoint, stop.
      stopping = deferred or (not is_last and stop.stop_at(done))
      if save_now or stopping:
        evals.wait_before_checkpoint(done)
        watch.check_losses(done)  # a stop between the steps that check
        watch.check_state(done, state, "saved")
        for w in metric_writers:  # the lines of the steps it holds durable before it starts
          w.flush()
        ckpt.save(done, state)
      if stopping:
        stopped = done
        break
    evals.wait()
    ckpt.wait()  # the last save complete before the run stops or returns
  return state, stopped, stop, deferred


def close(run: Run, stopped: int, stop, deferred: bool) -> None:
  """Raises what ended a loop stopped early: `preemption.DeadlineReached` at the deadline,
  `preemption.Preempted` at a signal (the checkpoint of ``stopped`` is written)."""
  where = f"at step {stopped} of {run.config.num_steps}, checkpoint {stopped} in " \
          f"{run.ckpt.directory}"
  if stop.at_deadline:
    later = " (its evaluation runs first when resumed)" if deferred else ""
    raise preemption.DeadlineReached(
        f"stopped at the deadline {where}{later}; the same command resumes", stopped)
  raise preemption.Preempted(f"stopped by {stop.name} {where}; the same command resumes",
                             stopped, stop.received)


def _first_evaluation(evaluators, state, multi: bool) -> float:
  """Seconds the first evaluation should take (`duration.of_evaluators`, its encoding; 0 when
  unknown), from one batch encoded with the parameters of ``state``."""
  from disentangle.train import eval_duration as duration  # pylint: disable=g-import-not-at-top
  params = _local_copy(_on_first_device(state.params))
  estimate = duration.of_evaluators(
      evaluators, params, lambda p, i: seeds.take(p, i) if multi else p)
  return 0.0 if estimate is None else estimate.seconds


def background(config) -> bool:
  """``config.eval.background``: evaluation on a worker thread beside the training steps."""
  return bool(config.eval.background)


def _device_copy(tree):
  """A copy on the device of this process's part of ``tree`` (`_on_first_device`), made by one
  dispatched program: the donation of ``tree`` to the next step leaves it intact."""
  return _copy(_on_first_device(tree))


_copy = jax.jit(lambda tree: jax.tree_util.tree_map(jnp.copy, tree))


def _on_first_device(tree):
  """``tree`` on this process's first device: the first replica of replicated arrays, the whole
  of arrays this process holds (runs spread over its devices), as `_local_copy` reads them."""
  first = jax.local_devices()[0]

  def local(a):
    if a.is_fully_replicated:
      return a.addressable_data(0)
    if a.is_fully_addressable:
      return jax.device_put(a, first)
    raise ValueError("runs spread over several processes are evaluated after training "
                     "(python -m experiments.evaluate), not at eval steps")
  return jax.tree_util.tree_map(local, tree)


def _seed_state(state, i: int, multi: bool):
  """Host copy of seed ``i``'s state (the plain state of a single-seed run)."""
  host_state = _local_copy(state)
  return seeds.take(host_state, i) if multi else host_state


def _local_copy(tree):
  """Host numpy copy: of replicated arrays (also across processes) or of arrays this process
  holds whole (runs spread over its devices)."""
  def copy(a):
    if a.is_fully_replicated:
      return np.asarray(a.addressable_data(0))
    if a.is_fully_addressable:
      return np.asarray(a)
    raise ValueError("runs spread over several processes are evaluated after training "
                     "(python -m experiments.evaluate), not at eval steps")
  return jax.tree_util.tree_map(copy, tree)


def _global_batch(local: dict, sharding, num_runs: int, batch_size: int) -> dict:
  """Global arrays from this process's block (``[runs, rows, ...]`` or ``[rows, ...]``)."""
  if num_runs == 1 or sharding.spec[0] is None:
    return mesh_lib.global_batch(sharding.mesh, local, 1 if num_runs > 1 else 0)
  return {k: jax.make_array_from_process_local_data(
      sharding, np.asarray(v), global_shape=(num_runs, batch_size) + np.shape(v)[2:])
          for k, v in local.items()}


def _first(x):
  """The first element of ``x`` (of this process's first shard when runs span processes)."""
  if isinstance(x, jax.Array) and not x.is_fully_addressable:
    x = x.addressable_data(0)
  return np.asarray(jax.device_get(x)).reshape(-1)[0]


def _closing(bar):
  return contextlib.nullcontext() if bar is None else contextlib.closing(bar)


@contextlib.contextmanager
def _closed_on_exit(metric_writers, selectors, ckpt):
  """Close the writers, the selectors and the checkpointer (which waits for a save in flight)
  on any exit. Each is closed even when another fails; a failure to close is raised after a
  normal exit and dropped behind an exception already on its way (which says what went wrong)."""
  things = [*metric_writers, *selectors, ckpt]
  try:
    yield
  except BaseException:
    _close_all(things)
    raise
  error = _close_all(things)
  if error is not None:
    raise error


def _close_all(things) -> Exception | None:
  """Close each of ``things``; the first exception raised, if any."""
  first = None
  for thing in things:
    try:
      thing.close()
    except Exception as e:  # pylint: disable=broad-except
      first = first or e
  return first


def _progress(config, start, enabled):
  if not (enabled and config.progress_bar):
    return None
  from tqdm import auto as tqdm  # pylint: disable=g-import-not-at-top
  return tqdm.tqdm(total=config.num_steps, initial=start, unit="step", dynamic_ncols=True,
                   smoothing=0.05, desc=config.method)
