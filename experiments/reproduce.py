"""One command per paper table: train every row with its seeds, evaluate, print the table.

python -m experiments.reproduce --table=NAME --workdir=DIR [--seeds=N] [--fraction=F]
                               [--deadline=25m] [--eval_points=N]
python -m experiments.reproduce --list
python -m experiments.reproduce --table=NAME --dry_run [--seeds=N] [--fraction=F]

The tables are `experiments.tables` (rows -> config variants of ``experiments/configs``), the
logic `disentangle.reproduce`. ``--fraction=F`` shortens every schedule to F of the paper's, as
the ``cpu`` variants do (``common.scale_schedule``, iteration counts rounded to whole steps);
``--seeds`` defaults to the paper's number; ``--eval_points=N`` evaluates every metric on at
most N points (a CPU budget, recorded in ``table.md``; `disentangle.reproduce.plan`). The same command again resumes what is unfinished
and prints the table again (``DIR/table.md``, ``DIR/table.json``). Bad input (an unknown table,
a fraction outside (0, 1], fewer than one seed, a workdir of another table, a deadline that is
not a positive duration) is one line and exit status 2, with nothing created; so is a workdir
that another ``experiments.reproduce`` is using (a lock on ``DIR/reproduce.lock``).
``--deadline`` (seconds, or ``90s``, ``25m``, ``1h``, from the start of the command) stops the
program in training at the deadline with a checkpoint and starts no evaluation that would end
past it; ``table.md`` / ``table.json`` then hold what is done, and the command exits with status
124 (`disentangle.command_line`, the exit mapping shared with the training entry points).
"""
import functools
import shlex
import sys
import time

from absl import app
from absl import flags
from absl import logging as absl_logging

from disentangle import command_line

STARTED = time.time()  # the deadline counts from the start of the command

_TABLE = flags.DEFINE_string("table", None, "Table name (--list names them).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Folder of the table's runs (resumed).")
_SEEDS = flags.DEFINE_string("seeds", None, "Seeds per row (default: the paper's number).")
_FRACTION = flags.DEFINE_string("fraction", "1", "Share of every schedule, in (0, 1].")
_LIST = flags.DEFINE_bool("list", False, "Name every table with its rows.")
_DRY_RUN = flags.DEFINE_bool("dry_run", False, "Print the programs and the run-steps only.")
_DEADLINE = command_line.define_deadline()
_EVAL_POINTS = flags.DEFINE_string(
    "eval_points", "0", "0: each metric's own number of points; N >= 100: every metric on at "
    "most N points (a CPU budget; recorded in table.md).")

fail = command_line.fail


def config_modules() -> dict:
  """``{name: module}`` of ``experiments/configs`` (their ``get_config`` and ``PUBLISHED``)."""
  from experiments import aggregate  # pylint: disable=g-import-not-at-top
  return {m.__name__.rpartition(".")[2]: m for m in aggregate.config_modules()}


def scale():
  from experiments.configs import common  # pylint: disable=g-import-not-at-top
  return functools.partial(common.scale_schedule, round_steps=True)


def main(argv):
  from disentangle import errors  # pylint: disable=g-import-not-at-top
  from disentangle.reproduce import plan  # pylint: disable=g-import-not-at-top
  from disentangle.reproduce import run  # pylint: disable=g-import-not-at-top
  from experiments import tables  # pylint: disable=g-import-not-at-top
  if len(argv) > 1:
    fail(f"unexpected argument {argv[1]!r}; see --helpfull")
  if _LIST.value:
    print(plan.listing(tables.TABLES))
    return
  try:
    if _TABLE.value is None:
      raise plan.BadInput(f"--table: required; known tables: {', '.join(tables.TABLES)}")
    table = plan.table_named(tables.TABLES, _TABLE.value, tables.FAMILIES)
    seeds = table.seeds if _SEEDS.value is None else plan.parse_seeds(_SEEDS.value)
    fraction = plan.parse_fraction(_FRACTION.value)
    eval_points = plan.parse_eval_points(_EVAL_POINTS.value)
    if _DRY_RUN.value:
      programs = plan.plan_table(table, config_modules(), seeds=seeds, fraction=fraction,
                                 scale=scale(), eval_points=eval_points)
      print(plan.describe(table, programs, seeds=seeds, fraction=fraction,
                          workdir=_WORKDIR.value, eval_points=eval_points))
      return
    if not _WORKDIR.value:
      raise plan.BadInput("--workdir: required to train (or --dry_run)")
    run.check_workdir(_WORKDIR.value, table, seeds=seeds, fraction=fraction,
                      eval_points=eval_points)
  except errors.UserError as e:
    fail(str(e))
  deadline = command_line.deadline_from_flag(_DEADLINE, STARTED)
  absl_logging.set_verbosity(absl_logging.WARNING)
  command = "python -m experiments.reproduce " + " ".join(shlex.quote(a) for a in sys.argv[1:])
  # A workdir in use, a missing data file, NaN, no restorable checkpoint, a failed write: one
  # line; a signal or the deadline: the table of what is done, one line. The finished programs
  # stay and the same command resumes.
  with command_line.exits(command):
    data = run.run_table(table, _WORKDIR.value, config_modules(), scale=scale(), seeds=seeds,
                         fraction=fraction, command=command, deadline=deadline,
                         eval_points=eval_points)
  from disentangle.reproduce import render  # pylint: disable=g-import-not-at-top
  print(render.markdown(data))
  print(f"wrote {_WORKDIR.value}/table.md and table.json")


if __name__ == "__main__":
  app.run(main)
