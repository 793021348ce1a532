"""One command per paper table: train every row with its seeds, evaluate, print the table.

python -m experiments.reproduce --table=NAME --workdir=DIR [--seeds=N] [--fraction=F]
                               [--deadline=25m] [--eval_points=N] [--dataset_source=render]
python -m experiments.reproduce --list
python -m experiments.reproduce --table=NAME --dry_run [--seeds=N] [--fraction=F]
python -m experiments.reproduce --table=NAME --workdir=DIR --program=K  # program K alone
python -m experiments.reproduce --table=NAME --workdir=DIR --render  # the table of what is done
python -m experiments.reproduce --table=NAME --workdir=DIR --submit=slurm [--slurm_partition=P]
                               [--slurm_time=4:00:00] [--slurm_gpus_per_task=1]
                               [--slurm_parallel=N] [--slurm_options='--account=A'] [--dry_run]

The tables are `experiments.tables` (rows -> config variants of ``experiments/configs``), the
logic `disentangle.reproduce`. ``--fraction=F`` shortens every schedule to F of the paper's, as
the ``cpu`` variants do (``common.scale_schedule``, iteration counts rounded to whole steps);
``--seeds`` defaults to the paper's number; ``--eval_points=N`` evaluates every metric on at
most N points (a CPU budget, recorded in ``table.md``; `disentangle.reproduce.plan`). The same command again resumes what is unfinished
and prints the table again (``DIR/table.md``, ``DIR/table.json``). A dSprites table needs the
official dSprites file (without it the first dSprites program stops in one line, exit status 2);
``--dataset_source=render`` trains its runs on the procedural renderer on purpose, the table's
lines then marked not comparable. Bad input (an unknown table, a fraction outside (0, 1], fewer
than one seed, a workdir of another table, a deadline that is not a positive duration) is one
line and exit status 2, with nothing created; so is a workdir that another
``experiments.reproduce`` is using (a lock on ``DIR/reproduce.lock``).
``--deadline`` (seconds, or ``90s``, ``25m``, ``1h``, from the start of the command) stops the
program in training at the deadline with a checkpoint and starts no evaluation that would end
past it; ``table.md`` / ``table.json`` then hold what is done, and the command exits with status
124 (`disentangle.command_line`, the exit mapping shared with the training entry points).

``--program=K`` trains and evaluates program K of the dry run's list alone; calls of other
programs may share the workdir (any engine with an index spreads a table so), and the call that
ends the last program writes the table (`disentangle.reproduce.run.run_program`). ``--render``
writes the table of what is done and names what is not. ``--submit=slurm`` submits a Slurm array
of the programs not done and the table after them (`disentangle.reproduce.slurm`; with
``--dry_run``: the scripts it would submit). ``--tables=MODULE`` reads the tables from another
module (``TABLES``, optional ``FAMILIES`` and ``CONFIGS``: {name: config module}). The
cluster's commands: docs/cluster.md.
"""
import functools
import importlib
import json
import os
import shlex
import sys
import time

from absl import flags

from disentangle import command_line
from disentangle import storage

STARTED = time.time()  # the deadline counts from the start of the command

_TABLE = flags.DEFINE_string("table", None, "Table name (--list names them).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Folder of the table's runs (resumed).")
_SEEDS = flags.DEFINE_string("seeds", None, "Seeds per row (default: the paper's number).")
_FRACTION = flags.DEFINE_string("fraction", "1", "Share of every schedule, in (0, 1].")
_LIST = flags.DEFINE_bool("list", False, "Name every table with its rows.")
_DRY_RUN = flags.DEFINE_bool("dry_run", False, "Print the programs and the run-steps only.")
_DEADLINE = command_line.define_deadline()
_PROGRAM = flags.DEFINE_string("program", None, "Train and evaluate program K (from 1, as "
                               "--dry_run lists them) alone.")
_RENDER = flags.DEFINE_bool("render", False, "Write the table of what is done; train nothing.")
_TABLES = flags.DEFINE_string("tables", "experiments.tables", "Module of the tables (TABLES; "
                              "optional FAMILIES, CONFIGS).")
_SUBMIT = flags.DEFINE_enum("submit", None, ["slurm"], "Submit the programs not done as a "
                            "cluster's array job, and the table after them.")
