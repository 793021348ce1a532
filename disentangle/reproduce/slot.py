"""Spend a short GPU slot: throughput figures first, then paper tables up to the slot's end.

The command is ``python -m experiments.slot`` (its flags: `experiments.slot`); this module is its
logic: `parse_slot` checks the input, `run_slot` spends the slot.

1. Throughput (`disentangle.reproduce.throughput.measure` of the configs in ``modules``;
   skipped when ``DIR/throughput.json`` exists, unless ``--redo_throughput``): for dSprites
   CascadeVAE ``m6`` and MNIST ``m10`` (``--smoke``: their ``smoke`` variants, 1-2 runs), N
   runs in one program for each N of ``--runs``, before and after t_d, with the host solver, and
   after t_d with ``cascade.solver='hungarian'`` and with the host's solves overlapped
   (``assignment_placement='overlapped'``): run-steps/s and the device's busy share (nvidia-smi,
   sampled in a background thread, `disentangle.reproduce.utilisation`; null without it), the
   counts in the order given. Budget: ``--throughput_minutes`` (default 15% of the slot, at most
   5 minutes); the first figure is always measured, what would start past it is listed as skipped.
2. The queue (``DEFAULT_QUEUE``: the papers' claims first, CascadeVAE's rows, Table 1's ``m6``
   then Table 3's and Table 1's ``m4``, then the rest of Tables 1 and 3, the baselines), each
   entry through `disentangle.reproduce.run.run_table` in
   ``W/tables/<table>-s<seeds>-f<fraction>`` with the deadline at the slot's end minus a margin
   (10% of the slot, at most 3 minutes): the program in training stops there with a checkpoint
   and no evaluation that cannot finish starts. ``TABLE/ROWS`` queues only some rows of a table
   (``ROWS``: ``CONFIG`` or ``CONFIG.VARIANT`` joined by ``+``, e.g.
   ``cascadevae_table1/dsprites_cascade.m6``, the row of config ``dsprites_cascade`` whose
   variant starts with ``m6``); they share the table's folder, so a later entry of the whole
   table trains only the other rows. Without the official dSprites file a dSprites table fails
   in one line (`disentangle.data.loading.require_official_dsprites`) and the queue goes on;
   ``--dataset_source=render`` trains its runs on the procedural renderer on purpose
   (`plan.with_dataset_source`: scores marked not comparable).
3. ``DIR`` holds a compact summary, rewritten atomically after the throughput, after each table
   and at the end: ``throughput.json``, ``utilisation.csv`` (the nvidia-smi samples, where they
   exist), ``table.json`` / ``table.md`` (every queued table), ``log_tail.txt`` and ``slot.json``
   (the command, the seeds, the budget, the device, the jax version, start and end, what
   finished, the earlier calls).

The same command again continues: the throughput is kept, every table resumes from ``W`` (default
``<DIR>_workdir`` beside ``DIR``, so that ``DIR`` stays small), and the persistent compilation
cache in ``W/jax_cache`` spares most compilations of the first call. One command at a time per
``W`` (the lock of `disentangle.reproduce.run.holding`). ``--out`` and ``--slot_workdir`` may be
bucket URLs (``gs://bucket/slot``; `disentangle.paths`): every file is then a whole-object write,
``slot.log`` rewritten whole at each line. Exit status: 0 when the queue is done,
124 when the deadline stopped it, 143 / 130 on SIGTERM / SIGINT, 2 on bad input (one line naming
the flag, nothing created) or when a table failed (its line is in the log; the queue went on).
"""
from __future__ import annotations

import collections
import dataclasses
import datetime
import fractions
import functools
import json
import math
import os
import pathlib
import sys
import tempfile
import time
from typing import Any, Callable, Mapping, Optional

from disentangle import atomic
from disentangle import paths
from disentangle.reproduce import utilisation

