"""Stopping a run cleanly on SIGTERM or SIGINT (a preemption notice, Ctrl-C) or at a deadline.

`Signals` holds handlers for the duration of training (the previous ones come back after) and
says, between steps, whether the run stops at this step (`Signals.stop_at`); the trainer then
writes a checkpoint at that step, closes its writers and raises `Preempted` (`DeadlineReached`
at the deadline), and the same command resumes from there, bitwise.

**Deadline** (``Signals(start, deadline=t)``, ``t`` a `time.time()`): the first step that ends
at or after ``t`` is the last, as if a signal had come; `Signals.too_late` says whether work of a
given duration (an evaluation) would end past it, so that it is not started.

- **One process**: a signal sets a flag that the host reads between steps (no device work).
- **Several processes** (``jax.distributed``): all must stop at the same step, since the
  checkpoint is written collectively. JAX's preemption service
  (`jax.experimental.multihost_utils.reached_preemption_sync_point`, on by default) catches
  SIGTERM in every process and agrees on a step a little past the notice (the largest step any
  process has reached, plus a margin); it answers True at that step in every process. SIGINT is
  forwarded to it as a SIGTERM of the same process. With the service switched off
  (``jax_enable_preemption_service=False``) the processes exchange their flags at every step
  (`multihost_utils.process_allgather`, one small collective a step). The deadline is process
  0's (the seconds it has left, sent to all when training starts); a process that passes it
  notifies the service as a SIGTERM does (or sends its flag), so that all stop at the same step,
  and each one names the deadline as the cause once it has passed it too (clocks agreeing to
  within the few steps the service adds). `too_late` gives process 0's answer in every process
  (one broadcast).

A second signal while stopping restores the previous handlers and is delivered again (Ctrl-C
twice: KeyboardInterrupt; SIGTERM twice: termination). Handlers can be set only from the main
thread; elsewhere signals keep their previous handling.
"""
from __future__ import annotations

import os
import signal
import threading
import time

import jax
from jax.experimental import multihost_utils
import numpy as np

SIGNALS = (signal.SIGTERM, signal.SIGINT)
DEADLINE = -1  # the cause code of the deadline (signals: their numbers)
DEADLINE_STATUS = 124  # as GNU ``timeout`` exits when its time limit ends the command


class Preempted(Exception):
  """Training stopped on a signal at ``step``, with a checkpoint of that step."""

  def __init__(self, message: str, step: int | None, signum: int | None):
    super().__init__(message)
    self.step, self.signum = step, signum

  @property
  def exit_status(self) -> int:
    """The shell's status of a process ended by the signal: 128 + its number (143, 130)."""
    return 128 + self.signum


class DeadlineReached(Preempted):
  """Training (or a command's remaining work) stopped at the deadline; ``step``: the step of
  the checkpoint written (None when nothing was training)."""

  def __init__(self, message: str, step: int | None = None):
    super().__init__(message, step, None)

  @property
  def exit_status(self) -> int:
    return DEADLINE_STATUS


class Signals:
  """SIGTERM / SIGINT handlers for ``with Signals(start) as stop:``; ``stop.stop_at(step)``.

  Args:
    start: the first step of this (possibly resumed) training; every process passes the same.
    deadline: a `time.time()` at which training stops (None: none).
  """

  def __init__(self, start: int = 0, deadline: float | None = None):
    self.start = start
    self.deadline = deadline
    self.received: int | None = None  # the first signal's number, or DEADLINE
    self._previous: dict[int, object] = {}
    self._mode = "local"
    self._notified = False  # the service was told of the deadline

  def __enter__(self) -> "Signals":
    if jax.distributed.is_initialized():
      try:
        multihost_utils.reached_preemption_sync_point(self.start)
        self._mode = "service"
      except RuntimeError:  # the service is switched off
        self._mode = "allgather" if jax.process_count() > 1 else "local"
    if self.deadline is not None and jax.process_count() > 1:  # process 0's, in every process
      left = multihost_utils.broadcast_one_to_all(np.float32(self.deadline - time.time()))
      self.deadline = time.time() + float(left)  # seconds left (a float32 of now is too coarse)
    if threading.current_thread() is threading.main_thread():
      # The service's own SIGTERM handler (in C++) stays in place: SIGINT is forwarded to it.
      for signum in (signal.SIGINT,) if self._mode == "service" else SIGNALS:
        self._previous[signum] = signal.signal(signum, self._handle)
    return self

  def __exit__(self, *exc) -> None:
    self._restore()

  def _restore(self) -> None:
    for signum, handler in self._previous.items():
      signal.signal(signum, handler)
    self._previous = {}

  def _handle(self, signum, frame) -> None:
    del frame
    if self.received is not None:  # the second signal: the previous handling, at once
      self._restore()
      signal.raise_signal(signum)
      return
    self.received = signum
    if self._mode == "service":
      os.kill(os.getpid(), signal.SIGTERM)  # to the service's handler, which tells every process

  def passed(self) -> bool:
    """Whether this process's clock is at or past the deadline."""
    return self.deadline is not None and time.time() >= self.deadline

  def stop_at(self, step: int) -> bool:
    """Whether every process stops after ``step`` (called once a step, by every process)."""
    if self._mode == "local":
      if self.received is None and self.passed():
        self.received = DEADLINE
      return self.received is not None
    if self._mode == "service":
      if self.passed() and not self._notified:  # as a SIGTERM: the service agrees on a step
        self._notified = True
        os.kill(os.getpid(), signal.SIGTERM)
      if multihost_utils.reached_preemption_sync_point(step):
        self.received = self.received or (DEADLINE if self.passed() else signal.SIGTERM)
        return True
      return False
    mine = self.received or (DEADLINE if self.passed() else 0)
    flags = np.asarray(multihost_utils.process_allgather(np.int32(mine)))
    if flags.any():
      self.received = self.received or int(flags[flags != 0][0])
      return True
    return False

  def too_late(self, seconds: float) -> bool:
    """Whether work of ``seconds`` started now would end past the deadline (process 0's
    answer, in every process; called by every process). When it would, the run stops at this
    step (`at_deadline`)."""
    if self.deadline is None:
      return False
    late = time.time() + seconds > self.deadline
    if jax.process_count() > 1:
      late = bool(multihost_utils.broadcast_one_to_all(np.int32(late)))
    if late:
      self.received = self.received or DEADLINE
    return late

  @property
  def at_deadline(self) -> bool:
    return self.received == DEADLINE

  @property
  def name(self) -> str:
    if self.received == DEADLINE:
      return "the deadline"
    return signal.Signals(self.received).name if self.received else "a signal"

