"""The shared trainer: learning, single compilation, bitwise resume, non-finite stop."""
import json

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disentangle import methods
from disentangle.train import trainer
from tests import helpers


def test_one_step_lowers_loss_on_fixed_batch():
  config = helpers.tiny_config()
  data = helpers.TinyImages()
  method = methods.build(config, data.image_shape)
  state = method.init(jax.random.PRNGKey(0))
  batch = {"image": jnp.asarray(data.get_images(np.arange(8)))}
  rng = jax.random.PRNGKey(7)
  before, _ = method.loss(state.params, batch, rng, 1)
  state, _ = jax.jit(method.train_step)(state, batch)
  after, _ = method.loss(state.params, batch, rng, 1)
  assert float(after) < float(before)


def test_step_compiles_once():
  config = helpers.tiny_config()
  data = helpers.TinyImages()
  method = methods.build(config, data.image_shape)

  @jax.jit
  @chex.assert_max_traces(n=1)
  def step(state, batch):
    return method.train_step(state, batch)

  state = method.init(jax.random.PRNGKey(0))
  for i in range(3):
    batch = {"image": jnp.asarray(data.get_images(np.arange(8 * i, 8 * i + 8)))}
    state, _ = step(state, batch)
  assert int(state.step) == 3


def _params(state):
  return [np.asarray(x) for x in jax.tree_util.tree_leaves(state)]


@pytest.mark.parametrize("method", ["betavae", "cascadevae"])
def test_resume_after_kill_is_bitwise_identical(tmp_path, method):
  data = helpers.TinyImages()
  config = helpers.tiny_config(method, **{"mesh.num_devices": 1})
  straight = trainer.train(config, tmp_path / "a", dataset=data)

  class Killed(Exception):
    pass

  def kill_after_4(state, step):
    if step == 4:  # checkpoint at 3 exists; step 4 is lost
      raise Killed()

  with pytest.raises(Killed):
    trainer.train(config, tmp_path / "b", dataset=data, hooks=[kill_after_4])
  assert sorted(p.name for p in (tmp_path / "b" / "checkpoints").iterdir()
                if p.name.isdigit()) == ["3"]
  resumed = trainer.train(config, tmp_path / "b", dataset=data)
  for a, b in zip(_params(straight), _params(resumed)):
    np.testing.assert_array_equal(a, b)
  lines = [json.loads(l) for l in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
  assert [l["step"] for l in lines] == [2, 3, 4, 6]  # the lost step-4 line was not duplicated
  saved = json.loads((tmp_path / "b" / "config.json").read_text())
  assert saved["seed"] == config.seed and saved["method"] == method


def test_nonfinite_loss_stops_and_keeps_last_checkpoint(tmp_path):
  data = helpers.TinyImages(nan_after_calls=4)  # batches of steps 5, 6, ... are NaN
  config = helpers.tiny_config(**{"log_every": 1, "checkpoint_every": 1, "num_steps": 50})
  with pytest.raises(trainer.NonFiniteError, match="loss became"):
    trainer.train(config, tmp_path, dataset=data)
  steps = sorted(int(p.name) for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit())
  assert steps == [3, 4], steps  # keep_checkpoints=2; nothing saved at or after step 5
  method = methods.build(config, data.image_shape)
  from disentangle.train import checkpoint
  restored = checkpoint.Checkpointer(tmp_path).restore(method.init(jax.random.PRNGKey(0)))
  assert all(np.isfinite(x).all() for x in _params(restored.params))


def test_resume_with_other_config_is_refused(tmp_path):
  data = helpers.TinyImages()
  config = helpers.tiny_config(**{"num_steps": 2})
  trainer.train(config, tmp_path, dataset=data)
  other = helpers.tiny_config(**{"num_steps": 2, "betavae.beta": 1.0})
  with pytest.raises(trainer.config_lib.ConfigError, match="betavae.beta"):
    trainer.train(other, tmp_path, dataset=data)
