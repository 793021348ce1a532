"""Spend a short GPU slot: throughput figures first, then paper tables up to the slot's end.

python -m experiments.slot --minutes=25 --out=DIR [--slot_workdir=W]
    [--queue=TABLE[/ROWS][:SEEDS[:FRACTION]],...] [--smoke] [--redo_throughput]
    [--runs=1,10,20,40] [--throughput_minutes=M] [--dataset_source=render]

The logic, the files of ``DIR`` and the exit statuses: `disentangle.reproduce.slot`; the
throughput figures: `disentangle.reproduce.throughput`; the tables: `experiments.tables`. The same command
again continues where the last one stopped. Without the official dSprites file a queued dSprites
table fails in one line (the queue goes on, exit status 2); ``--dataset_source=render`` trains
its runs on the procedural renderer on purpose (scores marked not comparable).
"""
import functools
import shlex
import sys
import time

from absl import flags

from disentangle import command_line
from disentangle import errors
from disentangle import storage
from disentangle.reproduce import slot as slot_lib

STARTED = time.time()  # the slot counts from the start of the command

_MINUTES = flags.DEFINE_string("minutes", None, "Length of the slot in minutes (> 0).")
_OUT = flags.DEFINE_string("out", None, "Folder of the compact summary (six files at most).")
# Not --workdir: the entry points define it, and a process (a test worker) may import both.
_WORKDIR = flags.DEFINE_string("slot_workdir", None, "Folder of the tables' runs and the "
                               "compilation cache (default: <out>_workdir beside --out).")
_QUEUE = flags.DEFINE_string("queue", slot_lib.DEFAULT_QUEUE, "Tables to run in order, "
                             "table[/rows][:seeds[:fraction]] separated by commas ('' : none); "
                             "rows: config[.variant] joined by '+'.")
_SMOKE = flags.DEFINE_bool("smoke", False, "Throughput of the smoke variants, 1-2 runs, 2 steps.")
_REDO = flags.DEFINE_bool("redo_throughput", False, "Measure again when throughput.json exists.")
_THROUGHPUT_MINUTES = flags.DEFINE_string(
    "throughput_minutes", None, "Minutes of the throughput figures (default: 15% of the slot, "
    "at most 5); the first figure is always measured.")
_RUNS = flags.DEFINE_list("runs", None, "Runs per program of the throughput figures (default "
                          "1,10,20,40; with --smoke 1,2).")
_DATASET_SOURCE = flags.DEFINE_string(
    "dataset_source", None, "'render': every queued run on dSprites (or a set drawn from it) "
    "trains on the procedural renderer, not the official file (not comparable with published "
    "numbers).")


def main(argv) -> None:
  from experiments import tables  # pylint: disable=g-import-not-at-top
  if len(argv) > 1:
    command_line.fail(f"unexpected argument {argv[1]!r}; see --helpfull")
  command = "python -m experiments.slot " + " ".join(shlex.quote(a) for a in sys.argv[1:])
  try:
    slot = slot_lib.parse_slot(minutes=_MINUTES.value, out=_OUT.value, workdir=_WORKDIR.value,
                               queue=_QUEUE.value, runs=_RUNS.value, smoke=_SMOKE.value,
                               redo_throughput=_REDO.value, command=command,
                               throughput_minutes=_THROUGHPUT_MINUTES.value,
                               dataset_source=_DATASET_SOURCE.value, tables=tables.TABLES)
    storage.check(_OUT.value, "--out")
    storage.check(_WORKDIR.value, "--slot_workdir")
    storage.check_data_dir()
  except errors.UserError as e:
    command_line.fail(str(e))
  from disentangle.train import host  # pylint: disable=g-import-not-at-top
  from experiments import aggregate  # pylint: disable=g-import-not-at-top
  from experiments.configs import common as configs  # pylint: disable=g-import-not-at-top
  host.configure_malloc()  # as the trainer does, before JAX starts its threads
  slot_lib.use_compilation_cache(slot.workdir / slot_lib.CACHE)
  modules = {m.__name__.rpartition(".")[2]: m for m in aggregate.config_modules()}
  scale = functools.partial(configs.scale_schedule, round_steps=True)
  with command_line.exits(command):
    status = slot_lib.run_slot(slot, modules=modules, scale=scale, started=STARTED)
  sys.exit(status)


if __name__ == "__main__":
  command_line.run(main)
