"""Data parallelism over 8 forced CPU devices equals the single-device run."""
import jax
import numpy as np
import pytest

from disentangle.train import trainer
from tests import helpers


def _leaves(state):
  return [np.asarray(x) for x in jax.tree_util.tree_leaves(state.params)]


# beta-VAE's loss (the reconstruction and KL means over the sharded batch) is a part of each
# of these methods' losses.
@pytest.mark.parametrize("method,extra", [
    ("cascadevae", {"cascade.assignment_scope": "global"}),
    ("factorvae", {}),
    ("ffvae", {}),
])
@pytest.mark.slow
def test_sharded_training_equals_single_device(tmp_path, method, extra):
  assert jax.device_count() == 8
  data = helpers.TinyAttributeImages() if method == "ffvae" else helpers.TinyImages()
  kw = {"num_steps": 3, "batch_size": 16, "log_every": 1, **extra}
  config = helpers.tiny_config(method, **kw, **{"mesh.num_devices": 1})
  one = trainer.train(config, tmp_path / "one", dataset=data)
  eight = trainer.train(helpers.tiny_config(method, **kw, **{"mesh.num_devices": 8}),
                        tmp_path / "eight", dataset=data)
  # Sums over the batch split 8 ways round differently. Adam divides by sqrt(v), so where a
  # gradient entry is ~0 its rounding can flip the update's sign: such entries may differ by up to
  # 2 lr per step, all others must agree closely.
  bound = 2 * config.optimizer.learning_rate * kw["num_steps"]
  for a, b in zip(_leaves(one), _leaves(eight)):
    close = np.isclose(a, b, rtol=2e-4, atol=2e-5)
    assert close.mean() >= 0.999, f"{(~close).sum()} of {close.size} entries differ"
    assert np.max(np.abs(a - b)) <= bound


def test_local_assignment_scope_solves_each_shard(tmp_path):
  """'local' on 8 devices = 8 independent problems of 2 rows: the counts per shard obey them."""
  from disentangle import assignment
  from disentangle import methods
  from disentangle.train import mesh as mesh_lib
  config = helpers.tiny_config("cascadevae", **{"cascade.assignment_scope": "local",
                                                "cascade.penalty": 1e6})
  method = methods.build(config, (32, 32, 1), mesh=mesh_lib.make_mesh(8))
  u = np.random.default_rng(0).normal(size=(16, 3)).astype(np.float32)
  sharding = mesh_lib.batch_sharding(method.mesh)
  solve = method.for_phase(True).code_solve
  d = np.asarray(jax.jit(lambda v: solve(v))(jax.device_put(u, sharding)))
  expected = np.concatenate([assignment.assign(u[2 * i:2 * i + 2], 1e6) for i in range(8)])
  np.testing.assert_array_equal(d, expected)
  # a huge penalty forbids two rows of one shard from sharing a class
  assert all(d[2 * i] != d[2 * i + 1] for i in range(8))


def test_factorvae_local_permutation_stays_within_shards():
  from disentangle import methods
  from disentangle.train import mesh as mesh_lib
  config = helpers.tiny_config("factorvae", **{"factorvae.permute_scope": "local"})
  method = methods.build(config, (32, 32, 1), mesh=mesh_lib.make_mesh(8))
  # Row i of column j holds 100*i + j: a permuted value tells which row (and shard) it came from.
  z = (100.0 * np.arange(16)[:, None] + np.arange(3)[None, :]).astype(np.float32)
  z = jax.device_put(z, mesh_lib.batch_sharding(method.mesh))
  fake = np.asarray(jax.jit(method.permute)(jax.random.PRNGKey(0), z))
  rows = (fake // 100).astype(int)
  for s in range(8):  # every value of shard s comes from shard s, each column a permutation
    block = rows[2 * s:2 * s + 2]
    assert np.all(block // 2 == s)
    for j in range(3):
      assert sorted(block[:, j]) == [2 * s, 2 * s + 1]
  np.testing.assert_array_equal(fake % 100, np.tile(np.arange(3), (16, 1)))


def test_permute_groups_local_scope_stays_within_shards():
  """FFVAE's grouping (z block, b_j alone) with scope 'local' on 8 devices: rows stay in shards."""
  from disentangle import sharding
  from disentangle.methods import discriminator as disc_lib
  from disentangle.train import mesh as mesh_lib
  mesh = mesh_lib.make_mesh(8)
  z = (100.0 * np.arange(32)[:, None] + np.arange(4)[None, :]).astype(np.float32)
  z = jax.device_put(z, sharding.batch_sharding(mesh))
  groups = ((0, 1), (2,), (3,))
  fake = np.asarray(jax.jit(lambda k, v: disc_lib.permute_scoped(
      k, v, groups, scope="local", mesh=mesh))(jax.random.PRNGKey(0), z))
  rows = (fake // 100).astype(int)
  assert np.all(rows[:, 0] == rows[:, 1])
  for s in range(8):
    block = rows[4 * s:4 * s + 4]
    assert np.all(block // 4 == s)
    for j in range(4):
      assert sorted(block[:, j]) == list(range(4 * s, 4 * s + 4))


@pytest.mark.slow
def test_partedvae_sharded_training_equals_single_device(tmp_path):
  """PartedVAE (qc_scope 'global', labelled stream of 8 split over 8 devices) on 8 = on 1."""
  data = helpers.TinyDigits()
  kw = {"num_steps": 3, "batch_size": 16, "log_every": 1, "parted.qc_scope": "global",
        "parted.plateau_epoch_steps": 100}
  config = helpers.parted_config(**kw, **{"mesh.num_devices": 1})
  one = trainer.train(config, tmp_path / "one", dataset=data)
  eight = trainer.train(helpers.parted_config(**kw, **{"mesh.num_devices": 8}),
                        tmp_path / "eight", dataset=data)
  bound = 2 * max(config.optimizer.learning_rate, config.parted.sup_learning_rate) * 2 * 3
  for a, b in zip(_leaves(one), _leaves(eight)):
    close = np.isclose(a, b, rtol=2e-4, atol=2e-5)
    assert close.mean() >= 0.999, f"{(~close).sum()} of {close.size} entries differ"
    assert np.max(np.abs(a - b)) <= bound


def test_partedvae_local_qc_is_the_mean_of_per_shard_kls():
  from disentangle import methods
  from disentangle import sharding
  from disentangle.train import mesh as mesh_lib
  mesh = mesh_lib.make_mesh(8)
  prior = np.array([0.1, 0.2, 0.3, 0.4])
  logits = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32) * 2
  q = np.exp(logits.astype(np.float64))
  q /= q.sum(-1, keepdims=True)
  kl = lambda qh: float(np.sum(qh * np.log(qh / prior)))  # noqa: E731
  by_hand = {"local": np.mean([kl(q[2 * s:2 * s + 2].mean(0)) for s in range(8)]),
             "global": kl(q.mean(0))}
  x = jax.device_put(logits, sharding.batch_sharding(mesh))
  for scope, want in by_hand.items():
    config = helpers.parted_config(**{"parted.qc_scope": scope,
                                           "parted.labelled_batch_size": 8})
    method = methods.build(config, (32, 32, 1), mesh=mesh)
    got = float(jax.jit(lambda l: method.qc_kl(l, prior.astype(np.float32)))(x))
    np.testing.assert_allclose(got, want, rtol=1e-5)
  assert abs(by_hand["local"] - by_hand["global"]) > 1e-3  # the scopes differ here
