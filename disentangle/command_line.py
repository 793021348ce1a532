"""What the command lines share: bad input in one line, the exit mapping and ``--deadline``.

The training entry points (`disentangle.launch`), ``experiments.reproduce`` and
``experiments.evaluate`` end the same way (`exits`):

- bad input or a failure the user can fix (`errors.UserError`: a config field, a data file, NaN, no restorable
  checkpoint, a folder that is not a run, a failed write such as a full disk, a workdir of another command or in use): one
  line ``error: ...`` on stderr, exit status 2 (`BAD_INPUT_STATUS`), no traceback;
- SIGTERM / SIGINT: the run's checkpointed stop in one line with the command that resumes, exit
  status 128 + the signal's number (143, 130), as a shell reports a process ended by it;
- ``--deadline``: the same, reading ``stopped at the deadline``, exit status 124
  (`preemption.DEADLINE_STATUS`, GNU ``timeout``'s).

``--deadline`` is the command's wall-clock budget from its start: seconds (``5400``) or a number
with a unit (``90s``, ``25m``, ``1.5h``), parsed here once (`parse_deadline`).
"""
from __future__ import annotations

import contextlib
import re
import sys
import time
from typing import Iterator

from absl import flags

from disentangle import errors

BAD_INPUT_STATUS = 2
UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}

DEADLINE = flags.DEFINE_string(
    "deadline", None, "Stop at this wall time from the start, with a checkpoint: seconds or a "
    "number with a unit (90s, 25m, 1h).")

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


def deadline_from_flag(started: float | None = None) -> float | None:
  """``--deadline`` as a `time.time()` counted from ``started`` (default: now); None without
  the flag. Bad input: one line naming the flag, exit status 2."""
  if DEADLINE.value is None:
    return None
  try:
    seconds = parse_deadline(DEADLINE.value)
  except ValueError as e:
    fail(str(e))
  return (time.time() if started is None else started) + seconds


@contextlib.contextmanager
def exits(command: str) -> Iterator[None]:
  """The exit mapping of the command lines (module docstring) around their work; ``command``
  is the command line that resumes a stopped run."""
  from disentangle.train import preemption  # pylint: disable=g-import-not-at-top
  try:
    yield
  except preemption.Preempted as e:
    print(f"{e}: {command}", flush=True)
    sys.exit(e.exit_status)
  except errors.UserError as e:
    fail(str(e))
