"""One command per paper table: train every row with its seeds, evaluate, print the table.

python -m experiments.reproduce --table=NAME --workdir=DIR [--seeds=N] [--fraction=F]
python -m experiments.reproduce --list
python -m experiments.reproduce --table=NAME --dry_run [--seeds=N] [--fraction=F]

The tables are `experiments.tables` (rows -> config variants of ``experiments/configs``), the
logic `disentangle.reproduce`. ``--fraction=F`` shortens every schedule to F of the paper's, as
the ``cpu`` variants do (``common.scale_schedule``, iteration counts rounded to whole steps);
``--seeds`` defaults to the paper's number. The same command again resumes what is unfinished
and prints the table again (``DIR/table.md``, ``DIR/table.json``). Bad input (an unknown table,
a fraction outside (0, 1], fewer than one seed, a workdir of another table) is one line and exit
status 2, with nothing created.
"""
import functools
import shlex
import sys

from absl import app
from absl import flags
from absl import logging as absl_logging

_TABLE = flags.DEFINE_string("table", None, "Table name (--list names them).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Folder of the table's runs (resumed).")
_SEEDS = flags.DEFINE_string("seeds", None, "Seeds per row (default: the paper's number).")
_FRACTION = flags.DEFINE_string("fraction", "1", "Share of every schedule, in (0, 1].")
_LIST = flags.DEFINE_bool("list", False, "Name every table with its rows.")
_DRY_RUN = flags.DEFINE_bool("dry_run", False, "Print the programs and the run-steps only.")

BAD_INPUT_STATUS = 2


def config_modules() -> dict:
  """``{name: module}`` of ``experiments/configs`` (their ``get_config`` and ``PUBLISHED``)."""
  from experiments import aggregate  # pylint: disable=g-import-not-at-top
  return {m.__name__.rpartition(".")[2]: m for m in aggregate.config_modules()}


def scale():
  from experiments.configs import common  # pylint: disable=g-import-not-at-top
  return functools.partial(common.scale_schedule, round_steps=True)


def fail(message: str) -> None:
  print(f"error: {message}", file=sys.stderr, flush=True)
  sys.exit(BAD_INPUT_STATUS)


def main(argv):
  from disentangle import atomic  # pylint: disable=g-import-not-at-top
  from disentangle import config as config_lib  # pylint: disable=g-import-not-at-top
  from disentangle import data as data_lib  # pylint: disable=g-import-not-at-top
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
    table = plan.table_named(tables.TABLES, _TABLE.value)
    seeds = table.seeds if _SEEDS.value is None else plan.parse_seeds(_SEEDS.value)
    fraction = plan.parse_fraction(_FRACTION.value)
    if _DRY_RUN.value:
      programs = plan.plan_table(table, config_modules(), seeds=seeds, fraction=fraction,
                                 scale=scale())
      print(plan.describe(table, programs, seeds=seeds, fraction=fraction,
                          workdir=_WORKDIR.value))
      return
    if not _WORKDIR.value:
      raise plan.BadInput("--workdir: required to train (or --dry_run)")
    run.check_workdir(_WORKDIR.value, table, seeds=seeds, fraction=fraction)
  except (plan.BadInput, config_lib.ConfigError) as e:
    fail(str(e))
  absl_logging.set_verbosity(absl_logging.WARNING)
  command = "python -m experiments.reproduce " + " ".join(shlex.quote(a) for a in sys.argv[1:])
  from disentangle.train import checkpoint  # pylint: disable=g-import-not-at-top
  from disentangle.train import preemption  # pylint: disable=g-import-not-at-top
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  try:
    data = run.run_table(table, _WORKDIR.value, config_modules(), scale=scale(), seeds=seeds,
                         fraction=fraction, command=command)
  except (plan.BadInput, config_lib.ConfigError, data_lib.DataFileError, atomic.WriteError,
          trainer.NonFiniteError, checkpoint.CheckpointError) as e:
    fail(str(e))  # a missing data file, NaN, no restorable checkpoint, a failed write: one line;
    # the finished programs stay and the same command resumes
  except preemption.Preempted as e:  # SIGTERM / SIGINT: checkpointed; the command resumes
    print(f"{e}: {command}", flush=True)
    sys.exit(e.exit_status)
  from disentangle.reproduce import render  # pylint: disable=g-import-not-at-top
  print(render.markdown(data))
  print(f"wrote {_WORKDIR.value}/table.md and table.json")


if __name__ == "__main__":
  app.run(main)
