"""`writers.BackgroundWriter`: the files it writes on its thread equal those `MetricWriter` writes
in the caller, line for line; its flush syncs ``metrics.jsonl``; a write that fails on the thread
is the caller's one-line error at the next hand-over or flush."""
import errno
import json
import os
import threading

import numpy as np
import pytest

from disentangle import atomic
from disentangle.train import writers
from tests import helpers

ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _sequence():
  """(step, metrics) of a run's log steps: scalars, vectors, an integer, a NaN, an evaluation."""
  rng = np.random.default_rng(0)
  out = []
  for step in range(5, 105, 5):
    m = {"loss": np.float32(rng.normal()), "kl_per_dim": rng.normal(size=4).astype(np.float32),
         "steps_per_sec": float(rng.uniform(1, 100)), "count": np.int32(step)}
    if step == 50:
      m["loss"] = np.float32("nan")
    out.append((step, m))
    if step % 25 == 0:
      out.append((step, {"eval/mig": float(rng.uniform())}))
  return out


def _events(folder):
  """(step, tag, value as text, NaN equal to NaN) of every scalar in ``folder``'s event files."""
  return [(step, tag, repr(value)) for step, tag, value in
          helpers.events(folder)]


def test_background_files_equal_the_callers(tmp_path):
  """The same sequence through `MetricWriter.write` and `BackgroundWriter.write` (with a flush
  in the middle, as at a checkpoint, and an evaluation's `write_now`): ``metrics.jsonl`` byte for
  byte, the TensorBoard scalars event for event."""
  sync, background = tmp_path / "sync", tmp_path / "background"
  w = writers.MetricWriter(sync)
  for step, m in _sequence():
    w.write(step, m)
  w.close()
  b = writers.BackgroundWriter(writers.MetricWriter(background))
  for k, (step, m) in enumerate(_sequence()):
    if any(key.startswith("eval/") for key in m):
      b.write_now(step, m)  # after every line handed over before it
    else:
      b.write(step, m)
    if k == 10:
      b.flush()
  b.close()
  text = (sync / "metrics.jsonl").read_text()
  assert (background / "metrics.jsonl").read_text() == text
  assert len(text.splitlines()) == len(_sequence())
  events = _events(sync / "tensorboard")
  assert len(events) == 20 * 7 + 4 and "nan" in {e[2] for e in events}  # 7 scalars a step
  assert _events(background / "tensorboard") == events
  assert [t for t in threading.enumerate() if t.name == "metrics-writer"] == []


def test_flush_waits_for_the_lines_and_syncs_the_file(tmp_path, monkeypatch):
  """A line handed over is in the file once `flush` returns, and the file was fsync'ed after
  it was written (the writer's thread held back until the flush has begun)."""
  go = threading.Event()
  real_write = writers.MetricWriter.write

  def slow_write(self, step, metrics):
    assert go.wait(30)
    real_write(self, step, metrics)
  monkeypatch.setattr(writers.MetricWriter, "write", slow_write)
  synced = []
  real_fsync = os.fsync
  monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(
      os.path.realpath(f"/proc/self/fd/{fd}")), real_fsync(fd))[1])
  b = writers.BackgroundWriter(writers.MetricWriter(tmp_path, tensorboard=False))
  b.write(1, {"loss": 1.0})
  assert not (tmp_path / "metrics.jsonl").exists()  # handed over, not yet written
  threading.Timer(0.2, go.set).start()
  b.flush()
  assert [json.loads(l)["step"] for l in (tmp_path / "metrics.jsonl").read_text().splitlines()] \
      == [1]
  assert synced == [str((tmp_path / "metrics.jsonl").resolve())]
  b.close()


def test_a_failed_write_on_the_thread_is_the_next_hand_over_s_error(tmp_path, monkeypatch):
  """ENOSPC while the thread writes line 3: the next hand-over raises the one-line WriteError
  naming metrics.jsonl, and so does every flush and the close after it; lines 1-2 stay, nothing
  after line 3 is written (as when the loop stops at the error)."""
  b = writers.BackgroundWriter(writers.MetricWriter(tmp_path, tensorboard=False))
  b.write(1, {"loss": 1.0})
  b.write(2, {"loss": 2.0})
  b.flush()
  real_open = open

  def opener(path, mode="r", *args, **kwargs):
    if "a" in mode:
      raise ENOSPC
    return real_open(path, mode, *args, **kwargs)
  monkeypatch.setattr(writers, "open", opener, raising=False)
  b.write(3, {"loss": 3.0})
  b._drain()  # pylint: disable=protected-access  (the thread has tried line 3)
  monkeypatch.undo()
  with pytest.raises(atomic.WriteError) as e:
    b.write(4, {"loss": 4.0})
  assert str(e.value).startswith(f"cannot write {tmp_path / 'metrics.jsonl'}: No space left on "
                                 "device (ENOSPC)") and "\n" not in str(e.value)
  for again in (b.flush, b.close):
    with pytest.raises(atomic.WriteError, match="No space left on device"):
      again()
  assert [json.loads(l)["step"] for l in (tmp_path / "metrics.jsonl").read_text().splitlines()] \
      == [1, 2]
  assert [t for t in threading.enumerate() if t.name == "metrics-writer"] == []


def test_a_failed_tensorboard_write_on_the_thread_is_the_flush_s_error(tmp_path, monkeypatch):
  """The event file's ENOSPC on the thread: the flush raises the one-line WriteError naming the
  folder, as `MetricWriter.write` does in the caller."""
  from tensorboardX import record_writer  # pylint: disable=g-import-not-at-top
  b = writers.BackgroundWriter(writers.MetricWriter(tmp_path))
  monkeypatch.setattr(record_writer.RecordWriter, "write",
                      lambda *a, **k: (_ for _ in ()).throw(ENOSPC))
  b.write(2, {"loss": 1.5})
  with pytest.raises(atomic.WriteError) as e:
    b.flush()
  assert str(e.value).startswith(f"cannot write {tmp_path / 'tensorboard'}: No space left on "
                                 "device (ENOSPC)") and "\n" not in str(e.value)
  monkeypatch.undo()
  with pytest.raises(atomic.WriteError):
    b.close()
