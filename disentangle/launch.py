"""The command line shared by every entry point in ``experiments/``.

``python -m experiments.<name> --config=experiments/configs/<name>.py[:variant[,field=value]]
[--config.field=value ...] [--workdir=DIR] [--deadline=25m] [--dry_run]``. Without ``--workdir``
the run goes to ``runs/<config name>[_<variant>]``; the run resumes automatically if that folder has a
checkpoint. ``--workdir`` may be a bucket URL (``gs://bucket/run``; `disentangle.paths`); on a
pod every host runs the same command with the same URL.

An unknown variant, an unknown field or an unparsable value (in the ``:variant,field=value``
argument or as ``--config.field=value``) is one line here, while flags are parsed; an impossible
value is reported by the config's validation before the run is announced. The exit statuses and
``--deadline`` are `disentangle.command_line`'s (`exits`); the behaviour they give a run is
described once in docs/reliability.md.

``--dry_run`` checks the command as a run would (the config file, its variant, every override and
the config's validation) and prints what it would train (:func:`describe`), then stops: nothing
is read, compiled or written. :func:`plan` does the same for an argument list, in this process.
"""
from __future__ import annotations

import functools
import importlib.util
import pathlib
import shlex
import sys
import time

from absl import flags
from ml_collections import config_flags

from disentangle import command_line
from disentangle import config as config_lib
from disentangle import paths
from disentangle import storage

fail = command_line.fail


def define_flags() -> dict[str, flags.FlagHolder]:
  """``--config``, ``--workdir`` and ``--deadline`` of a training entry point, defined when it
  runs (`main`), never when a module is imported."""
  return {"config": config_flags.DEFINE_config_file("config", None, "Config file, with :variant.",
                                                    lock_config=True),
          "workdir": flags.DEFINE_string("workdir", None,
                                         "Run directory (created; resumed if it exists)."),
          "deadline": command_line.define_deadline(),
          "dry_run": flags.DEFINE_bool("dry_run", False, "Check the command and print what it "
                                       "would train; train nothing, write nothing.")}


def default_workdir(config_arg: str) -> pathlib.Path:
  path, _, variant = config_arg.partition(":")
  name = pathlib.Path(path).stem
  tag = "".join(ch if ch.isalnum() or ch in "-_=." else "_" for ch in variant)
  return pathlib.Path("runs") / (f"{name}_{tag}" if tag else name)


def load_config(config_arg: str):
  """``get_config(variant)`` of ``path[:variant]``, as ``config_flags`` calls it."""
  path, colon, variant = config_arg.partition(":")
  name = pathlib.Path(path).stem
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(variant) if colon else module.get_config()


def configured(config_arg: str, argv: list[str]):
  """The config of ``config_arg`` with the ``--config.<field>=value`` / ``--noconfig.<field>``
  overrides of ``argv`` applied, as ``config_flags`` applies them."""
  config = load_config(config_arg)
  for a in argv:
    if a.startswith("--config."):
      field, eq, text = a[len("--config."):].partition("=")
      config_lib.apply_overrides(config, {field: text if eq else "true"})
    elif a.startswith("--noconfig."):
      config_lib.apply_overrides(config, {a[len("--noconfig."):]: "false"})
  return config


def config_problem(argv: list[str]) -> str | None:
  """One line saying what is wrong with ``--config`` and its ``--config.<field>`` overrides.

  ``None`` when the config file loads and every override names a known field with a parsable
  value (the problem, if any, is elsewhere).
  """
  arg = next((a.split("=", 1)[1] for a in argv if a.startswith("--config=")), None)
  if arg is None:
    return None
  path = arg.partition(":")[0]
  if not pathlib.Path(path).is_file():
    return f"config file {path!r} not found"
  try:
    configured(arg, argv)
  except config_lib.ConfigError as e:
    return str(e)
  return None


def describe(config, workdir) -> str:
  """One line: what a run of ``config`` in ``workdir`` trains."""
  runs = int(config.get("num_seeds", 1) or 1)
  return (f"dry run: {config.method} on {config.dataset.name}, {int(config.num_steps):,} steps, "
          f"seed {config.seed}" + (f", {runs} runs in one program" if runs > 1 else "") +
          f"; run directory {workdir}; nothing trained or written")


def time_left_note(config) -> str | None:
  """The line printed under the run's announcement when the progress bar is on: what the bar's
  time left counts (the steps left at the current rate) and what it leaves out."""
  if not config.progress_bar:
    return None
  steps, every = int(config.num_steps), int(config.eval_every)
  evaluations = steps // every + (steps % every != 0)
  left_out = ["the evaluation at the end" if evaluations == 1 else
              f"the {evaluations:,} evaluations (one every {every:,} steps)"]
  if config.method == "cascadevae" and 0 < int(config.cascade.discrete_start) < steps:
    left_out.append(f"the slower steps after t_d = {int(config.cascade.discrete_start):,} "
                    "(S decoder passes and the exact assignment each)")
  return ("the progress bar's time left counts the steps left at the current rate, not "
          + " nor ".join(left_out))


