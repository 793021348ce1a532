"""``benchmarks.layout_programs`` (timed by ``benchmarks.run_layout``): the layouts it times
compute what its docstring says they do."""
import jax
import numpy as np
import pytest

from benchmarks import layout_programs
from disentangle import methods
from experiments.configs import dsprites_cascade


def _setup(runs, batch=2):
  config = dsprites_cascade.get_config("m6,smoke")
  method = methods.build(config, (64, 64, 1))
  # Compiled in one program and held on the host (numpy), so that taking a run is no program.
  params = jax.device_get(jax.jit(jax.vmap(method.init_params))(
      jax.random.split(jax.random.PRNGKey(0), runs)))
  images = np.random.default_rng(0).random((runs, batch, 64, 64, 1), dtype=np.float32)
  return method, params, images


@pytest.mark.slow
def test_vmap_and_unroll_are_the_runs_own_passes_and_folded_is_run_zero_over_every_image():
  method, params, images = _setup(2)
  one = layout_programs.network_pass(method)
  outs = {k: jax.jit(layout_programs.layout_fn(k, one, 2))(params, images) for k in ("vmap", "unroll")}
  alone = jax.jit(one)
  per_run_of_run_zero = []
  for i in range(2):  # reference: each run's pass alone
    loss, grads = alone(jax.tree_util.tree_map(lambda a, i=i: a[i], params), images[i])
    for k, (losses, stacked) in outs.items():
      np.testing.assert_allclose(losses[i], loss, rtol=1e-5, err_msg=k)
      jax.tree_util.tree_map(lambda a, b, i=i: np.testing.assert_allclose(
          a[i], b, rtol=1e-4, atol=1e-6), stacked, grads)
    per_run_of_run_zero.append(
        alone(jax.tree_util.tree_map(lambda a: a[0], params), images[i])[0])
  assert not np.allclose(outs["vmap"][0][0], outs["vmap"][0][1])  # the runs' weights differ
  # folded: run 0's weights over every image; equal batches: the mean of the per-batch means
  folded, _ = jax.jit(layout_programs.layout_fn("folded", one, 2))(params, images)
  np.testing.assert_allclose(folded, np.mean(per_run_of_run_zero), rtol=1e-5)
