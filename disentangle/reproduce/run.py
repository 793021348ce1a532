"""Train, evaluate and tabulate a table's programs in one workdir, resuming what is unfinished.

``<workdir>/reproduce.json`` records the table, the seeds, the budget fraction, the commands and
the wall time (written atomically); a workdir holding another table's runs, another fraction's
or another seed count's is refused in one line before anything starts (`check_workdir`). Each
program trains in ``<workdir>/runs/<name>`` through `trainer.train` with the entry points'
evaluator (`evaluator.factory`), unless its checkpoint is already at ``num_steps``; it is then
evaluated by `evaluate_run` on the table's metrics (``Table.evaluated``: its final checkpoint
and, where ``eval.select`` keeps one, the selected checkpoint), unless its ``results.json`` is
current; a run's other metrics are ``python -m experiments.evaluate --workdir=RUN``'s. After each
program ``table.json`` and ``table.md`` are rewritten (`render`), so an interrupted run leaves
the rows it finished.

One command at a time per workdir: `run_table` holds an exclusive lock (``fcntl.flock``) on
``<workdir>/reproduce.lock`` while it works; a second one is refused in one line (`plan.BadInput`).
Each program is trained under its own lock too, ``runs/<name>.lock``: `run_program` trains one
program alone (``--program=K``, a cluster's array task), beside the calls of the other programs
in the same workdir, writing only that program's folder, lock and record (``runs/<name>.json``);
the call that finds every program done writes the table (`render_table`).
The system releases the lock when the process ends, however it ends, so a killed command never
blocks the next.

A workdir may be a bucket URL (``gs://bucket/table``; `disentangle.paths`): records, tables and
pictures are whole-object writes (`disentangle.atomic`), the runs are the trainer's. The lock is
then an object, ``reproduce.lock`` holding ``<pid>@<host>``, created only if absent (the upload
carries the precondition ``ifGenerationMatch=0``, so of two commands racing to create it Cloud
Storage lets one win) and deleted when the command ends. No system releases it for a killed
command: the next command on the same host takes over the lock of a process that no longer runs;
on another host it is refused with the lock's URL, to delete once the holder is known to have
ended. (The tests' storage emulator does not implement preconditions, so there two commands
starting at the same instant are told apart only by the existence check before the upload.)

With a ``deadline`` the program in training stops at it with a checkpoint
(`preemption.DeadlineReached`), no evaluation that would end past it is started (its encoding
estimated from one timed batch and the set's size, plus the metrics' time of the command's last
evaluation: `evaluate_run.estimate_seconds`; not started either when the last evaluation's
whole time would not fit) and no program is started past it; the table of what is done is
written before the stop is raised.
"""
from __future__ import annotations

import contextlib
import datetime
import fcntl
import fractions
import json
import os
import pathlib
import socket
import time
from typing import Callable, Collection, Mapping, Optional

from disentangle import atomic
from disentangle import paths
from disentangle.reproduce import plan as plan_lib
from disentangle.reproduce import render
from disentangle.reproduce import study_figures

RECORD = "reproduce.json"
LOCK = "reproduce.lock"


@contextlib.contextmanager
def holding(workdir, name: str = LOCK, what: Optional[str] = None):
  """Hold the lock ``workdir/name`` (creating the folder); `plan.BadInput` when another process
  holds it. ``what``: the words for what is locked in that line (default: the workdir)."""
  workdir = paths.as_path(workdir)
  what = what or f"--workdir: {workdir}"
  if paths.is_remote(workdir):
    with _holding_object(workdir / name, what):
      yield
    return
  workdir.mkdir(parents=True, exist_ok=True)
  fd = os.open(workdir / name, os.O_RDWR | os.O_CREAT, 0o666)  # the umask applies, as open()
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
      raise plan_lib.BadInput(
          f"{what} is in use by another experiments.reproduce"
          f"{f' (process {holder})' if holder.isdigit() else ''}; wait for it to end or choose "
          "another --workdir") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    yield
  finally:
    os.close(fd)  # releases the lock