_SLURM_PARTITION = flags.DEFINE_string("slurm_partition", "", "Partition of the tasks.")
_SLURM_TIME = flags.DEFINE_string("slurm_time", "", "Time limit of a task (sbatch --time).")
_SLURM_GPUS = flags.DEFINE_string("slurm_gpus_per_task", "0", "GPUs of a task.")
_SLURM_PARALLEL = flags.DEFINE_string("slurm_parallel", "0", "At most this many tasks at once "
                                      "(0: no limit).")
_SLURM_OPTIONS = flags.DEFINE_string("slurm_options", "", "Further sbatch options, e.g. "
                                     "'--account=A --qos=Q'.")
_SLURM_SIGNAL = flags.DEFINE_string("slurm_signal", "300", "Seconds before a task's end at "
                                    "which it checkpoints and is requeued.")
_SLURM_LOGS = flags.DEFINE_string("slurm_logs", "", "Folder of the tasks' output (default: "
                                  "WORKDIR/slurm, or ./slurm_logs for a bucket).")
_EVAL_POINTS = flags.DEFINE_string(
    "eval_points", "0", "0: each metric's own number of points; N >= 100: every metric on at "
    "most N points (a CPU budget; recorded in table.md).")
_DATASET_SOURCE = flags.DEFINE_string(
    "dataset_source", None, "'render': every run on dSprites (or a set drawn from it) trains on "
    "the procedural renderer, not the official file (not comparable with published numbers).")

fail = command_line.fail


def tables_module():
  """The module of ``--tables`` (`plan.BadInput` naming the flag if it cannot be imported)."""
  from disentangle.reproduce import plan  # pylint: disable=g-import-not-at-top
  try:
    module = importlib.import_module(_TABLES.value)
  except ImportError as e:
    raise plan.BadInput(f"--tables: cannot import {_TABLES.value!r} ({e})") from None
  if not isinstance(getattr(module, "TABLES", None), dict):
    raise plan.BadInput(f"--tables: {_TABLES.value!r} has no TABLES dict of tables")
  return module


def config_modules() -> dict:
  """``{name: module}`` of ``experiments/configs`` (their ``get_config`` and ``PUBLISHED``),
  with the ``CONFIGS`` of ``--tables``' module."""
  from experiments import aggregate  # pylint: disable=g-import-not-at-top
  modules = {m.__name__.rpartition(".")[2]: m for m in aggregate.config_modules()}
  return {**modules, **getattr(tables_module(), "CONFIGS", {})}


def program_command(workdir, seeds, fraction, eval_points, dataset_source="") -> list:
  """One program's command line as a cluster task runs it (absolute interpreter and workdir),
  without ``--program``."""
  from disentangle import paths  # pylint: disable=g-import-not-at-top
  workdir = workdir if paths.is_remote(workdir) else os.path.abspath(workdir)
  return [sys.executable, "-m", "experiments.reproduce", f"--table={_TABLE.value}",
          f"--workdir={workdir}", f"--seeds={seeds}", f"--fraction={fraction}",
          f"--eval_points={eval_points}"] + (
              [f"--tables={_TABLES.value}"] if _TABLES.value != _TABLES.default else []) + (
              [f"--dataset_source={dataset_source}"] if dataset_source else [])


def submit(table, seeds, fraction, eval_points, dataset_source) -> None:
  """``--submit=slurm``: the array of the programs not done and the render task
  (`disentangle.reproduce.slurm`); with ``--dry_run`` printed only."""
  from disentangle import atomic  # pylint: disable=g-import-not-at-top
  from disentangle import paths  # pylint: disable=g-import-not-at-top
  from disentangle.reproduce import plan  # pylint: disable=g-import-not-at-top
  from disentangle.reproduce import run  # pylint: disable=g-import-not-at-top
  from disentangle.reproduce import slurm  # pylint: disable=g-import-not-at-top
  opts = slurm.options(partition=_SLURM_PARTITION.value, time=_SLURM_TIME.value,
                       gpus_per_task=_SLURM_GPUS.value, parallel=_SLURM_PARALLEL.value,
                       extra=_SLURM_OPTIONS.value, signal_seconds=_SLURM_SIGNAL.value,
                       logs=_SLURM_LOGS.value)
  if not (_WORKDIR.value or _DRY_RUN.value):
    raise plan.BadInput("--workdir: required to submit (or --dry_run)")
  if not _DRY_RUN.value:
    storage.check(_WORKDIR.value, "--workdir")
  given = _WORKDIR.value or "WORKDIR"
  record = run.check_workdir(given, table, seeds=seeds, fraction=fraction,
                             eval_points=eval_points)
  programs = plan.plan_table(table, config_modules(), seeds=seeds, fraction=fraction,
                             scale=scale(), eval_points=eval_points,
                             dataset_source=dataset_source)
  workdir = paths.as_path(given)
  todo = [k for k, p in enumerate(programs, 1)
          if record is None or not run.done(workdir, p, table)]
  if record is None and not _DRY_RUN.value:  # the tasks find the workdir established
    workdir.mkdir(parents=True, exist_ok=True)
    atomic.write_text(workdir / run.RECORD, json.dumps(run.new_record(
        table, seeds=seeds, fraction=fraction, eval_points=eval_points), indent=1))
  slurm.submit(table, programs, todo,
               program_command(given, seeds, fraction, eval_points, dataset_source), given, opts,
               dry_run=_DRY_RUN.value)


