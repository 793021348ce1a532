"""Damaged checkpoints: every file's checksum is written before a step is complete and checked
before it is restored, the restored state is checked finite; the newest checkpoint that passes
is used, the skipped ones are named in one line and kept aside; when none passes, one line and
nothing changes."""
import asyncio
import gc
import hashlib
import json
import logging
import os
import pathlib
import shutil
import sys

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from disentangle import paths
from disentangle.train import checkpoint
from disentangle.train import integrity
from tests import faults
from tests import helpers

TREE = {"a": np.arange(100_000, dtype=np.float32), "b": {"c": np.ones((3, 4), np.float32)}}


def _tree(step):
  return jax.tree_util.tree_map(lambda x: x + step, TREE)


def _saved(root, steps=(200, 300), **kwargs):
  ckpt = checkpoint.Checkpointer(root, **kwargs)
  for s in steps:
    if kwargs.get("with_record"):
      ckpt.save(s, _tree(s), {"step": s})
    else:
      ckpt.save(s, _tree(s))
  ckpt.close()
  return root / kwargs.get("subdir", "checkpoints")


def _largest(folder):
  return max((p for p in folder.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)


def truncate(folder):
  """The largest data file of a step cut to 1,000 bytes (as a kill mid-copy or a full disk)."""
  path = _largest(folder)
  path.write_bytes(path.read_bytes()[:1000])


def drop_item(folder):
  """A data file of a step removed."""
  _largest(folder).unlink()


def other_tree(root):
  """Step 300 rewritten with another tree (a leaf renamed)."""
  ckpt = checkpoint.Checkpointer(root / "other")
  ckpt.save(300, {"a": TREE["a"], "b": {"d": TREE["b"]["c"]}})
  ckpt.close()
  target = root / "checkpoints" / "300"
  for p in sorted(target.rglob("*"), reverse=True):
    p.unlink() if p.is_file() else p.rmdir()
  (root / "other" / "checkpoints" / "300").rename(target)


def legacy(step_dir):
  """The step as a checkpoint saved before checksums existed: no ``checksums.json`` and no
  mention of it in its orbax metadata."""
  (step_dir / integrity.NAME).unlink()
  meta = step_dir / "_CHECKPOINT_METADATA"
  record = json.loads(meta.read_text())
  record["custom_metadata"] = {}
  meta.write_text(json.dumps(record))
  return step_dir


def _digest(folder):
  return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
          for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("corrupt", ["truncate", "drop_item", "other_tree"])
def test_newest_restorable_is_used_and_the_skipped_one_kept_aside(tmp_path, capsys, corrupt):
  folder = _saved(tmp_path)
  if corrupt == "other_tree":
    other_tree(tmp_path)
  else:
    {"truncate": truncate, "drop_item": drop_item}[corrupt](folder / "300")
  broken = _digest(folder / "300")
  ckpt = checkpoint.Checkpointer(tmp_path)
  state = ckpt.restore(TREE)
  assert ckpt.restored_step == 200
  jax.tree_util.tree_map(np.testing.assert_array_equal, state, _tree(200))
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and "checkpoint 300" in err[0] and str(folder) in err[0], err
  assert "using step 200" in err[0]
  aside = tmp_path / "checkpoints_skipped" / "300"
  assert _digest(aside) == broken  # kept, byte for byte
  assert ckpt.all_steps() == [200]
  ckpt.save(300, _tree(300))  # the resumed run writes the step again
  assert ckpt.all_steps() == [200, 300]
  jax.tree_util.tree_map(np.testing.assert_array_equal, ckpt.restore(TREE), _tree(300))
  ckpt.close()


def test_a_step_skipped_twice_is_kept_twice(tmp_path, capsys):
  folder = _saved(tmp_path)
  for _ in range(2):
    truncate(folder / "300")
    ckpt = checkpoint.Checkpointer(tmp_path)
    ckpt.restore(TREE)
    ckpt.save(300, _tree(300))
    ckpt.close()
  capsys.readouterr()
  assert sorted(p.name for p in (tmp_path / "checkpoints_skipped").iterdir()) == ["300", "300-1"]


def test_none_restorable_is_one_line_and_nothing_changes(tmp_path):
  folder = _saved(tmp_path)
  truncate(folder / "300")
  drop_item(folder / "200")
  before = _digest(tmp_path)
  ckpt = checkpoint.Checkpointer(tmp_path)
  with pytest.raises(checkpoint.CheckpointError) as e:
    ckpt.restore(TREE)
  ckpt.close()
  message = str(e.value)
  assert "\n" not in message and str(folder) in message and "300, 200" in message
  assert "nothing was changed: to start over, move" in message
  assert _digest(tmp_path) == before and not (tmp_path / "checkpoints_skipped").exists()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
  """A run folder with checkpoints 200 and 300 (with checksums), saved once per module."""
  root = tmp_path_factory.mktemp("pristine")
  _saved(root)
  return root


@pytest.mark.parametrize("kind,how", [(k, h) for k in faults.FILE_KINDS for h in faults.DAMAGES])
def test_a_damaged_file_of_the_latest_checkpoint_is_never_restored(tmp_path, capsys, pristine,
                                                                   kind, how):
  """Each kind of file of checkpoint 300 flipped, truncated, emptied or deleted: the restore
  returns checkpoint 200's state exactly, with one warning naming checkpoint 300 and the file."""
  shutil.copytree(pristine, tmp_path, dirs_exist_ok=True)
  step_dir = tmp_path / "checkpoints" / "300"
  rel = faults.damage(step_dir, kind, how).relative_to(step_dir).as_posix()
  ckpt = checkpoint.Checkpointer(tmp_path)
  state = ckpt.restore(TREE)
  ckpt.close()
  assert ckpt.restored_step == 200
  jax.tree_util.tree_map(np.testing.assert_array_equal, state, _tree(200))
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and f"checkpoint 300 in {tmp_path / 'checkpoints'}" in err[0], err
  assert f"({rel} " in err[0] and "using step 200" in err[0], err


def test_checksums_are_written_after_the_files_and_before_the_step_is_complete(tmp_path,
                                                                               monkeypatch):
  """When orbax marks the step complete (renames its temporary folder), ``checksums.json`` is
  there and lists every other file of the step with its size and SHA-256; the step's metadata
  says it was written."""
  seen = []
  base = ocp.path.atomicity.AtomicRenameTemporaryPath.finalize

  async def spying(self):
    if self.get_final().name.isdigit():
      seen.append(sorted(p.name for p in pathlib.Path(self.get()).iterdir()))
    return await base(self)

  monkeypatch.setattr(ocp.path.atomicity.AtomicRenameTemporaryPath, "finalize", spying)
  step_dir = _saved(tmp_path, steps=(200,), asynchronous=True) / "200"
  assert len(seen) == 1 and integrity.NAME in seen[0] and "commit_success.txt" not in seen[0]
  listed = json.loads((step_dir / integrity.NAME).read_text())["files"]
  files = {p.relative_to(step_dir).as_posix(): p for p in step_dir.rglob("*") if p.is_file()}
  assert sorted(listed) == sorted(set(files) - {integrity.NAME, "commit_success.txt"})
  for rel, entry in listed.items():
    data = files[rel].read_bytes()
    assert entry == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}, rel
  meta = json.loads((step_dir / "_CHECKPOINT_METADATA").read_text())
  assert meta["custom_metadata"] == integrity.CLAIM
  assert integrity.verify(step_dir) == integrity.CHECKED


