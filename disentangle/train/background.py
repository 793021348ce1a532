"""Evaluation beside training: at most one evaluation in flight, on one worker thread.

The trainer hands an evaluation over (`Evaluations.submit`: its step and a job that reads only
copies taken at that step) and goes on stepping; the job encodes, computes the metrics, writes
``eval/step_<n>.json``, the pictures, its ``metrics.jsonl`` lines and the kept best checkpoint.
The loop waits for it before the next hand-over, before a checkpoint of a later step (a resumed
run could not evaluate that step again), at the end and at a stop (signal, deadline). With
``background=False`` the job runs in the loop at the hand-over: the same job, the same files.

A thread, not a process: the job's work is XLA calls, numpy, scikit-learn and PIL, which release
the GIL for most of their time, and a process would have to rebuild the methods, the jitted
encoders and the evaluation data, and receive the parameters through a pipe.

**Order of ``metrics.jsonl``.** The lines the loop logs while an evaluation is in flight are held
(`write`) and written once it has finished, after its own lines: the file reads as when the
evaluation runs in the loop, whatever the timing.

**Kills.** ``pending`` (``<workdir>/eval_pending.json``, the file of the deadline's deferred
evaluation) names the step of the evaluation in flight; the job removes it when it has written
everything. A run killed during an evaluation whose step has a checkpoint finds the file on
resume and evaluates that step again first (the lines of that evaluation already written are
dropped, `writers.MetricWriter.truncate_after`); a run resumed from an earlier checkpoint
evaluates it again on its way.
"""
from __future__ import annotations

from concurrent import futures
import json
import pathlib
import time
from typing import Callable, Optional

from disentangle import atomic


class Evaluations:
  """The evaluation in flight (none or one) and the metrics lines held behind it.

  Args:
    background: run the jobs on a worker thread; False: in the caller, at `submit`.
    pending: the file naming the step of the evaluation in flight (process 0), or None.
  """

  def __init__(self, background: bool, pending: Optional[pathlib.Path]):
    self.background = background
    self.pending = pending
    self.seconds = 0.0  # how long the last finished evaluation took
    self.finished = 0  # evaluations finished in this process
    self._estimate: Optional[float] = None
    self._pool: Optional[futures.ThreadPoolExecutor] = None
    self._future: Optional[futures.Future] = None
    self._step: Optional[int] = None
    self._held: list[tuple] = []

  def submit(self, step: int, job: Callable[[], None]) -> None:
    """Waits for the evaluation in flight, then hands over ``job``, the evaluation of ``step``."""
    self.wait()
    if self.pending is not None:
      atomic.write_text(self.pending, json.dumps({"step": step}))
    if not self.background:
      self._run(job)
      return
    if self._pool is None:
      self._pool = futures.ThreadPoolExecutor(1, thread_name_prefix="evaluation")
    self._future, self._step = self._pool.submit(self._run, job), step

  def _run(self, job: Callable[[], None]) -> None:
    began = time.perf_counter()
    job()
    self.seconds = time.perf_counter() - began
    self.finished += 1
    if self.pending is not None:
      self.pending.unlink(missing_ok=True)

  def expected_seconds(self, estimate: Callable[[], float]) -> float:
    """How long the next evaluation should take: the last one's duration, or before the first
    of this process ``estimate()`` (`train.eval_duration`; called once, then kept)."""
    if self.finished:
      return self.seconds
    if self._estimate is None:
      self._estimate = float(estimate())
    return self._estimate

  def poll(self) -> None:
    """Finishes the evaluation in flight if it has ended (raising its exception)."""
    if self._future is not None and self._future.done():
      self._finish()

  def wait(self) -> None:
    """Waits for the evaluation in flight (raising its exception) and writes the held lines."""
    if self._future is not None:
      self._finish()

  def wait_before_checkpoint(self, step: int) -> None:
    """Waits for an evaluation of a step before ``step``: a run resumed from a checkpoint of
    ``step`` could not evaluate it again. One of ``step`` itself may go on (`pending`)."""
    if self._step is not None and self._step != step:
      self.wait()

  def write(self, writer, step: int, metrics: dict) -> None:
    """``writer.write(step, metrics)`` now, or after the evaluation in flight."""
    self.poll()
    if self._future is None:
      writer.write(step, metrics)
    else:
      self._held.append((writer, step, metrics))

  def _finish(self) -> None:
    future, self._future, self._step = self._future, None, None
    held, self._held = self._held, []
    future.result()
    for writer, step, metrics in held:
      writer.write(step, metrics)

  def close(self) -> None:
    """Waits for the evaluation in flight and stops the worker thread."""
    try:
      self.wait()
    finally:
      if self._pool is not None:
        self._pool.shutdown(wait=True)
        self._pool = None
