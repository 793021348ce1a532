"""Data parallelism over 8 forced CPU devices equals the single-device run."""
import jax
import numpy as np
import pytest

from disentangle.train import trainer
from tests import helpers


def _leaves(state):
  return [np.asarray(x) for x in jax.tree_util.tree_leaves(state.params)]


@pytest.mark.parametrize("method,extra", [
    ("betavae", {}),
    ("cascadevae", {"cascade.assignment_scope": "global"}),
    ("factorvae", {}),
])
def test_sharded_training_equals_single_device(tmp_path, method, extra):
  assert jax.device_count() == 8
  data = helpers.TinyImages()
  kw = {"num_steps": 3, "batch_size": 16, "log_every": 1, **extra}
  one = trainer.train(helpers.tiny_config(method, **kw, **{"mesh.num_devices": 1}),
                      tmp_path / "one", dataset=data)
  eight = trainer.train(helpers.tiny_config(method, **kw, **{"mesh.num_devices": 8}),
                        tmp_path / "eight", dataset=data)
  for a, b in zip(_leaves(one), _leaves(eight)):
    np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)


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
  d = np.asarray(jax.jit(method._assign)(jax.device_put(u, sharding)))  # pylint: disable=protected-access
  expected = np.concatenate([assignment.assign(u[2 * i:2 * i + 2], 1e6) for i in range(8)])
  np.testing.assert_array_equal(d, expected)
  # a huge penalty forbids two rows of one shard from sharing a class
  assert all(d[2 * i] != d[2 * i + 1] for i in range(8))
