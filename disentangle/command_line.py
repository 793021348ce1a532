"""What the command lines share: bad input in one line, the exit mapping and ``--deadline``.

The training entry points (`disentangle.launch`), ``experiments.reproduce`` and
``experiments.evaluate`` run their work inside `exits`: an `errors.UserError` is one line
``error: ...`` on stderr and exit status 2 (`BAD_INPUT_STATUS`); `preemption.Preempted` (SIGTERM,
SIGINT, the deadline) prints its line with the command that resumes and exits with its status
(143, 130; 124 for the deadline); a Python warning is one line, ``warning: <category>:
<message>``. ``--deadline`` (seconds or a number with s / m / h, from the
command's start) is defined by the commands that take it (`define_deadline`) and parsed here
once (`parse_deadline`). The behaviour, for users: docs/reliability.md.
"""
from __future__ import annotations

import contextlib
import re
import sys
import time
from typing import Iterator
import warnings

from absl import flags

from disentangle import errors

BAD_INPUT_STATUS = 2
UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([smh]?)\s*$")


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