def scale():
  from experiments.configs import common  # pylint: disable=g-import-not-at-top
  return functools.partial(common.scale_schedule, round_steps=True)


def main(argv):
  from disentangle import errors  # pylint: disable=g-import-not-at-top
  from disentangle.reproduce import plan  # pylint: disable=g-import-not-at-top
  from disentangle.reproduce import run  # pylint: disable=g-import-not-at-top
  if len(argv) > 1:
    fail(f"unexpected argument {argv[1]!r}; see --helpfull")
  try:
    tables = tables_module()
    if _LIST.value:
      print(plan.listing(tables.TABLES))
      return
    if _TABLE.value is None:
      raise plan.BadInput(f"--table: required; known tables: {', '.join(tables.TABLES)}")
    table = plan.table_named(tables.TABLES, _TABLE.value, getattr(tables, "FAMILIES", {}))
    seeds = table.seeds if _SEEDS.value is None else plan.parse_seeds(_SEEDS.value)
    fraction = plan.parse_fraction(_FRACTION.value)
    eval_points = plan.parse_eval_points(_EVAL_POINTS.value)
    dataset_source = plan.parse_dataset_source(_DATASET_SOURCE.value)
    if _SUBMIT.value:
      submit(table, seeds, fraction, eval_points, dataset_source)
      return
    if _DRY_RUN.value:
      programs = plan.plan_table(table, config_modules(), seeds=seeds, fraction=fraction,
                                 scale=scale(), eval_points=eval_points,
                                 dataset_source=dataset_source)
      print(plan.describe(table, programs, seeds=seeds, fraction=fraction,
                          workdir=_WORKDIR.value, eval_points=eval_points))
      return
    if not _WORKDIR.value:
      raise plan.BadInput("--workdir: required to train (or --dry_run)")
    storage.check(_WORKDIR.value, "--workdir")
    storage.check_data_dir()
    run.check_workdir(_WORKDIR.value, table, seeds=seeds, fraction=fraction,
                      eval_points=eval_points)
  except errors.UserError as e:
    fail(str(e))
  deadline = command_line.deadline_from_flag(_DEADLINE, STARTED)
  command = "python -m experiments.reproduce " + " ".join(shlex.quote(a) for a in sys.argv[1:])
  # A workdir in use, a missing data file, NaN, no restorable checkpoint, a failed write: one
  # line; a signal or the deadline: the table of what is done, one line. The finished programs
  # stay and the same command resumes.
  with command_line.exits(command):
    if _RENDER.value:
      programs = plan.plan_table(table, config_modules(), seeds=seeds, fraction=fraction,
                                 scale=scale(), eval_points=eval_points,
                                 dataset_source=dataset_source)
      data, missing = run.render_table(table, _WORKDIR.value, config_modules(), programs,
                                       seeds=seeds, fraction=fraction, eval_points=eval_points,
                                       command=command, always=True)
      if missing:
        print(f"not done: program(s) {', '.join(map(str, missing))} of {len(programs)}")
    elif _PROGRAM.value is not None:
      data = run.run_program(table, _WORKDIR.value, config_modules(), _PROGRAM.value,
                             scale=scale(), seeds=seeds, fraction=fraction, command=command,
                             deadline=deadline, eval_points=eval_points,
                             dataset_source=dataset_source)
    else:
      data = run.run_table(table, _WORKDIR.value, config_modules(), scale=scale(), seeds=seeds,
                           fraction=fraction, command=command, deadline=deadline,
                           eval_points=eval_points, dataset_source=dataset_source)
  if data is None:
    return
  from disentangle.reproduce import render  # pylint: disable=g-import-not-at-top
  print(render.markdown(data))
  print(f"wrote {_WORKDIR.value}/table.md and table.json")


if __name__ == "__main__":
  command_line.run(main)