@pytest.mark.parametrize("with_checksums", [True, False])
def test_a_non_finite_state_is_skipped_and_one_saved_before_checksums_still_restores(
    tmp_path, capsys, with_checksums):
  """A checkpoint holding NaN (with checksums, or saved before them) is skipped with one line
  naming the leaf; a checkpoint saved before checksums that is finite restores unchanged."""
  folder = _saved(tmp_path)
  ckpt = checkpoint.Checkpointer(tmp_path)
  ckpt.save(400, {"a": TREE["a"], "b": {"c": np.full((3, 4), np.nan, np.float32)}})
  ckpt.close()
  if not with_checksums:
    for s in (300, 400):  # (keep=2 dropped 200)
      legacy(folder / str(s))
  ckpt = checkpoint.Checkpointer(tmp_path)
  state = ckpt.restore(TREE)
  ckpt.close()
  assert ckpt.restored_step == 300
  jax.tree_util.tree_map(np.testing.assert_array_equal, state, _tree(300))
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and "checkpoint 400" in err[0], err
  assert "the restored state holds NaN/Inf at ['b']['c']" in err[0], err
  assert integrity.verify(folder / "300") == (
      integrity.CHECKED if with_checksums else integrity.LEGACY)


def test_a_checkpoint_on_a_bucket_is_verified_as_on_a_disk(bucket, capsys):
  """On a bucket: the checksums object is written with each step; a step with flipped bytes is
  skipped with one line naming it, and the one before it is restored."""
  for s in (200, 300):
    ckpt = checkpoint.Checkpointer(bucket)
    ckpt.save(s, _tree(s))
    ckpt.close()
  fs, _ = paths.filesystem(bucket)
  fs.invalidate_cache()
  root = f"{bucket}/checkpoints/300"
  listed = json.loads(fs.cat_file(f"{root}/{integrity.NAME}"))["files"]
  assert "commit_success.txt" not in listed and "_CHECKPOINT_METADATA" in listed
  largest = max(listed, key=lambda rel: listed[rel]["size"])
  data = fs.cat_file(f"{root}/{largest}")
  fs.pipe_file(f"{root}/{largest}", data[:100] + bytes(b ^ 0xFF for b in data[100:4196])
               + data[4196:])
  ckpt = checkpoint.Checkpointer(bucket, read_only=True)
  state = ckpt.restore(TREE)
  ckpt.close()
  assert ckpt.restored_step == 200
  jax.tree_util.tree_map(np.testing.assert_array_equal, state, _tree(200))
  err = capsys.readouterr().err
  assert "checkpoint 300" in err and f"({largest} differs from when saved" in err, err