@contextlib.contextmanager
def _holding_object(lock, what: str):
  """`holding` on a bucket: the lock object (module docstring)."""
  fs, key = paths.filesystem(lock)
  me = f"{os.getpid()}@{socket.gethostname()}"

  def refuse(holder: str):
    pid, _, host = holder.partition("@")
    return plan_lib.BadInput(
        f"{what} is in use by another experiments.reproduce"
        f"{f' (process {pid} on {host})' if pid.isdigit() else ''}; wait for it to end or choose "
        f"another --workdir (if it has ended, delete {lock})")

  fs.invalidate_cache()
  if fs.exists(key):
    holder = fs.cat_file(key).decode(errors="replace").strip()
    pid, _, host = holder.partition("@")
    if not (host == socket.gethostname() and pid.isdigit() and not atomic.running(int(pid))):
      raise refuse(holder)
    fs.rm_file(key)  # left by a process of this host that no longer runs
  try:
    fs.pipe_file(key, me.encode(), mode="create")  # ifGenerationMatch=0: only if absent
  except FileExistsError:
    raise refuse(fs.cat_file(key).decode(errors="replace").strip()) from None
  try:
    yield
  finally:
    fs.invalidate_cache()
    if fs.exists(key) and fs.cat_file(key).decode(errors="replace").strip() == me:
      fs.rm_file(key)


def check_workdir(workdir, table: plan_lib.Table, *, seeds: int, fraction,
                  eval_points: int = 0) -> Optional[dict]:
  """The workdir's record (None for a new or empty workdir); `plan.BadInput` if it holds
  another table's, fraction's, seed count's or evaluation's (``eval_points``) runs, or is a
  non-empty folder without a record."""
  workdir = paths.as_path(workdir)
  path = workdir / RECORD
  if path.is_file():
    try:
      record = json.loads(path.read_text())
      their = (record["table"], fractions.Fraction(record["fraction"]), int(record["seeds"]))
    except (ValueError, KeyError, TypeError):
      raise plan_lib.BadInput(f"--workdir: {path} is not a readable record of this command") \
          from None
    if their[0] != table.name:
      raise plan_lib.BadInput(f"--workdir: {workdir} holds the runs of table {their[0]!r}, not "
                              f"{table.name!r}: choose another --workdir")
    if their[1] != fractions.Fraction(fraction):
      raise plan_lib.BadInput(f"--fraction: {workdir} holds runs at fraction {their[1]}, not "
                              f"{fractions.Fraction(fraction)}: use --fraction={their[1]} to "
                              f"resume, or another --workdir")
    if their[2] != seeds:
      raise plan_lib.BadInput(f"--seeds: {workdir} holds runs of {their[2]} seed(s), not {seeds}:"
                              f" use --seeds={their[2]} to resume, or another --workdir")
    theirs = int(record.get("eval_points", 0))
    if theirs != eval_points:
      raise plan_lib.BadInput(f"--eval_points: {workdir} holds runs evaluated with "
                              f"--eval_points={theirs}, not {eval_points}: use "
                              f"--eval_points={theirs} to resume, or another --workdir")
    return record
  if workdir.exists() and (not workdir.is_dir() or any(
      p.name != LOCK and not p.name.startswith(".") for p in workdir.iterdir())):
    raise plan_lib.BadInput(f"--workdir: {workdir} is not empty and holds no {RECORD}: not a "
                            f"workdir of this command; choose a new or empty folder")
  return None


def device() -> dict:
  """The device of this command's runs (`backend.describe`)."""
  from disentangle import backend  # pylint: disable=g-import-not-at-top
  return backend.describe()


def finished(directory: pathlib.Path, program: plan_lib.Program) -> bool:
  """The program's latest intact checkpoint is at ``num_steps`` (nothing left to train; a
  damaged one is trained again from the one before)."""
  from disentangle.train import checkpoint  # pylint: disable=g-import-not-at-top
  try:
    ckpt = checkpoint.Checkpointer(directory, read_only=True)
  except FileNotFoundError:
    return False
  try:
    return ckpt.latest_intact_step() == program.num_steps
  finally:
    ckpt.close()