# CascadeVAE's rows (the papers' claims) before the baselines and ablations of the same tables.
DEFAULT_QUEUE = ("cascadevae_table1/dsprites_cascade.m6,cascadevae_table3/mnist_cascade,"
                 "cascadevae_table1/dsprites_cascade.m4,cascadevae_table1,cascadevae_table3")
THROUGHPUT_SHARE, THROUGHPUT_MAX_S = 0.15, 300.0
MARGIN_SHARE, MARGIN_MAX_S = 0.10, 180.0
LOG_TAIL_LINES = 300
CACHE = "jax_cache"
RUNS, SMOKE_RUNS = (1, 10, 20, 40), (1, 2)  # runs per program of the throughput figures


# ---------------------------------------------------------------------------------------------
# Input.
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Entry:
  """A queued table with its seeds and budget fraction, or some of its rows (``select``, the
  queue's words for them; ``rows``: their indices in ``table.rows``)."""
  table: Any  # plan.Table
  seeds: int
  fraction: fractions.Fraction
  select: str = ""
  rows: Optional[tuple[int, ...]] = None

  @property
  def spec(self) -> str:
    select = f"/{self.select}" if self.select else ""
    return f"{self.table.name}{select}:{self.seeds}:{self.fraction}"

  @property
  def directory(self) -> str:
    """Its folder under ``W/tables``: one per table, seed count and fraction."""
    return f"{self.table.name}-s{self.seeds}-f{str(self.fraction).replace('/', '_')}"


@dataclasses.dataclass(frozen=True)
class Slot:
  """The command's parsed input."""
  minutes: float
  out: pathlib.Path
  workdir: pathlib.Path
  queue: tuple[Entry, ...]
  smoke: bool = False
  redo_throughput: bool = False
  runs: tuple[int, ...] = RUNS
  command: str = ""
  throughput_minutes: Optional[float] = None  # None: THROUGHPUT_SHARE of the slot, at most MAX
  dataset_source: str = ""  # 'render': the dSprites runs on the renderer (plan.DATASET_SOURCES)

  def throughput_s(self) -> float:
    """Seconds of the throughput figures."""
    if self.throughput_minutes is not None:
      return 60.0 * self.throughput_minutes
    return min(THROUGHPUT_MAX_S, THROUGHPUT_SHARE * 60.0 * self.minutes)

  def table_dir(self, entry: Entry) -> pathlib.Path:
    return self.workdir / "tables" / entry.directory


def row_key(row) -> str:
  """``config.variant`` of a table row (the first word of its variant), as ``--queue`` names it."""
  variant = row.variant.split(",")[0]
  return f"{row.config}.{variant}" if variant else str(row.config)


def select_rows(table, select: str) -> tuple[int, ...]:
  """Indices of ``table.rows`` named by ``select`` (``config[.variant]`` joined by ``+``), in the
  table's order; `plan.BadInput` for a word that names no row."""
  from disentangle.reproduce import plan  # pylint: disable=g-import-not-at-top
  chosen = set()
  for word in select.split("+"):
    found = {i for i, r in enumerate(table.rows) if r.config is not None and
             (word == r.config or word == row_key(r))}
    if not found:
      keys = ", ".join(row_key(r) for r in table.rows if r.config is not None)
      raise plan.BadInput(f"--queue: {table.name} has no row {word!r}; its rows: {keys}")
    chosen |= found
  return tuple(sorted(chosen))


