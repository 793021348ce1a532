"""A full disk: ENOSPC injected at the write layer (atomic writes, metrics lines, checkpoints)
stops with one line naming the path and the cause, keeps what was written before, and the same
run resumes once the space is back."""
import errno
import json
import logging
import os
import pathlib
import re
import subprocess
import sys

import jax
import numpy as np
from orbax.checkpoint._src.path import atomicity
import pytest

from disentangle import atomic
from disentangle.train import checkpoint
from disentangle.train import writers
from tests import helpers

ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _full(*args, **kwargs):
  raise ENOSPC


def test_atomic_write_on_a_full_disk_keeps_the_old_file(tmp_path, monkeypatch):
  path = tmp_path / "eval" / "step_10.json"
  atomic.write_text(path, "old")
  monkeypatch.setattr(os, "replace", _full)
  with pytest.raises(atomic.WriteError) as e:
    atomic.write_text(path, "new")
  assert str(e.value).startswith(f"cannot write {path}: No space left on device (ENOSPC)")
  assert "\n" not in str(e.value) and e.value.errno == errno.ENOSPC
  monkeypatch.undo()
  assert path.read_text() == "old" and [p.name for p in path.parent.iterdir()] == ["step_10.json"]


def test_writer_failing_inside_replacing_is_named(tmp_path):
  def png_writer(tmp):
    tmp.write_bytes(b"\x89PNG half")
    raise OSError(errno.EIO, os.strerror(errno.EIO))
  with pytest.raises(atomic.WriteError, match=r"cannot write .*x\.png: .* \(EIO\)"):
    with atomic.replacing(tmp_path / "x.png") as tmp:
      png_writer(tmp)
  assert list(tmp_path.iterdir()) == []


def test_metrics_line_on_a_full_disk(tmp_path, monkeypatch):
  w = writers.MetricWriter(tmp_path, tensorboard=False)
  w.write(1, {"loss": 1.0})
  monkeypatch.setattr(writers, "open", _full, raising=False)
  with pytest.raises(atomic.WriteError, match=r"metrics\.jsonl: No space left on device"):
    w.write(2, {"loss": 2.0})
  monkeypatch.undo()
  assert [json.loads(l)["step"] for l in (tmp_path / "metrics.jsonl").read_text().splitlines()] \
      == [1]



def test_tensorboard_on_a_full_disk_is_one_line(tmp_path, monkeypatch):
  """The event file is written at each log step (readable at once); ENOSPC there is a
  WriteError naming the folder, not a dead writer thread."""
  from tensorboardX import record_writer  # pylint: disable=g-import-not-at-top
  w = writers.MetricWriter(tmp_path)
  w.write(2, {"loss": 1.5, "kl_per_dim": np.array([0.25, 0.5])})
  assert helpers.events(tmp_path / "tensorboard") == [(2, "loss", 1.5), (2, "kl_per_dim/0", 0.25),
                                               (2, "kl_per_dim/1", 0.5)]
  monkeypatch.setattr(record_writer.RecordWriter, "write", _full)
  with pytest.raises(atomic.WriteError) as e:
    w.write(4, {"loss": 1.0})
  assert str(e.value).startswith(f"cannot write {tmp_path / 'tensorboard'}: No space left on "
                                 "device (ENOSPC)") and "\n" not in str(e.value)
  monkeypatch.undo()
  assert [json.loads(l)["step"] for l in (tmp_path / "metrics.jsonl").read_text().splitlines()] \
      == [2, 4]


def test_checkpoint_on_a_full_disk_keeps_the_previous_one(tmp_path, monkeypatch):
  tree = {"a": np.arange(1000, dtype=np.float32)}
  ckpt = checkpoint.Checkpointer(tmp_path)
  ckpt.save(3, tree)
  monkeypatch.setattr(atomicity.AtomicRenameTemporaryPath, "finalize", _full)
  with pytest.raises(atomic.WriteError, match=r"checkpoint 6 in .*checkpoints: No space left"):
    ckpt.save(6, jax.tree_util.tree_map(lambda x: x + 1, tree))
  monkeypatch.undo()
  ckpt.close()
  ckpt = checkpoint.Checkpointer(tmp_path)  # the next start: step 3 intact, 6 saved afresh
  assert ckpt.all_steps() == [3]
  np.testing.assert_array_equal(ckpt.restore(tree)["a"], tree["a"])
  ckpt.save(6, jax.tree_util.tree_map(lambda x: x + 1, tree))
  assert ckpt.all_steps() == [3, 6]
  ckpt.close()