def evaluated(directory: pathlib.Path, program: plan_lib.Program, table: plan_lib.Table) -> bool:
  """``results.json`` is of the final checkpoint, for every run, with the selected checkpoint
  where the table's protocol keeps one."""
  results = paths.read_json(directory / "results.json")
  if not results:
    return False
  per_run = results.get("seeds", [results])
  if results.get("checkpoint", {}).get("step") != program.num_steps or \
      len(per_run) != len(program.runs):
    return False
  return not table.selected or all(r.get("selected") is not None for r in per_run)


def load_records(workdir: pathlib.Path, programs) -> dict:
  """``{run_dir relative to the workdir: record}`` of the evaluated programs' runs."""
  from disentangle.evaluation import aggregate  # pylint: disable=g-import-not-at-top
  out = {}
  for p in programs:
    directory = workdir / p.directory
    if not (directory / "results.json").is_file():
      continue
    by_name = {pathlib.PurePosixPath(s.run_dir).name: s.run_dir for s in p.runs}
    for rec in aggregate.load_runs([directory]):
      run_dir = paths.as_path(rec["run_dir"])
      same = run_dir == directory if paths.is_remote(directory) else \
          run_dir.resolve() == directory.resolve()
      name = p.name if same else run_dir.name
      if name in by_name:
        out[by_name[name]] = rec
  return out


def write_table(workdir: pathlib.Path, table, programs, published, meta) -> dict:
  data = render.tabulate(table, programs, load_records(workdir, programs), published, meta)
  if any(r.model and r.hparam for r in table.rows):  # a study's rows: its pictures
    data["figures"] = [p.name for p in study_figures.write_figures(
        study_figures.records_of_table(data, table.rows), workdir, data["metrics"],
        hparams={r.model: r.hparam[0] for r in table.rows if r.model and r.hparam},
        titles=data["titles"], subtitle=_figure_subtitle(data))]
  atomic.write_text(workdir / "table.json", json.dumps(data, indent=1, default=str))
  atomic.write_text(workdir / "table.md", render.markdown(data))
  return data


def _figure_subtitle(data: dict) -> str:
  """The budget under a picture: data set, fraction, seeds, device."""
  f = fractions.Fraction(data.get("fraction", 1))
  device = data.get("device") or {}
  return (f"{data['table']}, " + ("whole schedule" if f == 1 else f"{f} of the schedule")
          + f", {data.get('seeds')} seed(s), {device.get('backend', '?')}"
          + ("" if all(line.get("comparable") is not False for line in data["lines"])
             else ", not comparable"))


def run_table(table: plan_lib.Table, workdir, modules: Mapping, *, scale: Callable,
              seeds: Optional[int] = None, fraction=1, command: str = "", dataset=None,
              evaluate_kwargs: Optional[dict] = None, log: Callable = print,
              deadline: Optional[float] = None, eval_points: int = 0,
              rows: Optional[Collection[int]] = None, dataset_source: str = "") -> dict:
  """Every program of ``table`` trained, evaluated and tabulated in ``workdir``; the table data.

  Args:
    table, modules, scale: as `plan.plan_table`.
    workdir: the command's folder (created; resumed when it holds this table's record).
    seeds: seeds per row (default: the table's, the paper's number).
    fraction: the share of every schedule.
    command: the command line, recorded.
    dataset: training and evaluation data instead of the configs' (tests; recorded by
      `evaluate_run` as an override, so the table says "not comparable").
    evaluate_kwargs: further arguments of `evaluate_run` (e.g. fewer votes in tests).
    log: progress lines.
    deadline: a `time.time()` at which the work stops (module docstring); None: none.
    eval_points: 0, or at most that many points per metric (`plan.shrink_evaluation`; its
      `evaluate_run` arguments under ``evaluate_kwargs``); recorded.
    rows: indices of ``table.rows``: only the programs holding one of them are trained and
      evaluated (a program trains its rows together); the table written still has every row,
      so the same workdir later completes the others. None: every program.
    dataset_source: as `plan.plan_table` ('render': the dSprites runs on the renderer).

  Raises:
    plan.BadInput: a bad seed count, fraction or workdir (nothing created), or a workdir in use.
    ConfigError, DataFileError, ...: as `trainer.train` (the finished programs stay).
    preemption.Preempted: a signal, or the deadline (`DeadlineReached`); the table is written.
  """
  workdir, seeds, fraction, eval_points, _, programs = _planned(  # before anything is created
      table, workdir, modules, scale=scale, seeds=seeds, fraction=fraction,
      eval_points=eval_points, dataset_source=dataset_source)
  evaluate_kwargs = {**plan_lib.evaluate_kwargs(eval_points, table.evaluated),
                     **(evaluate_kwargs or {})}
  with holding(workdir):
    return _run_programs(table, workdir, modules, programs, seeds=seeds, fraction=fraction,
                         command=command, dataset=dataset, evaluate_kwargs=evaluate_kwargs,
                         log=log, deadline=deadline, eval_points=eval_points, rows=rows)