def parse_queue(text: str, tables: Mapping) -> tuple[Entry, ...]:
  """``table[/rows][:seeds[:fraction]],...`` (seeds default: the table's); `plan.BadInput`
  naming ``--queue`` otherwise."""
  from disentangle.reproduce import plan  # pylint: disable=g-import-not-at-top
  entries = []
  for part in filter(None, (p.strip() for p in str(text).split(","))):
    fields = part.split(":")
    name, _, select = fields[0].partition("/")
    if len(fields) > 3 or not name or (fields[0].endswith("/") and not select):
      raise plan.BadInput(f"--queue: {part!r} is not table[/rows][:seeds[:fraction]]")
    if name not in tables:
      raise plan.BadInput(f"--queue: unknown table {name!r}; known tables: "
                          f"{', '.join(tables)}")
    table = tables[name]
    try:
      seeds = plan.parse_seeds(fields[1]) if len(fields) > 1 and fields[1] else table.seeds
      fraction = plan.parse_fraction(fields[2] if len(fields) > 2 and fields[2] else 1)
    except plan.BadInput as e:
      raise plan.BadInput(f"--queue: {part!r}: {str(e).removeprefix('--')}") from None
    entry = Entry(table, seeds, fraction, select,
                  select_rows(table, select) if select else None)
    if any(e.directory == entry.directory and e.rows == entry.rows for e in entries):
      raise plan.BadInput(f"--queue: {entry.spec} is queued twice")
    entries.append(entry)
  return tuple(entries)


def check_writable(flag: str, path: pathlib.Path) -> None:
  """`plan.BadInput` naming ``flag`` unless ``path`` is a folder, or can be made one, that this
  process can write in; creates nothing (the probe is an unnamed temporary file)."""
  from disentangle.reproduce import plan  # pylint: disable=g-import-not-at-top
  if paths.is_remote(path):  # a bucket has no folders to probe: its first write says
    return
  if path.exists() and not path.is_dir():
    raise plan.BadInput(f"{flag}: {path} exists and is not a folder")
  ancestor = path
  while not ancestor.exists():
    ancestor = ancestor.parent
  if not ancestor.is_dir():
    raise plan.BadInput(f"{flag}: cannot create {path}: {ancestor} is not a folder")
  try:
    with tempfile.TemporaryFile(dir=ancestor):
      pass
  except OSError as e:
    raise plan.BadInput(f"{flag}: {path} is not writable: {e.strerror or e}") from None


def _absolute(path):
  """A local path made absolute; a URL as it is."""
  return paths.as_path(path) if paths.is_remote(path) else pathlib.Path(os.path.abspath(path))


def parse_slot(*, minutes, out, workdir=None, queue: str = DEFAULT_QUEUE, runs=None,
               smoke: bool = False, redo_throughput: bool = False, command: str = "",
               throughput_minutes=None, dataset_source=None, tables: Mapping) -> Slot:
  """The command's input checked, nothing created; `plan.BadInput` naming the flag otherwise.

  ``tables``: the known tables by name (the command's: `experiments.tables.TABLES`).
  ``dataset_source``: ``--dataset_source`` (`plan.parse_dataset_source`): 'render' trains every
  queued run on dSprites (or a set drawn from it) on the procedural renderer.
  """
  from disentangle.reproduce import plan  # pylint: disable=g-import-not-at-top
  from disentangle.reproduce import run  # pylint: disable=g-import-not-at-top
  if minutes is None:
    raise plan.BadInput("--minutes: required (the length of the slot)")
  try:
    length = float(minutes)
  except (TypeError, ValueError):
    length = math.nan
  if not (math.isfinite(length) and length > 0):
    raise plan.BadInput(f"--minutes: must be a positive number of minutes, got {minutes!r}")
  share = None
  if throughput_minutes is not None:
    try:
      share = float(throughput_minutes)
    except (TypeError, ValueError):
      share = math.nan
    if not (math.isfinite(share) and 0 <= share < length):
      raise plan.BadInput(f"--throughput_minutes: a number of minutes from 0 to under --minutes "
                          f"({length:g}), got {throughput_minutes!r}")
  if not out:
    raise plan.BadInput("--out: required (the folder of the summary)")
  out = _absolute(out)
  check_writable("--out", out)
  workdir = _absolute(workdir) if workdir else out.parent / f"{out.name}_workdir"
  if workdir == out or out in workdir.parents:
    raise plan.BadInput(f"--slot_workdir: {workdir} is inside --out; the summary folder stays "
                        "small")
  check_writable("--slot_workdir", workdir)
  try:
    counts = tuple(int(r) for r in (runs or (SMOKE_RUNS if smoke else RUNS)))
  except ValueError:
    counts = ()
  if not counts or min(counts) < 1:
    raise plan.BadInput(f"--runs: whole numbers >= 1 separated by commas, got {runs!r}")
  entries = parse_queue(queue, tables)
  slot = Slot(length, out, workdir, entries, smoke, redo_throughput, counts, command, share,
              plan.parse_dataset_source(dataset_source))
  for entry in entries:  # a folder of something else is refused before anything starts
    run.check_workdir(slot.table_dir(entry), entry.table, seeds=entry.seeds,
                      fraction=entry.fraction)
  return slot


