"""Run-directory writers: ``metrics.jsonl`` (one JSON object per log step) and TensorBoard.

Only process 0 writes. Vector metrics (e.g. ``kl_per_dim``) are stored as lists in JSON and as
``name/j`` scalars in TensorBoard. `MetricWriter.write` appends the line and writes and flushes
(fsync) the TensorBoard event file in the thread that calls it (tensorboardX's file format,
without its writer thread), so that a failed write (a full disk) is one `atomic.WriteError` like
any other file of the run.

**On a bucket** (a ``gs://`` workdir) an object cannot be appended to: each `MetricWriter.write`
uploads the whole ``metrics.jsonl`` again (the lines kept in memory, read once from the object
when the writer starts), one atomic object write, so a reader sees the file as of the last
complete write, with the same lines, in the same order, as a local run's file; a kill loses only
the line being written, which the resumed run writes again. The TensorBoard events are written
to a local file (tensorboardX's format) and that file is uploaded whole after each log step (and
on close) to an object of the same name in ``tensorboard/``.

**In the background** (`BackgroundWriter`, the trainer's): the loop only hands each line over; one
thread per writer writes them, in order, with `MetricWriter.write`, so the files equal those
written in the loop line for line. `BackgroundWriter.flush` (the trainer's, before each checkpoint, at a stop and at the end)
returns once every line handed over is written and ``metrics.jsonl`` is on the disk (fsync; the
event file is synced at each write): a checkpoint is started only after the lines of its steps
are durable, so that a resumed run (`MetricWriter.truncate_after`) finds them. A write that
fails on the thread stops the thread's writing and is raised, the same one-line
`atomic.WriteError`, in the caller at the next hand-over, flush or close (and at each one after).
On a bucket the lines are written in the caller as before (each one an upload of the whole
object and of the event file): a run killed there keeps every line handed over.
"""
from __future__ import annotations

import json
import math
import queue
import shutil
import tempfile
import threading
import time

import numpy as np

from disentangle import atomic
from disentangle import paths


def _jsonable(v):
  a = np.asarray(v)
  if a.ndim == 0:
    x = a.item()
    return x if not isinstance(x, float) or math.isfinite(x) else str(x)
  return [_jsonable(e) for e in a]


class MetricWriter:
  """Append-only JSON lines plus TensorBoard scalars (tensorboardX, no TensorFlow needed)."""

  def __init__(self, workdir, *, enabled: bool = True, tensorboard: bool = True):
    self.enabled = enabled
    self.path = paths.as_path(workdir) / "metrics.jsonl"
    self._lines = None  # on a bucket: the file's lines (None: not read yet)
    self._tb = None
    if enabled and tensorboard:
      try:
        self._tb = _TensorBoard(paths.as_path(workdir) / "tensorboard")
      except ImportError:
        self._tb = None

  def truncate_after(self, step: int, evaluated: int | None = None) -> None:
    """On resume, drop lines logged after the restored checkpoint (they will be logged again),
    and the evaluation lines (``eval/...`` values only) of step ``evaluated``, evaluated again."""
    if not self.enabled or not self.path.exists():
      self._lines = [] if paths.is_remote(self.path) else None
      return
    kept = []
    for line in self.path.read_text().splitlines():
      try:
        record = json.loads(line)
      except json.JSONDecodeError:
        continue  # a line cut by a kill
      again = record.get("step") == evaluated and all(
          k == "step" or k.startswith("eval/") for k in record)
      if record.get("step", -1) <= step and not again:
        kept.append(line)
    atomic.write_text(self.path, "".join(l + "\n" for l in kept))
    if paths.is_remote(self.path):
      self._lines = kept

  def write(self, step: int, metrics: dict) -> None:
    if not self.enabled:
      return
    record = {"step": int(step)}
    record.update({k: _jsonable(v) for k, v in metrics.items()})
    if paths.is_remote(self.path):
      self._append_object(json.dumps(record))
    else:
      try:  # a line cut by a full disk is dropped on resume (`truncate_after`)
        with open(self.path, "a") as f:
          f.write(json.dumps(record) + "\n")
      except OSError as e:
        raise atomic.write_error(self.path, e) from e
    if self._tb is not None:
      scalars = []
      for k, v in metrics.items():
        a = np.asarray(v, dtype=np.float64) if np.asarray(v).dtype != object else None
        if a is None:
          continue
        if a.ndim == 0:
          scalars.append((k, float(a)))
        elif a.ndim == 1 and a.size <= 64:
          scalars += [(f"{k}/{j}", float(x)) for j, x in enumerate(a)]
      self._tb.write(int(step), scalars)

  def _append_object(self, line: str) -> None:
    """On a bucket: the object rewritten whole with ``line`` after the lines before."""
    if self._lines is None:
      text = self.path.read_text() if self.path.exists() else ""
      self._lines = [l for l in text.splitlines() if _complete(l)]
    atomic.write_text(self.path, "".join(l + "\n" for l in self._lines + [line]))
    self._lines.append(line)

  def sync(self) -> None:
    """``metrics.jsonl`` on the disk (fsync); the TensorBoard file is synced at each `write`. On
    a bucket each write is already a whole object: nothing to do."""
    if not self.enabled or paths.is_remote(self.path) or not self.path.exists():
      return
    try:
      atomic.fsync(self.path)
    except OSError as e:
      raise atomic.write_error(self.path, e) from e

  def close(self) -> None:
    if self._tb is not None:
      self._tb.close()