def new_record(table: plan_lib.Table, *, seeds: int, fraction, eval_points: int) -> dict:
  """The workdir's record (``reproduce.json``) of a new workdir: the table, its settings, the
  commands and their wall time."""
  return {"table": table.name, "seeds": seeds, "fraction": str(fraction),
          "eval_points": eval_points, "created": datetime.datetime.now().isoformat(),
          "commands": [], "wall_s": 0.0}


def program_record(workdir: pathlib.Path, program: plan_lib.Program) -> pathlib.Path:
  """``runs/<name>.json``: the commands and wall time of the calls that ran ``program`` alone
  (`run_program`), its own file beside its folder."""
  return workdir / plan_lib.RUNS_DIR / f"{program.name}.json"


def _meta(workdir, programs, *, command: str, seeds: int, fraction, eval_points: int,
          record: dict) -> dict:
  """The table's facts besides its cells: the command, the budget, the device, the wall time
  (the whole-table commands' and every program call's)."""
  wall = float(record.get("wall_s", 0.0)) + sum(
      float(paths.read_json(program_record(workdir, p)).get("wall_s", 0.0)) for p in programs)
  return {"command": command, "seeds": seeds, "fraction": str(fraction), "device": device(),
          "eval_points": eval_points, "evaluation": plan_lib.evaluation_words(eval_points),
          "workdir": str(workdir), "wall_s": wall,
          "seed_values": sorted({s.seed for p in programs for s in p.runs})}


def done(workdir: pathlib.Path, program: plan_lib.Program, table: plan_lib.Table) -> bool:
  """The program is trained to its last step and evaluated there: nothing left to run."""
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  directory = workdir / program.directory
  return (finished(directory, program) and not (directory / trainer.PENDING_EVAL).exists()
          and evaluated(directory, program, table))


def _train_and_evaluate(table, workdir: pathlib.Path, p, head: str, which: str, *, dataset,
                        evaluate_kwargs, log: Callable, deadline: Optional[float], last: dict,
                        stop: Callable, save: Callable) -> None:
  """Program ``p`` trained unless finished and evaluated unless current, under its own lock
  (``runs/<name>.lock``: two commands never train one program at once). ``last``: the seconds
  of the last evaluation (``eval_s``, ``metric_s``; updated), to judge whether the next one
  fits before the deadline; ``stop(where, step)`` raises at the deadline; ``save()`` records
  what is done before a signal's stop is raised."""
  from disentangle.evaluation import evaluate_run  # pylint: disable=g-import-not-at-top
  from disentangle.evaluation import evaluator  # pylint: disable=g-import-not-at-top
  from disentangle.train import preemption  # pylint: disable=g-import-not-at-top
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  directory = workdir / p.directory
  with holding(workdir / plan_lib.RUNS_DIR, f"{p.name}.lock", f"--workdir: {which} of {workdir}"):
    if finished(directory, p) and not (directory / trainer.PENDING_EVAL).exists():
      log(f"{head}: trained")
    else:
      if deadline is not None and time.time() >= deadline:
        stop(f"before the training of {which}")
      log(f"{head}: training in {directory}")
      try:
        trainer.train(p.config, directory, dataset=dataset,  # validated by plan_table
                      evaluator_factory=evaluator.factory(p.config), deadline=deadline,
                      validated=True)
      except preemption.DeadlineReached as e:
        stop(f"in the training of {which} at step {e.step} of {p.num_steps} (checkpoint "
             f"{e.step} in {directory / 'checkpoints'})", e.step)
      except preemption.Preempted:
        save()
        raise
    if evaluated(directory, p, table):
      log(f"{head}: evaluated")
      return
    if deadline is not None and time.time() + last.get("eval_s", 0.0) > deadline:
      stop(f"before the evaluation of {which}")
    log(f"{head}: evaluating")
    began = time.perf_counter()
    try:
      result = evaluate_run.evaluate_run(directory, dataset=dataset, deadline=deadline,
                                         metric_s=last.get("metric_s", 0.0),
                                         **(evaluate_kwargs or {}))
    except preemption.DeadlineReached as e:
      log(f"{head}: {e}")
      stop(f"before the evaluation of {which} ({e})")
    last.update(eval_s=time.perf_counter() - began, metric_s=evaluate_run.metric_seconds(result))