# ---------------------------------------------------------------------------------------------
# Log and summary.
# ---------------------------------------------------------------------------------------------
class Log:
  """Progress lines: printed, and appended to ``W/slot.log`` (its tail goes to ``DIR``)."""

  def __init__(self, path):
    self.path = path
    self._text = None  # on a bucket: the object's text (appending = rewriting it whole)

  def __call__(self, line: str) -> None:
    stamped = f"[{datetime.datetime.now():%Y-%m-%d %H:%M:%S}] {line}"
    print(stamped, flush=True)
    if paths.is_remote(self.path):
      if self._text is None:
        self._text = self.path.read_text() if self.path.exists() else ""
      self._text += stamped.replace("\n", " ") + "\n"
      atomic.write_text(self.path, self._text)
      return
    self.path.parent.mkdir(parents=True, exist_ok=True)
    with open(self.path, "a", encoding="utf-8") as f:
      f.write(stamped.replace("\n", " ") + "\n")

  def tail(self, lines: int = LOG_TAIL_LINES) -> str:
    if not self.path.is_file():
      return ""
    with self.path.open(encoding="utf-8", errors="replace") as f:
      return "".join(line[:2000] for line in collections.deque(f, maxlen=lines))


def progress(data: Optional[dict]) -> dict[str, int]:
  """How many of a table's lines (with a config) are evaluated, partial, pending."""
  lines = [l for l in (data or {}).get("lines", []) if l.get("status") != "no config"]
  counts = collections.Counter(l.get("status") for l in lines)
  return {"lines": len(lines), "evaluated": counts["evaluated"], "partial": counts["partial"],
          "pending": len(lines) - counts["evaluated"] - counts["partial"]}


def _iso(t: float) -> str:
  return datetime.datetime.fromtimestamp(t).isoformat(timespec="seconds")


def write_summary(slot: Slot, call: dict, status: Mapping[str, dict],
                  sampler: utilisation.GpuSampler, log: Log) -> None:
  """The files of ``DIR`` (module docstring), each written atomically."""
  tables, text = [], [f"# Tables of `{slot.command or 'experiments.slot'}`\n"]
  shown = set()  # entries of some rows share their table's folder: its table.md once
  for entry in slot.queue:
    folder = slot.table_dir(entry)
    data = paths.read_json(folder / "table.json") or None
    state = status.get(entry.spec, {"status": "not started in this call"})
    tables.append(dict(queue=entry.spec, workdir=str(folder), **state, table=data))
    text.append(f"## {entry.spec}: {state['status']}\n")
    if (folder / "table.md").is_file() and folder not in shown:
      text.append((folder / "table.md").read_text())
    shown.add(folder)
  atomic.write_text(slot.out / "table.json", json.dumps({"tables": tables}, indent=1, default=str))
  atomic.write_text(slot.out / "table.md", "\n".join(text))
  call["end"] = _iso(time.time())
  call["queue"] = [dict(table=e.table.name, rows=e.select, seeds=e.seeds,
                        fraction=str(e.fraction), **status.get(e.spec, {}))
                   for e in slot.queue]
  cache = slot.workdir / CACHE
  call["compilation_cache"]["entries_at_end"] = \
      sum(1 for _ in cache.iterdir()) if cache.is_dir() else 0
  atomic.write_text(slot.out / "slot.json", json.dumps(call, indent=1, default=str))
  atomic.write_text(slot.out / "log_tail.txt", log.tail())
  if sampler.available:
    atomic.write_text(slot.out / "utilisation.csv", sampler.csv_text())