def _orbax_records():
  """The records orbax's failed writes produce: a save thread's exception (through absl); a write
  task's and the future gathering them's unretrieved exceptions, and a write task left
  unfinished (asyncio, when they are collected)."""
  try:
    raise OSError(errno.EFBIG, "File too large")
  except OSError:
    logging.getLogger("absl").error("_SignalingThread.run() raised an exception", exc_info=True)
  logging.getLogger("asyncio").error(
      "Task exception was never retrieved\nfuture: <Task finished coro=<async_serialize_from_host()"
      " done, defined at /site-packages/orbax/checkpoint/_src/serialization/serialization.py:126>>")
  logging.getLogger("asyncio").error(
      "Task was destroyed but it is pending!\ntask: <Task pending coro=<async_serialize_from_host()"
      " running at /site-packages/orbax/checkpoint/_src/serialization/serialization.py:190>>")
  logging.getLogger("asyncio").error(
      "_GatheringFuture exception was never retrieved\nfuture: <_GatheringFuture finished"
      " exception=ValueError('RESOURCE_EXHAUSTED: Error writing \"a/0\" in OCDBT database at"
      " local file \"/run/checkpoints/5.orbax-checkpoint-tmp/\"')>")


class _Records(logging.Handler):
  def __init__(self):
    super().__init__()
    self.messages = []

  def emit(self, record):
    self.messages.append(record.getMessage().splitlines()[0])


def test_a_failed_save_drops_its_threads_and_tasks_records_and_only_those(monkeypatch):
  """The writes' records are held during a save: passed on when it succeeds, dropped when it
  fails, and a failed save's tasks collected later are still dropped; other records pass."""
  records = _Records()
  logging.getLogger().addHandler(records)
  monkeypatch.setattr(logging.getLogger("asyncio"), "filters", [])
  try:
    quiet = checkpoint._QuietFailure()  # pylint: disable=protected-access
    _orbax_records()
    quiet.end(failed=False)  # the save succeeded
    assert records.messages == ["_SignalingThread.run() raised an exception",
                                "Task exception was never retrieved",
                                "Task was destroyed but it is pending!",
                                "_GatheringFuture exception was never retrieved"]
    records.messages.clear()
    quiet = checkpoint._QuietFailure()  # pylint: disable=protected-access
    _orbax_records()
    quiet.end(failed=True)  # the save failed (ENOSPC)
    assert records.messages == []
    _orbax_records()  # collected after the failed save returned
    logging.getLogger("asyncio").error("Task exception was never retrieved\nfuture: <Task other>")
    logging.getLogger("asyncio").error("Task was destroyed but it is pending!\ntask: <Task other>")
    logging.getLogger("asyncio").error(
        "_GatheringFuture exception was never retrieved\nfuture: <x>")
    assert records.messages == ["_SignalingThread.run() raised an exception",
                                "Task exception was never retrieved",
                                "Task was destroyed but it is pending!",
                                "_GatheringFuture exception was never retrieved"]
  finally:
    logging.getLogger().removeHandler(records)