def _run_programs(table, workdir: pathlib.Path, modules, programs, *, seeds: int, fraction,
                  command: str, dataset, evaluate_kwargs, log: Callable,
                  deadline: Optional[float], eval_points: int,
                  rows: Optional[Collection[int]] = None) -> dict:
  """`run_table`'s work, under the workdir's lock."""
  from disentangle.train import preemption  # pylint: disable=g-import-not-at-top
  record = check_workdir(workdir, table, seeds=seeds, fraction=fraction,  # under the lock
                         eval_points=eval_points)
  published = {i: plan_lib.published_of(r, modules) for i, r in enumerate(table.rows)}
  started = time.perf_counter()
  record = record or new_record(table, seeds=seeds, fraction=fraction, eval_points=eval_points)
  record["commands"].append(command)
  base_wall = float(record.get("wall_s", 0.0))

  def save():
    record["wall_s"] = base_wall + time.perf_counter() - started
    atomic.write_text(workdir / RECORD, json.dumps(record, indent=1))
    return write_table(workdir, table, programs, published, _meta(
        workdir, programs, command=command, seeds=seeds, fraction=fraction,
        eval_points=eval_points, record=record))

  def stop(where: str, step=None):
    save()
    raise preemption.DeadlineReached(
        f"stopped at the deadline {where}; {workdir / 'table.md'} holds what is done; the same "
        "command resumes", step)

  save()
  todo = [p for p in programs if rows is None or set(p.rows) & set(rows)]
  last = {}  # the last evaluation's total and metric seconds
  for k, p in enumerate(todo, 1):
    head = f"[{k}/{len(todo)}] {', '.join(p.args)} ({len(p.runs)} runs, {p.num_steps} steps)"
    _train_and_evaluate(table, workdir, p, head, f"program {k}/{len(todo)} ({p.name})",
                        dataset=dataset, evaluate_kwargs=evaluate_kwargs, log=log,
                        deadline=deadline, last=last, stop=stop, save=save)
    save()
  return save()


def _planned(table, workdir, modules, *, scale, seeds, fraction, eval_points, dataset_source):
  """(workdir path, seeds, fraction, eval_points, the record or None, the programs): the
  arguments parsed and the workdir checked before anything is created."""
  seeds = table.seeds if seeds is None else plan_lib.parse_seeds(seeds)
  fraction = plan_lib.parse_fraction(fraction)
  eval_points = plan_lib.parse_eval_points(eval_points)
  workdir = paths.as_path(workdir)
  record = check_workdir(workdir, table, seeds=seeds, fraction=fraction, eval_points=eval_points)
  programs = plan_lib.plan_table(table, modules, seeds=seeds, fraction=fraction, scale=scale,
                                 eval_points=eval_points,
                                 dataset_source=plan_lib.parse_dataset_source(dataset_source))
  return workdir, seeds, fraction, eval_points, record, programs