# ---------------------------------------------------------------------------------------------
# The slot.
# ---------------------------------------------------------------------------------------------
def run_slot(slot: Slot, *, modules: Mapping, scale: Callable, measure: Optional[Callable] = None,
             dataset=None, evaluate_kwargs: Optional[dict] = None,
             started: Optional[float] = None) -> int:
  """The throughput, then the queue up to the deadline, summarised in ``slot.out``.

  Args:
    slot: the parsed input (`parse_slot`).
    measure: ``measure(counts, smoke, sampler, budget_end, log) -> dict``, the throughput
      figures written to ``throughput.json`` (default `disentangle.reproduce.throughput.measure`
      of the configs of ``modules``).
    modules, scale, dataset, evaluate_kwargs: as `disentangle.reproduce.run.run_table`.
    started: the ``time.time()`` the slot began (default: now).

  Returns:
    0 when every queued table is done, 2 when one failed (the queue went on).

  Raises:
    plan.BadInput: ``slot.workdir`` is in use by another command.
    preemption.Preempted: the deadline (`DeadlineReached`) or a signal stopped a table; the
      summary is written first.
  """
  import contextlib  # pylint: disable=g-import-not-at-top

  from disentangle.reproduce import plan  # pylint: disable=g-import-not-at-top
  from disentangle.reproduce import run  # pylint: disable=g-import-not-at-top
  if measure is None:
    from disentangle.reproduce import throughput  # pylint: disable=g-import-not-at-top
    measure = functools.partial(throughput.measure, modules=modules)
  with contextlib.ExitStack() as stack:
    try:
      stack.enter_context(run.holding(slot.workdir))
    except plan.BadInput:
      raise plan.BadInput(f"--slot_workdir: {slot.workdir} is in use by another command "
                          "(experiments.slot or experiments.reproduce); wait for it to end or "
                          "choose another --slot_workdir") from None
    return _run_locked(slot, measure=measure, modules=modules, scale=scale, dataset=dataset,
                       evaluate_kwargs=evaluate_kwargs,
                       started=time.time() if started is None else started)


