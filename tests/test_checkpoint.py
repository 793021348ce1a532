"""`checkpoint.Checkpointer(asynchronous=True)`: a save returns once started, is complete after the
next save, `wait` or `close`, and a failed one is the one-line error of that next call."""
import errno
import gc
import os
import sys
import threading

import jax
import numpy as np
from orbax.checkpoint._src.path import atomicity
import pytest

from disentangle import atomic
from disentangle.train import checkpoint

TREE = {"a": np.arange(100_000, dtype=np.float32), "b": {"c": np.ones((3, 4), np.float32)}}
ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _tree(step):
  return jax.tree_util.tree_map(lambda x: x + step, TREE)


def _name(temporary) -> str:
  return str(temporary.get_final()).rsplit("/", 1)[-1]


def test_an_asynchronous_save_returns_before_its_write_is_complete(tmp_path, monkeypatch):
  """Step 3's rename is held back until the test lets it go: `save` has returned by then, the
  step is not yet listed (nor its folder), and after `wait` it is, and restores bitwise."""
  release, released_after_save = threading.Event(), []
  finalize = atomicity.AtomicRenameTemporaryPath.finalize

  async def held(self, *args, **kwargs):
    assert release.wait(60)
    return await finalize(self, *args, **kwargs)
  monkeypatch.setattr(atomicity.AtomicRenameTemporaryPath, "finalize", held)
  ckpt = checkpoint.Checkpointer(tmp_path, asynchronous=True)
  ckpt.save(3, _tree(3))
  released_after_save.append(release.is_set())
  assert ckpt.all_steps() == [] and ckpt.latest_step() is None
  assert not (tmp_path / "checkpoints" / "3").exists()
  release.set()
  ckpt.wait()
  assert released_after_save == [False]
  assert ckpt.all_steps() == [3] and (tmp_path / "checkpoints" / "3").is_dir()
  restored = ckpt.restore(TREE)
  for a, b in zip(jax.tree_util.tree_leaves(restored), jax.tree_util.tree_leaves(_tree(3))):
    np.testing.assert_array_equal(a, b)
  ckpt.save(6, _tree(6))
  ckpt.close()  # waits for step 6
  assert checkpoint.Checkpointer(tmp_path, read_only=True).all_steps() == [3, 6]


def test_a_save_first_waits_for_another_checkpointers_save_in_flight(tmp_path, monkeypatch):
  """The run's asynchronous save of step 3 is held back until something waits for it; the
  selected slot's save of step 3 then waits for it first: every folder of the run's step is
  renamed before the slot's, and the step is complete when the slot's save returns."""
  release, renamed = threading.Event(), []
  finalize = atomicity.AtomicRenameTemporaryPath.finalize

  async def held(self, *args, **kwargs):
    run = "checkpoints_best" not in str(self.get_final())
    if run:
      assert release.wait(60)
    out = await finalize(self, *args, **kwargs)
    renamed.append("run" if run else "slot")
    return out
  monkeypatch.setattr(atomicity.AtomicRenameTemporaryPath, "finalize", held)
  run = checkpoint.Checkpointer(tmp_path, asynchronous=True)
  slot = checkpoint.Checkpointer(tmp_path, subdir="checkpoints_best", with_record=True, keep=1)
  waited = run._manager.wait_until_finished  # pylint: disable=protected-access

  def wait_until_finished():
    release.set()
    return waited()
  monkeypatch.setattr(run._manager, "wait_until_finished", wait_until_finished)  # pylint: disable=protected-access
  run.save(3, _tree(3))
  slot.save(3, _tree(3), record={"step": 3})
  assert "run" in renamed and "run" not in renamed[renamed.index("slot"):]  # run's, then slot's
  assert run.all_steps() == [3] and slot.all_steps() == [3]
  run.close()
  slot.close()


def test_a_failed_asynchronous_save_is_the_next_calls_one_line_error(tmp_path, monkeypatch):
  """ENOSPC at step 6's rename: `save(6)` returns, `save(9)` raises the one-line WriteError of
  checkpoint 6 and saves nothing; step 3 stays; the same call then succeeds. A failed save
  waited for by `close` is its error. No unraisable exception (orbax's late callbacks into a
  closed event loop, its collected write coroutines) reaches the hook in place."""
  unraisable = []
  monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
  finalize = atomicity.AtomicRenameTemporaryPath.finalize

  async def full(self, *args, **kwargs):
    if _name(self) in ("6", "12"):
      raise ENOSPC
    return await finalize(self, *args, **kwargs)
  monkeypatch.setattr(atomicity.AtomicRenameTemporaryPath, "finalize", full)
  ckpt = checkpoint.Checkpointer(tmp_path, asynchronous=True)
  ckpt.save(3, _tree(3))
  ckpt.save(6, _tree(6))
  with pytest.raises(atomic.WriteError) as e:
    ckpt.save(9, _tree(9))
  assert str(e.value).startswith(f"cannot write checkpoint 6 in {tmp_path / 'checkpoints'}: No "
                                 "space left on device (ENOSPC)") and "\n" not in str(e.value)
  assert ckpt.all_steps() == [3]
  ckpt.save(9, _tree(9))
  ckpt.save(12, _tree(12))
  with pytest.raises(atomic.WriteError, match="checkpoint 12 in .*No space left on device"):
    ckpt.close()
  gc.collect()
  assert checkpoint.Checkpointer(tmp_path, read_only=True).all_steps() == [3, 9]
  assert [str(u.exc_value) for u in unraisable] == []
