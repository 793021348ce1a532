"""num_seeds=N trains N independent seeds in one program: the layout chosen per backend and the
mapping over the seeds' axis (`disentangle.train.seeds`). Both layouts equal N separate runs, one
run directory each: tests/test_runs.py (`test_the_runs_of_one_program_equal_their_runs_alone`)."""
import jax
import numpy as np
import pytest

from disentangle.train import seeds
from tests import helpers


def test_seed_layout_resolves_by_backend():
  c = helpers.tiny_config("betavae")
  assert seeds.layout(c, "cpu") == "unroll" and seeds.layout(c, "gpu") == "vmap"
  assert seeds.layout(c, "tpu") == "vmap"
  c.seed_layout = "vmap"
  assert seeds.layout(c, "cpu") == "vmap"


@pytest.mark.parametrize("how", ["vmap", "unroll"])
def test_over_seeds_maps_a_function_over_the_leading_axis(how):
  step = lambda state, batch: ({"w": state["w"] * batch + 1.0}, (state["w"] * batch).sum())
  state = {"w": np.arange(6.0).reshape(3, 2)}
  batch = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
  out_state, out = jax.jit(seeds.over_seeds(step, 3, how))(state, batch)
  for i in range(3):
    ref_state, ref = step({"w": state["w"][i]}, batch[i])
    np.testing.assert_array_equal(out_state["w"][i], ref_state["w"])
    np.testing.assert_array_equal(out[i], ref)


def test_over_seeds_refuses_a_layout_it_does_not_build():
  """'auto' is resolved by `seeds.layout` first, never taken for an unrolled layout."""
  for how in ("auto", "map"):
    with pytest.raises(ValueError, match="how must be one of"):
      seeds.over_seeds(lambda state, batch: state, 3, how)