def plan(argv: list[str]) -> str:
  """`describe` of the run an entry point's arguments ask for (``--config=...``, overrides,
  ``--workdir``), checked as ``--dry_run`` checks it; `ConfigError` naming what is wrong."""
  from disentangle import methods  # pylint: disable=g-import-not-at-top
  argv = _joined(_joined(list(argv), "config"), "workdir")
  config_arg = next((a.split("=", 1)[1] for a in argv if a.startswith("--config=")), None)
  if config_arg is None:
    raise config_lib.ConfigError("--config=<file>.py[:variant] is required")
  problem = config_problem(argv)
  if problem is not None:
    raise config_lib.ConfigError(problem)
  config = configured(config_arg, argv)
  methods.validate(config)
  workdir = next((a.split("=", 1)[1] for a in argv if a.startswith("--workdir=")),
                 default_workdir(config_arg))
  return describe(config, workdir)


def _last_line(text: str) -> str:
  return [line for line in text.splitlines() if line.strip()][-1].strip()


def parse_flags(argv: list[str], config: flags.FlagHolder) -> list[str]:
  """absl's flag parsing, with a bad ``--config`` (file, variant, field, value) as one line.

  ``config_flags`` raises a bare ``KeyError`` / ``AttributeError`` (with a traceback) for an
  unknown ``--config.<field>``, wraps a ``ConfigError`` of ``get_config`` in a multi-line
  ``IllegalFlagValueError``, and defers a missing config file to its first access. Any of these
  is explained again by :func:`config_problem` in one line naming the field; any other error that
  is not a flags error (a bug in a config file) keeps its traceback.
  """
  try:
    rest = flags.FLAGS(argv)
    _ = config.value.method  # a missing config file raises only here
    return rest
  except Exception as e:  # pylint: disable=broad-except
    message = config_problem(argv)
    if message is None and isinstance(e, flags.Error):
      message = _last_line(str(e))
    if message is None:
      raise
  fail(message)


def _run(defined: dict[str, flags.FlagHolder], _):
  # a bad deadline: one line, nothing created
  deadline = command_line.deadline_from_flag(defined["deadline"], _STARTED)
  from disentangle import methods  # pylint: disable=g-import-not-at-top
  from disentangle.evaluation import evaluator  # pylint: disable=g-import-not-at-top
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  config = defined["config"].value
  workdir = paths.as_path(defined["workdir"].value)  # a folder or a bucket URL (gs://bucket/run)
  with command_line.exits(shlex.join(getattr(sys, "orig_argv", sys.argv))):
    if defined["dry_run"].value:  # the config alone: no bucket or data folder is reached
      methods.validate(config)
      print(describe(config, workdir), flush=True)
      return
    storage.check(workdir, "--workdir")  # a bucket that cannot be used: one line, in seconds
    storage.check_data_dir(config.dataset.get("data_dir"))
    storage.check(config.dataset.get("tfds_data_dir") or None, "dataset.tfds_data_dir")
    methods.validate(config)  # once; a bad field: its one line alone, before the announcement
    print(f"run directory: {workdir}  (seed {config.seed}, method {config.method})", flush=True)
    note = time_left_note(config)
    if note:
      print(note, flush=True)
    trainer.train(config, workdir, evaluator_factory=evaluator.factory(config),
                  deadline=deadline, validated=True)
  print(f"done: {workdir}", flush=True)


def _joined(argv: list[str], name: str) -> list[str]:
  """``--name value`` -> ``--name=value`` (absl accepts both; the defaults below look for '=')."""
  out, i = [], 0
  while i < len(argv):
    if argv[i] == f"--{name}" and i + 1 < len(argv):
      out.append(f"--{name}={argv[i + 1]}")
      i += 2
    else:
      out.append(argv[i])
      i += 1
  return out


_STARTED = time.time()  # the deadline counts from the start of the command


def main(default_config: str | None = None) -> None:
  """Entry point: ``default_config`` is used when ``--config`` is not given."""
  sys.argv = _joined(_joined(sys.argv, "config"), "workdir")
  if default_config and not any(a.startswith("--config=") for a in sys.argv):
    sys.argv.insert(1, f"--config={default_config}")  # before any --config.<field>
  config_arg = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--config=")), None)
  if config_arg is None:
    fail("--config=<file>.py[:variant] is required")
  if not any(a.startswith("--workdir=") for a in sys.argv):
    sys.argv.append(f"--workdir={default_workdir(config_arg)}")
  defined = define_flags()
  command_line.run(functools.partial(_run, defined),
                   flags_parser=functools.partial(parse_flags, config=defined["config"]))