def _run_locked(slot: Slot, *, measure, modules, scale, dataset, evaluate_kwargs,
                started: float) -> int:
  """`run_slot`'s work, under the workdir's lock."""
  import jax  # pylint: disable=g-import-not-at-top

  from disentangle import config as config_lib  # pylint: disable=g-import-not-at-top
  from disentangle import data as data_lib  # pylint: disable=g-import-not-at-top
  from disentangle.reproduce import plan  # pylint: disable=g-import-not-at-top
  from disentangle.reproduce import run  # pylint: disable=g-import-not-at-top
  from disentangle.train import checkpoint  # pylint: disable=g-import-not-at-top
  from disentangle.train import preemption  # pylint: disable=g-import-not-at-top
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  # A table that fails this way leaves the others to run; a failed write (a full disk) or a bug
  # ends the command.
  table_errors = (plan.BadInput, config_lib.ConfigError, data_lib.DataFileError,
                  trainer.NonFiniteError, checkpoint.CheckpointError)
  slot_s = 60.0 * slot.minutes
  margin = min(MARGIN_MAX_S, MARGIN_SHARE * slot_s)
  deadline = started + slot_s - margin
  throughput_end = started + slot.throughput_s()
  log = Log(slot.workdir / "slot.log")
  previous = paths.read_json(slot.out / "slot.json")
  history = previous.pop("previous_calls", []) + ([previous] if previous else [])
  cache = slot.workdir / CACHE
  call: dict[str, Any] = {
      "command": slot.command, "status": "running", "device": run.device(),
      "jax_version": jax.__version__, "smoke": slot.smoke,
      "dataset_source": slot.dataset_source or None,
      "seeds": {e.table.name: e.seeds for e in slot.queue},
      "budget": {"minutes": slot.minutes, "slot_end": _iso(started + slot_s),
                 "deadline": _iso(deadline), "margin_s": round(margin, 1),
                 "throughput_budget_s": round(throughput_end - started, 1)},
      "start": _iso(started), "end": None, "out": str(slot.out), "workdir": str(slot.workdir),
      "compilation_cache": {"dir": str(cache), "entries_at_start":
                            sum(1 for _ in cache.iterdir()) if cache.is_dir() else 0},
      "throughput": None, "queue": [], "previous_calls": history}
  status: dict[str, dict] = {}
  stop, failed = None, False
  stopped = lambda e: ("stopped at the deadline" if isinstance(e, preemption.DeadlineReached)
                       else "stopped by a signal")
  log(f"slot of {slot.minutes:g} min on {call['device']['device_kind']}: the queue stops at "
      f"{call['budget']['deadline']}; summary in {slot.out}, runs in {slot.workdir}")
  with utilisation.GpuSampler(slot.out / "utilisation.csv") as sampler:
    summary = lambda: write_summary(slot, call, status, sampler, log)
    try:
      if (slot.out / "throughput.json").is_file() and not slot.redo_throughput:
        call["throughput"] = "kept: throughput.json exists (--redo_throughput measures again)"
        log(f"throughput: {call['throughput']}")
      else:
        data = measure(slot.runs, slot.smoke, sampler, throughput_end, log)
        atomic.write_text(slot.out / "throughput.json", json.dumps(data, indent=1))
        call["throughput"] = (f"measured: {len(data['figures'])} figures, "
                              f"{len(data['skipped'])} skipped")
      summary()
      sampler.interval_s = utilisation.SAMPLE_S["queue"]
      for entry in slot.queue:
        folder = slot.table_dir(entry)
        sampler.label, began, state = entry.spec, time.time(), {"status": "ended by an error"}
        log(f"queue: {entry.spec} in {folder}")
        try:
          run.run_table(entry.table, folder, modules, scale=scale, seeds=entry.seeds,
                        fraction=entry.fraction, command=slot.command, dataset=dataset,
                        evaluate_kwargs=evaluate_kwargs, deadline=deadline, rows=entry.rows,
                        dataset_source=slot.dataset_source,
                        log=lambda line, name=entry.table.name: log(f"{name}: {line}"))
          state["status"] = "done"
        except preemption.Preempted as e:
          stop = e
          state.update(status=stopped(e), stop=str(e))
        except table_errors as e:
          state["status"], failed = f"failed: {e}", True
          print(f"error: {entry.spec}: {e}", file=sys.stderr, flush=True)
        finally:
          state.update(progress(paths.read_json(folder / "table.json")),
                       wall_s=round(time.time() - began, 1),
                       **sampler.window(began, time.time()))
          status[entry.spec] = state
          log(f"queue: {entry.spec}: {state['status']}; evaluated {state['evaluated']} of "
              f"{state['lines']} lines")
          summary()
        if stop is not None:
          break
      for entry in slot.queue:
        status.setdefault(entry.spec, {"status": "not started: stopped before it"})
      call["status"] = (stopped(stop) if stop is not None else
                        "done, a table failed" if failed else "done")
    except BaseException as e:
      call["status"] = f"ended by {type(e).__name__}: {e}"
      summary()
      raise
    log(f"slot: {call['status']}")
    summary()
  if stop is not None:
    raise stop
  return 2 if failed else 0


def use_compilation_cache(folder: pathlib.Path) -> None:
  """Keep every compiled program that took 0.5 s or more in ``folder``, across calls."""
  import jax  # pylint: disable=g-import-not-at-top
  jax.config.update("jax_compilation_cache_dir", str(folder))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
