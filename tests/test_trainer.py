"""The shared trainer: learning, single compilation, non-finite stop, a changed config refused on
resume. Bitwise resume after an interruption: tests/test_resume.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disentangle import methods
from disentangle.train import trainer
from tests import helpers


@pytest.mark.slow
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


@pytest.mark.slow
def test_step_compiles_once():
  config = helpers.tiny_config()
  data = helpers.TinyImages()
  method = methods.build(config, data.image_shape)
  step = helpers.step_traced_once(method)

  state = method.init(jax.random.PRNGKey(0))
  for i in range(3):
    batch = {"image": jnp.asarray(data.get_images(np.arange(8 * i, 8 * i + 8)))}
    state, _ = step(state, batch)
  assert int(state.step) == 3


def _params(state):
  return [np.asarray(x) for x in jax.tree_util.tree_leaves(state)]


@pytest.mark.slow
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


@pytest.mark.slow
def test_resume_with_other_config_is_refused(tmp_path):
  data = helpers.TinyImages()
  config = helpers.tiny_config(**{"num_steps": 2})
  trainer.train(config, tmp_path, dataset=data)
  other = helpers.tiny_config(**{"num_steps": 2, "betavae.beta": 1.0})
  with pytest.raises(trainer.config_lib.ConfigError, match="betavae.beta"):
    trainer.train(other, tmp_path, dataset=data)


# -- named optimisers: an optimiser on part of a group ------------------------------------------

from disentangle.methods import optimizers  # noqa: E402


def test_optimizer_on_subtrees_leaves_the_rest_bitwise_unchanged():
  config = helpers.tiny_config()
  data = helpers.TinyImages()
  method = methods.build(config, data.image_shape)
  params = jax.jit(method.init)(jax.random.PRNGKey(0)).params["vae"]
  tx = optimizers.on_subtrees(optimizers.adam(1e-2), ["encoder/conv0", "encoder/fc"])

  @jax.jit  # one program, not each optimiser operation on its own
  def two_updates(params):
    opt_state = tx.init(params)
    grads = jax.tree_util.tree_map(jnp.ones_like, params)
    for _ in range(2):
      updates, opt_state = tx.update(grads, opt_state, params, value=jnp.float32(1.0))
      new = optax_apply(params, updates)
    return new

  new = two_updates(params)
  flat_old = dict(jax.tree_util.tree_leaves_with_path(params))
  for path, leaf in jax.tree_util.tree_leaves_with_path(new):
    names = [p.key for p in path]
    trained = names[:2] in (["encoder", "conv0"], ["encoder", "fc"])
    old = np.asarray(flat_old[path])
    if trained:
      assert not np.array_equal(np.asarray(leaf), old), names
    else:
      assert np.asarray(leaf).tobytes() == old.tobytes(), names
  with pytest.raises(ValueError):
    optimizers.on_subtrees(optimizers.adam(1e-2), [])


def optax_apply(params, updates):
  import optax  # pylint: disable=g-import-not-at-top
  return optax.apply_updates(params, updates)


def test_missing_data_creates_nothing(tmp_path):
  config = helpers.tiny_config(**{"dataset.data_dir": str(tmp_path / "no_data"),
                                  "dataset.allow_download": False})
  with pytest.raises(Exception):
    trainer.train(config, tmp_path / "run")
  assert not (tmp_path / "run").exists()