class _EndsLate:
  """Calls ``late`` when collected, as tensorstore's callbacks do: what it raises is an
  unraisable exception (`sys.unraisablehook`)."""

  def __init__(self, late):
    self.late = late

  def __del__(self):
    self.late()


class _Suspend:
  def __await__(self):
    yield


# A read as orbax's serialization writes it: closed unfinished, it raises an error of its own.
_READ = """
async def read(suspend):
  try:
    await suspend
  except BaseException as e:
    raise Exception("Encountered error while reading array index") from e
"""


def _orbax_read():
  """A coroutine of a module in an ``orbax`` folder, suspended in its read."""
  namespace = {}
  exec(compile(_READ, os.path.join(os.sep, "site-packages", "orbax", "checkpoint", "read.py"),
               "exec"), namespace)  # pylint: disable=exec-used
  coroutine = namespace["read"](_Suspend())
  coroutine.send(None)
  return coroutine


def test_a_failed_restores_reads_in_flight_end_quietly_and_nothing_else_does(
    tmp_path, capsys, caplog, monkeypatch):
  """A restore that fails (a truncated file) leaves its other reads in flight: their callbacks
  into orbax's closed event loop, their coroutines collected unfinished and asyncio's records of
  their unretrieved errors, whenever they come, are dropped; other unraisable exceptions and
  records are not. The skipped checkpoint is one line."""
  unraisable = []
  monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
  monkeypatch.setattr(logging.getLogger("asyncio"), "filters", [])
  truncate(legacy(_saved(tmp_path) / "300"))  # no checksums: the failure is orbax's read
  ckpt = checkpoint.Checkpointer(tmp_path)
  ckpt.restore(TREE)
  ckpt.close()
  assert len(capsys.readouterr().err.strip().splitlines()) == 1
  closed = asyncio.new_event_loop()
  closed.close()
  _EndsLate(lambda: closed.call_soon_threadsafe(print))  # a read ending after the restore
  _orbax_read()  # a read collected unfinished
  _EndsLate(lambda: 1 / 0)  # something else
  gc.collect()
  assert [type(u.exc_value).__name__ for u in unraisable] == ["ZeroDivisionError"]
  asyncio_log = logging.getLogger("asyncio")
  asyncio_log.error("Future exception was never retrieved\nfuture: <Future finished exception="
                    "ValueError('OUT_OF_RANGE: Error reading \"a/0\" in OCDBT database at local "
                    "file \"/run/checkpoints/300/default/\"')>")
  asyncio_log.error("Future exception was never retrieved\nfuture: <Future other>")
  assert [r.getMessage().splitlines()[1] for r in caplog.records] == [
      "future: <Future other>"]


def test_read_only_skips_without_moving(tmp_path, capsys):
  folder = _saved(tmp_path)
  truncate(folder / "300")
  before = _digest(tmp_path)
  ckpt = checkpoint.Checkpointer(tmp_path, read_only=True)
  jax.tree_util.tree_map(np.testing.assert_array_equal, ckpt.restore(TREE), _tree(200))
  ckpt.close()
  err = capsys.readouterr().err
  assert "left in place (read-only)" in err and "checkpoint 300" in err
  assert _digest(tmp_path) == before


def test_an_asked_step_that_does_not_restore_is_one_line(tmp_path):
  folder = _saved(tmp_path)
  truncate(folder / "300")
  ckpt = checkpoint.Checkpointer(tmp_path, read_only=True)
  with pytest.raises(checkpoint.CheckpointError, match=r"checkpoint 300 in .* cannot be restored"):
    ckpt.restore(TREE, step=300)
  jax.tree_util.tree_map(np.testing.assert_array_equal, ckpt.restore(TREE, step=200), _tree(200))
  ckpt.close()


