"""What the command lines share: their start, bad input in one line, the exit mapping and
``--deadline``.

Every command line starts through `run` (absl's ``app.run``): the libraries' INFO lines (absl's
handler at its default verbosity: JAX probing for a TPU on a machine without one, orbax restoring
a checkpoint) are kept out of its output, so that its first line is the project's own, and the
project's log lines read as its other lines, ``warning: <message>`` (`quiet_libraries`). The
training entry points (`disentangle.launch`), ``experiments.reproduce`` and
``experiments.evaluate`` run their work inside `exits`: an `errors.UserError` is one line
``error: ...`` on stderr and exit status 2 (`BAD_INPUT_STATUS`); `preemption.Preempted` (SIGTERM,
SIGINT, the deadline) prints its line with the command that resumes and exits with its status
(143, 130; 124 for the deadline); a Python warning is one line, ``warning: <category>:
<message>``. ``--deadline`` (seconds or a number with s / m / h, from the command's start) is
defined by the commands that take it (`define_deadline`) and parsed here once
(`parse_deadline`). The behaviour, for users: docs/reliability.md.
"""
from __future__ import annotations

import contextlib
import logging
import re
import sys
import time
from typing import Callable, Iterator
import warnings

from absl import app
from absl import flags
from absl import logging as absl_logging

from disentangle import errors

BAD_INPUT_STATUS = 2
UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([smh]?)\s*$")


class _ProjectLines(absl_logging.PythonFormatter):
  """absl's format (``W1207 13:20:36.346772 1398 file.py:849] ...``) for the libraries' log
  records; the project's own (loggers ``disentangle.*``) as ``<level>: <message>``, as the command
  lines print a warning (`one_line_warning`)."""

  def format(self, record: logging.LogRecord) -> str:
    if record.name.partition(".")[0] != "disentangle":
      return super().format(record)
    text = f"{record.levelname.lower()}: {record.getMessage()}"
    return text + ("\n" + self.formatException(record.exc_info) if record.exc_info else "")


def quiet_libraries() -> None:
  """The libraries' log lines below WARNING out of the command's output, unless the command was
  given ``--verbosity`` (``-v``), and the project's log lines in its own form (`_ProjectLines`).
  The libraries' warnings still show: JAX's, on a machine whose GPU or TPU it does not use, says
  why beside `disentangle.backend.fallback_warning`'s line."""
  if not flags.FLAGS["verbosity"].present:
    absl_logging.set_verbosity(absl_logging.WARNING)
  absl_logging.get_absl_handler().setFormatter(_ProjectLines())


def run(main: Callable, argv: list[str] | None = None, **kwargs) -> None:
  """absl's ``app.run(main, argv, **kwargs)`` with `quiet_libraries` before ``main``: the start
  of every command line."""
  def quiet_main(args):
    quiet_libraries()
    return main(args)
  app.run(quiet_main, argv, **kwargs)


def fail(message: str) -> None:
  """One line on stderr and exit status 2."""
  print(f"error: {message}", file=sys.stderr, flush=True)
  sys.exit(BAD_INPUT_STATUS)


def parse_deadline(text: str) -> float:
  """Seconds of ``--deadline``: ``90``, ``90s``, ``25m``, ``1h``; ValueError naming the flag
  for anything else or a value that is not positive."""
  match = _DURATION.match(str(text))
  if match is None:
    raise ValueError(f"--deadline: expected seconds or a number with a unit (90s, 25m, 1h), "
                     f"got {text!r}")
  seconds = float(match.group(1)) * UNITS[match.group(2)]
  if not seconds > 0:
    raise ValueError(f"--deadline: must be positive, got {text!r}")
  return seconds


def define_deadline() -> flags.FlagHolder:
  """``--deadline``, defined by an entry point that takes it (once, when it runs)."""
  return flags.DEFINE_string(
      "deadline", None, "Stop at this wall time from the start, with a checkpoint: seconds or a "
      "number with a unit (90s, 25m, 1h).")


def deadline_from_flag(flag: flags.FlagHolder, started: float | None = None) -> float | None:
  """``--deadline`` (``flag``, `define_deadline`) as a `time.time()` counted from ``started``
  (default: now); None without the flag. Bad input: one line naming the flag, exit status 2."""
  if flag.value is None:
    return None
  try:
    seconds = parse_deadline(flag.value)
  except ValueError as e:
    fail(str(e))
  return (time.time() if started is None else started) + seconds


@contextlib.contextmanager
def exits(command: str) -> Iterator[None]:
  """The exit mapping of the command lines (module docstring) around their work; ``command``
  is the command line that resumes a stopped run."""
  from disentangle.train import preemption  # pylint: disable=g-import-not-at-top
  shown, warnings.formatwarning = warnings.formatwarning, one_line_warning
  try:
    yield
  except preemption.Preempted as e:
    print(f"{e}: {command}", flush=True)
    sys.exit(e.exit_status)
  except errors.UserError as e:
    fail(str(e))
  finally:
    warnings.formatwarning = shown


def one_line_warning(message, category, filename, lineno, line=None) -> str:
  """A Python warning as the command lines show it (`exits`): ``warning: <category>: <message>``
  on one line, without the source line Python prints under it."""
  del filename, lineno, line
  return f"warning: {category.__name__}: {message}\n"
