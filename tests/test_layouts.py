"""``benchmarks.layouts`` (timed by ``benchmarks.run_layout``): the layouts it times compute what its docstring says they do."""
import jax
import numpy as np
import pytest

from benchmarks import layouts
from disentangle import methods
from experiments.configs import dsprites_cascade


def _setup(runs, batch=2):
  config = dsprites_cascade.get_config("m6,smoke")
  method = methods.build(config, (64, 64, 1))
  params = jax.vmap(method.init_params)(jax.random.split(jax.random.PRNGKey(0), runs))
  images = np.random.default_rng(0).random((runs, batch, 64, 64, 1), dtype=np.float32)
  return method, params, images


@pytest.mark.slow
def test_vmap_and_unroll_are_the_runs_own_passes():
  method, params, images = _setup(2)
  one = layouts.network_pass(method)
  outs = {k: jax.jit(layouts.layout_fn(k, one, 2))(params, images) for k in ("vmap", "unroll")}
  alone = jax.jit(one)
  for i in range(2):  # reference: each run's pass alone
    loss, grads = alone(jax.tree_util.tree_map(lambda a, i=i: a[i], params), images[i])
    for k, (losses, stacked) in outs.items():
      np.testing.assert_allclose(losses[i], loss, rtol=1e-5, err_msg=k)
      jax.tree_util.tree_map(lambda a, b, i=i: np.testing.assert_allclose(
          a[i], b, rtol=1e-4, atol=1e-6), stacked, grads)
  assert not np.allclose(outs["vmap"][0][0], outs["vmap"][0][1])  # the runs' weights differ


@pytest.mark.slow
def test_folded_is_run_zero_over_every_image():
  method, params, images = _setup(2)
  one = layouts.network_pass(method)
  loss, _ = jax.jit(layouts.layout_fn("folded", one, 2))(params, images)
  first = jax.tree_util.tree_map(lambda a: a[0], params)
  alone = jax.jit(one)
  per_run = [alone(first, images[i])[0] for i in range(2)]  # equal batches: the mean of means
  np.testing.assert_allclose(loss, np.mean(per_run), rtol=1e-5)
