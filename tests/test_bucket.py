"""Runs on a bucket (``gs://``): a Cloud Storage emulator on 127.0.0.1 (`tests.storage_emulator`,
started by the ``storage_emulator`` fixture) behind the real clients (gcsfs, tensorstore)."""
import json
import signal

import jax
import numpy as np
import pytest

from disentangle import atomic
from disentangle import paths
from disentangle.train import preemption
from tests import helpers


def _fs():
  """The bucket's file system, its listings cache dropped (other processes write too)."""
  fs, _ = paths.filesystem("gs://")
  fs.invalidate_cache()
  return fs


def _lines(folder):
  """The metrics lines of ``folder`` (local or gs://), without the wall-clock rate."""
  text = paths.as_path(folder, ).joinpath("metrics.jsonl").read_text() if paths.is_remote(
      folder) else (folder / "metrics.jsonl").read_text()
  return [{k: v for k, v in json.loads(l).items() if k != "steps_per_sec"}
          for l in text.splitlines()]


def _steps(folder):
  """The complete checkpoint steps under ``folder`` (orbax's finalised step folders)."""
  return sorted(int(p.name) for p in paths.as_path(folder).iterdir() if p.name.isdigit())


@pytest.mark.slow
def test_a_run_stopped_and_resumed_on_a_bucket_equals_the_local_run(tmp_path, bucket):
  """9 steps (checkpoints at 3, 6, 9; metrics lines at 2, 3, 4, 6, 8, 9) in a local folder, and
  on the bucket stopped by SIGTERM during step 4 then trained again: the bucket holds the
  checkpoints 3 and 4 after the stop, and at the end the same metrics lines and the same
  parameters as the local run."""
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  data = helpers.TinyImages()
  config = helpers.tiny_config(**{"mesh.num_devices": 1, "num_steps": 9})
  local = trainer.train(config, tmp_path / "local", dataset=data)

  def sigterm_at_4(state, step):
    del state
    if step == 4:
      signal.raise_signal(signal.SIGTERM)

  with pytest.raises(preemption.Preempted) as e:
    trainer.train(config, bucket, dataset=data, hooks=[sigterm_at_4])
  assert e.value.step == 4 and f"checkpoint 4 in {bucket}/checkpoints" in str(e.value)
  _fs()
  assert _steps(f"{bucket}/checkpoints") == [3, 4]
  assert [l["step"] for l in _lines(bucket)] == [2, 3, 4]
  resumed = trainer.train(config, bucket, dataset=data)
  for a, b in zip(jax.tree_util.tree_leaves(local), jax.tree_util.tree_leaves(resumed)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert _lines(bucket) == _lines(tmp_path / "local")
  fs = _fs()
  assert json.loads(fs.cat(f"{bucket}/config.json")) == json.loads(
      (tmp_path / "local" / "config.json").read_text())
  events = [p for p in fs.ls(f"{bucket}/tensorboard") if "tfevents" in p]
  assert len(events) == 2 and all(fs.size(p) > 0 for p in events)  # the stopped and resumed runs
  assert _steps(f"{bucket}/checkpoints") == [6, 9]