def program_of(programs, number) -> plan_lib.Program:
  """Program ``number`` of the plan, counted from 1 as the dry run prints them."""
  try:
    k = int(str(number).strip())
  except ValueError:
    k = 0
  if not 1 <= k <= len(programs):
    raise plan_lib.BadInput(f"--program: expected a program number from 1 to {len(programs)} "
                            f"(as --dry_run prints them), got {number!r}")
  return programs[k - 1]


def run_program(table: plan_lib.Table, workdir, modules: Mapping, number, *, scale: Callable,
                seeds: Optional[int] = None, fraction=1, command: str = "", dataset=None,
                evaluate_kwargs: Optional[dict] = None, log: Callable = print,
                deadline: Optional[float] = None, eval_points: int = 0,
                dataset_source: str = "") -> Optional[dict]:
  """Program ``number`` of ``table`` (from 1, the dry run's order) trained and evaluated alone
  in ``workdir``, which other calls of other programs may share; the table data once every
  program is done (the table is then written), else None.

  Each call writes its program's folder, its lock and its record (`program_record`) only, and
  the workdir's record (``reproduce.json``) where there is none yet; the call that finds every
  program done writes ``table.json`` and ``table.md`` (two calls ending together write the same
  table, each write whole). Arguments, raises: as `run_table`; ``--program`` out of range is a
  `plan.BadInput`.
  """
  from disentangle.train import preemption  # pylint: disable=g-import-not-at-top
  workdir, seeds, fraction, eval_points, record, programs = _planned(
      table, workdir, modules, scale=scale, seeds=seeds, fraction=fraction,
      eval_points=eval_points, dataset_source=dataset_source)
  p = program_of(programs, number)
  k = programs.index(p) + 1
  if record is None:
    atomic.write_text(workdir / RECORD, json.dumps(
        new_record(table, seeds=seeds, fraction=fraction, eval_points=eval_points), indent=1))
  path = program_record(workdir, p)
  mine = paths.read_json(path) or {"program": k, "name": p.name, "commands": [], "wall_s": 0.0}
  mine["commands"].append(command)
  base_wall, started = float(mine.get("wall_s", 0.0)), time.perf_counter()

  def save():
    mine["wall_s"] = base_wall + time.perf_counter() - started
    atomic.write_text(path, json.dumps(mine, indent=1))

  def stop(where: str, step=None):
    save()
    raise preemption.DeadlineReached(
        f"stopped at the deadline {where}; the same command resumes", step)

  head = f"[program {k}/{len(programs)}] {', '.join(p.args)} ({len(p.runs)} runs, " \
         f"{p.num_steps} steps)"
  _train_and_evaluate(table, workdir, p, head, f"program {k}/{len(programs)} ({p.name})",
                      dataset=dataset, evaluate_kwargs={
                          **plan_lib.evaluate_kwargs(eval_points, table.evaluated),
                          **(evaluate_kwargs or {})},
                      log=log, deadline=deadline, last={}, stop=stop, save=save)
  save()
  data, missing = render_table(table, workdir, modules, programs, seeds=seeds, fraction=fraction,
                               eval_points=eval_points, command=command)
  if missing:
    log(f"{len(programs) - len(missing)} of {len(programs)} programs done; the table is written "
        "by the call that ends the last one")
    return None
  return data


def render_table(table: plan_lib.Table, workdir, modules: Mapping, programs, *, seeds: int,
                 fraction, eval_points: int, command: str = "",
                 always: bool = False) -> tuple[Optional[dict], list[int]]:
  """(the table data, the numbers of the programs not done): ``table.json`` and ``table.md``
  written when every program is done, or ``always`` (the rows of what is done); nothing is
  trained. The data is None when nothing was written."""
  workdir = paths.as_path(workdir)
  missing = [k for k, p in enumerate(programs, 1) if not done(workdir, p, table)]
  if missing and not always:
    return None, missing
  published = {i: plan_lib.published_of(r, modules) for i, r in enumerate(table.rows)}
  record = paths.read_json(workdir / RECORD)
  return write_table(workdir, table, programs, published, _meta(
      workdir, programs, command=command, seeds=seeds, fraction=fraction,
      eval_points=eval_points, record=record)), missing