def test_kept_slot_record_and_state(tmp_path, capsys):
  """The selected slot (`checkpoints_best`): a record that does not read is skipped like a state;
  with no readable record, one line."""
  folder = _saved(tmp_path, subdir="checkpoints_best", with_record=True, keep=2)
  record = next((folder / "300").rglob("*record*/*")) if list((folder / "300").rglob(
      "*record*/*")) else None
  assert record is not None, sorted((folder / "300").rglob("*"))
  for p in (folder / "300").rglob("*"):
    if "record" in str(p.relative_to(folder / "300")) and p.is_file():
      p.write_bytes(b"{not json")
  ckpt = checkpoint.Checkpointer(tmp_path, subdir="checkpoints_best", with_record=True, keep=1)
  assert ckpt.record() == {"step": 200}
  assert "checkpoint 300" in capsys.readouterr().err
  assert (tmp_path / "checkpoints_best_skipped" / "300").is_dir()
  ckpt.close()
  truncate(folder / "200")
  ckpt = checkpoint.Checkpointer(tmp_path, subdir="checkpoints_best", with_record=True,
                                 read_only=True)
  with pytest.raises(checkpoint.CheckpointError, match="checkpoints_best"):
    ckpt.restore(TREE, step=200)
  ckpt.close()


@pytest.mark.slow
def test_training_resumes_from_the_newest_intact_checkpoint(tmp_path, capsys):
  """A run with checkpoints at 3 and 6 whose step-6 checkpoint has 4,096 bytes of its data
  flipped, continued to 9, resumes from 3 and ends bitwise where a straight run to 9 ends."""
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  data = helpers.TinyImages()
  config = helpers.tiny_config(**{"mesh.num_devices": 1, "num_steps": 9})
  straight = trainer.train(config, tmp_path / "a", dataset=data)
  short = helpers.tiny_config(**{"mesh.num_devices": 1, "num_steps": 6})
  trainer.train(short, tmp_path / "b", dataset=data)
  faults.damage(tmp_path / "b" / "checkpoints" / "6", "data", "flip")
  capsys.readouterr()
  resumed = trainer.train(config, tmp_path / "b", dataset=data)
  captured = capsys.readouterr()
  assert "checkpoint 6" in captured.err and "using step 3" in captured.err
  assert "differs from when saved" in captured.err
  assert "at step 3" in captured.out
  for a, b in zip(jax.tree_util.tree_leaves(straight.params),
                  jax.tree_util.tree_leaves(resumed.params)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert (tmp_path / "b" / "checkpoints_skipped" / "6").is_dir()
  lines = lambda run: [  # noqa: E731
      {k: v for k, v in json.loads(l).items() if k != "steps_per_sec"}
      for l in (tmp_path / run / "metrics.jsonl").read_text().splitlines()]
  assert lines("b") == lines("a")  # the lines after step 3 were dropped and logged again

  # experiments.evaluate's restore (read-only): step 9 emptied, step 6 evaluated, nothing moved;
  # the table command (reproduce) does not count the run finished.
  from disentangle import methods  # pylint: disable=g-import-not-at-top
  from disentangle.evaluation import evaluate_run  # pylint: disable=g-import-not-at-top
  faults.damage(tmp_path / "b" / "checkpoints" / "9", "data", "zero_length")
  before = _digest(tmp_path / "b")
  saved, _ = evaluate_run.locate_run(tmp_path / "b")
  params, facts = evaluate_run.restore_params(
      tmp_path / "b", saved, methods.build(saved, data.image_shape))
  assert facts["step"] == 6 and facts["latest_step"] == 9
  assert "checkpoint 9" in capsys.readouterr().err
  assert _digest(tmp_path / "b") == before
  from disentangle.reproduce import run as reproduce_run  # pylint: disable=g-import-not-at-top
  assert not reproduce_run.finished(tmp_path / "b", saved)  # (its num_steps: 9)
  with pytest.raises(checkpoint.CheckpointError, match="checkpoint 9 in"):
    evaluate_run.restore_params(tmp_path / "b", saved, methods.build(saved, data.image_shape), 9)
  assert len(jax.tree_util.tree_leaves(params[0])) == len(jax.tree_util.tree_leaves(
      resumed.params))


@pytest.mark.slow
def test_launch_prints_one_line_when_no_checkpoint_restores(tmp_path):
  """The command line (its entry point in this process): both checkpoints damaged (bytes flipped,
  a file emptied), exit status 2, one line naming the folder and what to do, nothing changed."""
  folder = _saved(tmp_path / "run")
  faults.damage(folder / "300", "data", "flip")
  faults.damage(folder / "200", "array_metadata", "zero_length")
  before = _digest(tmp_path)
  proc = helpers.run_in_process(
      "experiments.dsprites_betavae", f"--workdir={tmp_path / 'run'}",
      "--config=experiments/configs/dsprites_betavae.py:smoke")
  err = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert "Traceback" not in proc.stderr
  assert len(err) == 1 and str(folder) in err[0] and "nothing was changed: to start over" in err[0]
  after = _digest(tmp_path)
  assert {k: after.get(k) for k in before} == before  # no file changed or removed