@pytest.mark.slow
def test_command_line_full_disk_at_an_image_then_an_evaluation_write(tmp_path, monkeypatch):
  """The smoke command (run in this process, on one device; its exit status and whole stderr in
  a process of its own: the checkpoint test below): a picture cannot be written, then (the same
  command again) the evaluation JSON; each time exit status 2, one line naming the file and the
  cause, no traceback; the same command then completes, resumed (from checkpoint 5 at least).
  (The pictures of an evaluation are written before its JSON, so the second attempt reaches the
  JSON.)"""
  args = ["--config=experiments/configs/dsprites_betavae.py:smoke", "--config.num_steps=10",
          "--config.eval_every=10", "--config.checkpoint_every=5", "--config.batch_size=16",
          "--config.eval.num_points=500", "--config.eval.factor_score_votes=20",
          "--config.mesh.num_devices=1", f"--workdir={tmp_path / 'run'}"]
  real = os.replace
  for target in (".png", "eval/"):
    def replace(src, dst, *a, target=target, **k):
      if target in os.fspath(dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
      return real(src, dst, *a, **k)
    monkeypatch.setattr(os, "replace", replace)
    proc = helpers.run_in_process("experiments.dsprites_betavae", *args)
    monkeypatch.undo()
    errors = [l for l in re.split(r"[\r\n]", proc.stderr) if l.startswith("error:")]  # after the bar
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert len(errors) == 1 and target in errors[0] and "(ENOSPC)" in errors[0], errors
  proc = helpers.run_in_process("experiments.dsprites_betavae", *args)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "resumed from" in proc.stdout and "done:" in proc.stdout


_FILE_SIZE_CLI = r"""
import resource, runpy, signal, sys
limit = int(sys.argv.pop())  # the last argument: the largest file this process may write
if limit:  # a write past it fails (EFBIG) in whichever thread makes it, C++ ones included
  signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
  resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
runpy.run_module("experiments.dsprites_betavae", run_name="__main__")
"""
_ABSL_PREFIX = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ ")


def _stderr_lines(text: str) -> list[str]:
  """Non-empty lines of a stderr, absl's time and thread prefix cut."""
  return [_ABSL_PREFIX.sub(r"\1 ", l) for l in re.split(r"[\r\n]", text) if l.strip()]


def _mounted_tmpfs(folder: pathlib.Path, size: str) -> bool:
  """A ``size`` tmpfs mounted on ``folder`` (root only); False when it cannot be."""
  folder.mkdir(exist_ok=True)
  return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                        capture_output=True, check=False).returncode == 0


@pytest.mark.slow
def test_command_line_full_disk_at_a_checkpoint_is_the_error_line_alone(tmp_path):
  """The first checkpoint cannot be written by orbax's writer threads (tensorstore, in C++): the
  WHOLE stderr of the command is what a run that succeeds prints (the data's warnings) plus the
  one error line, without the threads' logs and tracebacks; exit status 2; the same command
  completes once the space is back. Two full disks in one folder: a 6 MB tmpfs (root only;
  unmounted after, the folder empty again), then any file past 1 MB failing (RLIMIT_FSIZE; only
  the checkpoint's data file is that large), after which the same command completes there."""
  repo = helpers.REPO
  workdir = tmp_path / "run"
  args = [sys.executable, "-c", _FILE_SIZE_CLI,
          "--config=experiments/configs/dsprites_betavae.py:smoke", "--config.num_steps=10",
          "--config.checkpoint_every=5", "--config.eval_every=10", "--config.batch_size=16",
          "--config.eval.num_points=500", "--config.eval.factor_score_votes=20",
          "--noconfig.progress_bar", f"--workdir={workdir}"]
  command = lambda limit: subprocess.run(args + [str(limit)], capture_output=True, text=True,  # noqa: E731
                                         cwd=repo, timeout=600, check=False)
  fulls = {}
  if _mounted_tmpfs(workdir, "6m"):
    try:
      fulls["No space left on device (ENOSPC)"] = command(0)
      subprocess.run(["umount", str(workdir)], check=True)
    finally:
      subprocess.run(["umount", str(workdir)], capture_output=True, check=False)
    assert list(workdir.iterdir()) == []
  fulls["File too large (EFBIG)"] = command(1 << 20)
  done = command(0)
  assert done.returncode == 0 and "done:" in done.stdout, done.stderr[-3000:]
  usual = [l for l in _stderr_lines(done.stderr)
           if ".orbax-checkpoint-tmp which already exists" not in l]  # the resumed run removes
  # the failed save's temporary folder, and says so
  for expected, full in fulls.items():
    assert full.returncode == 2, full.stderr[-3000:]
    lines = _stderr_lines(full.stderr)
    errors = [l for l in lines if l.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(
        f"error: cannot write checkpoint 5 in {workdir / 'checkpoints'}: "), lines
    assert expected in errors[0] and "\n" not in errors[0]
    assert [l for l in lines if l not in errors] == usual, full.stderr[-3000:]