class BackgroundWriter:
  """A `MetricWriter` written on its own thread (module docstring; on a bucket, in the caller):
  `write` hands a line over; `flush` waits for every line handed over to be written and synced;
  `write_now` writes in the caller after those (an evaluation's lines, on its thread).

  ``metrics`` handed over must not change afterwards (the trainer's are host copies).
  """

  def __init__(self, writer: MetricWriter):
    self.writer = writer
    self.enabled = writer.enabled
    # On a bucket every line is written in the caller, as by `MetricWriter` (module docstring).
    self.background = not paths.is_remote(writer.path)
    self._queue: queue.Queue = queue.Queue()
    self._thread: threading.Thread | None = None
    self._error: BaseException | None = None  # the thread's failed write: nothing more written

  @property
  def path(self):
    return self.writer.path

  def truncate_after(self, step: int, evaluated: int | None = None) -> None:
    """`MetricWriter.truncate_after`, in the caller (before any line is handed over)."""
    self.flush()
    self.writer.truncate_after(step, evaluated)

  def write(self, step: int, metrics: dict) -> None:
    """Hands the line of ``step`` over to the thread; raises the error of an earlier write."""
    self._raise()
    if not self.enabled:
      return
    if not self.background:
      self.writer.write(step, metrics)
      return
    if self._thread is None:
      self._thread = threading.Thread(target=self._run, name="metrics-writer", daemon=True)
      self._thread.start()
    self._queue.put((step, metrics))

  def write_now(self, step: int, metrics: dict) -> None:
    """Writes the line of ``step`` in the caller, after every line handed over before."""
    self._drain()
    self._raise()
    self.writer.write(step, metrics)

  def flush(self) -> None:
    """Returns once every line handed over is written and ``metrics.jsonl`` is synced; raises
    the error of a failed write (one line, `atomic.WriteError`)."""
    self._drain()
    self._raise()
    self.writer.sync()

  def close(self) -> None:
    """Flushes, stops the thread and closes the writer (the TensorBoard file); the writer is
    closed even when the flush fails."""
    try:
      self.flush()
    finally:
      if self._thread is not None:
        self._queue.put(None)
        self._thread.join()
        self._thread = None
      self.writer.close()

  def _drain(self) -> None:
    if self._thread is not None:
      self._queue.join()

  def _raise(self) -> None:
    if self._error is not None:
      raise self._error

  def _run(self) -> None:
    while True:
      item = self._queue.get()
      try:
        if item is None:
          return
        if self._error is None:
          try:
            self.writer.write(*item)
          except BaseException as e:  # pylint: disable=broad-except  (raised in the caller)
            self._error = e
      finally:
        self._queue.task_done()


def _complete(line: str) -> bool:
  try:
    json.loads(line)
  except json.JSONDecodeError:
    return False
  return True


def read_tensorboard(folder) -> list[tuple[int, str, float]]:
  """(step, tag, value) of every scalar in the TensorBoard event files of ``folder`` (a run's
  ``tensorboard/``), in the order written; read without TensorBoard (TFRecord: length, its CRC,
  the ``Event`` proto, its CRC)."""
  from tensorboardX.proto import event_pb2  # pylint: disable=g-import-not-at-top
  out = []
  for path in sorted(paths.as_path(folder).iterdir()):
    data, i = path.read_bytes(), 0
    while i < len(data):
      n = int.from_bytes(data[i:i + 8], "little")
      event = event_pb2.Event.FromString(data[i + 12:i + 12 + n])
      out += [(event.step, v.tag, v.simple_value) for v in event.summary.value]
      i += 12 + n + 4
  return out


class _TensorBoard:
  """Scalars in a TensorBoard event file (tensorboardX's), written and flushed synchronously."""

  def __init__(self, folder):
    from tensorboardX import event_file_writer  # pylint: disable=g-import-not-at-top
    from tensorboardX import summary  # pylint: disable=g-import-not-at-top
    from tensorboardX.proto import event_pb2  # pylint: disable=g-import-not-at-top
    self.folder, self._summary, self._event = folder, summary, event_pb2.Event
    # On a bucket: the file is written in a local folder and uploaded whole (`_upload`).
    self._staging = tempfile.mkdtemp(prefix=".tensorboard.") if paths.is_remote(folder) else None
    try:
      local = self.folder if self._staging is None else paths.as_path(self._staging)
      local.mkdir(parents=True, exist_ok=True)
      self._writer = event_file_writer.EventsWriter(str(local / "events"))
    except OSError as e:
      raise atomic.write_error(folder, e) from e

  def write(self, step: int, scalars: list[tuple[str, float]]) -> None:
    try:
      for tag, value in scalars:
        self._writer.write_event(self._event(wall_time=time.time(), step=step,
                                             summary=self._summary.scalar(tag, value)))
      self._writer.flush()
    except OSError as e:
      raise atomic.write_error(self.folder, e) from e
    self._upload()

  def _upload(self) -> None:
    """On a bucket: the local events file, whole, onto its object."""
    if self._staging is not None:
      local = paths.as_path(self._writer._file_name)  # pylint: disable=protected-access
      atomic.write_bytes(self.folder / local.name, local.read_bytes())

  def close(self) -> None:
    try:
      self._writer.close()
    except OSError as e:
      raise atomic.write_error(self.folder, e) from e
    try:
      self._upload()
    finally:
      if self._staging is not None:
        shutil.rmtree(self._staging, ignore_errors=True)
