"""Stopping a run cleanly on SIGTERM or SIGINT (a preemption notice, Ctrl-C).

`Signals` holds handlers for the duration of training (the previous ones come back after) and
says, between steps, whether the run stops at this step (`Signals.stop_at`); the trainer then
writes a checkpoint at that step, closes its writers and raises `Preempted`, and the same
command resumes from there, bitwise.

- **One process**: a signal sets a flag that the host reads between steps (no device work).
- **Several processes** (``jax.distributed``): all must stop at the same step, since the
  checkpoint is written collectively. JAX's preemption service
  (`jax.experimental.multihost_utils.reached_preemption_sync_point`, on by default) catches
  SIGTERM in every process and agrees on a step a little past the notice (the largest step any
  process has reached, plus a margin); it answers True at that step in every process. SIGINT is
  forwarded to it as a SIGTERM of the same process. With the service switched off
  (``jax_enable_preemption_service=False``) the processes exchange their flags at every step
  (`multihost_utils.process_allgather`, one small collective a step).

A second signal while stopping restores the previous handlers and is delivered again (Ctrl-C
twice: KeyboardInterrupt; SIGTERM twice: termination). Handlers can be set only from the main
thread; elsewhere signals keep their previous handling.
"""
from __future__ import annotations

import os
import signal
import threading

import jax
from jax.experimental import multihost_utils
import numpy as np

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Preempted(Exception):
  """Training stopped on a signal at ``step``, with a checkpoint of that step."""

  def __init__(self, message: str, step: int, signum: int):
    super().__init__(message)
    self.step, self.signum = step, signum

  @property
  def exit_status(self) -> int:
    """The shell's status of a process ended by the signal: 128 + its number (143, 130)."""
    return 128 + self.signum


class Signals:
  """SIGTERM / SIGINT handlers for ``with Signals(start) as stop:``; ``stop.stop_at(step)``.

  Args:
    start: the first step of this (possibly resumed) training; every process passes the same.
  """

  def __init__(self, start: int = 0):
    self.start = start
    self.received: int | None = None  # the first signal's number
    self._previous: dict[int, object] = {}
    self._mode = "local"

  def __enter__(self) -> "Signals":
    if jax.distributed.is_initialized():
      try:
        multihost_utils.reached_preemption_sync_point(self.start)
        self._mode = "service"
      except RuntimeError:  # the service is switched off
        self._mode = "allgather" if jax.process_count() > 1 else "local"
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

  def stop_at(self, step: int) -> bool:
    """Whether every process stops after ``step`` (called once a step, by every process)."""
    if self._mode == "local":
      return self.received is not None
    if self._mode == "service":
      if multihost_utils.reached_preemption_sync_point(step):
        self.received = self.received or signal.SIGTERM
        return True
      return False
    flags = np.asarray(multihost_utils.process_allgather(np.int32(self.received or 0)))
    if flags.any():
      self.received = self.received or int(flags[flags != 0][0])
      return True
    return False

  @property
  def name(self) -> str:
    return signal.Signals(self.received).name if self.received else "a signal"

