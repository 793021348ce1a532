"""Run-directory writers: ``metrics.jsonl`` (one JSON object per log step) and TensorBoard.

Only process 0 writes. Vector metrics (e.g. ``kl_per_dim``) are stored as lists in JSON and as
``name/j`` scalars in TensorBoard. The TensorBoard event file is written and flushed at each log
step in the calling thread (tensorboardX's file format, without its writer thread), so that a
failed write (a full disk) is one `atomic.WriteError` like any other file of the run.

**On a bucket** (a ``gs://`` workdir) an object cannot be appended to: each `MetricWriter.write`
uploads the whole ``metrics.jsonl`` again (the lines kept in memory, read once from the object
when the writer starts), one atomic object write, so a reader sees the file as of the last
complete write, with the same lines, in the same order, as a local run's file; a kill loses only
the line being written, which the resumed run writes again. The TensorBoard events are written
to a local file (tensorboardX's format) and that file is uploaded whole after each log step (and
on close) to an object of the same name in ``tensorboard/``.
"""
from __future__ import annotations

import json
import math
import shutil
import tempfile
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

  def close(self) -> None:
    if self._tb is not None:
      self._tb.close()


def _complete(line: str) -> bool:
  try:
    json.loads(line)
  except json.JSONDecodeError:
    return False
  return True


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
