"""num_seeds=N trains N independent seeds in one program, one run directory each; both layouts
(`disentangle.train.seeds`: vmap, unrolled copies) equal N separate runs."""
import json

import jax
import numpy as np
import pytest

from disentangle.train import seeds
from disentangle.train import trainer
from tests import helpers


@pytest.mark.parametrize("method, dataset, layout", [
    ("cascadevae", helpers.TinyImages, "unroll"),    # the CPU's layout, with a host callback
    ("ffvae", helpers.TinyAttributeImages, "vmap"),  # the accelerators'
])
@pytest.mark.slow
def test_two_seeds_at_once_equal_two_separate_runs(tmp_path, method, dataset, layout):
  data = dataset()
  kw = {"num_steps": 3, "mesh.num_devices": 1, "seed": 5}
  both = trainer.train(helpers.tiny_config(method, num_seeds=2, seed_layout=layout, **kw),
                       tmp_path / "both", dataset=data)
  for i, seed in enumerate((5, 6)):
    alone = trainer.train(helpers.tiny_config(method, **dict(kw, seed=seed)),
                          tmp_path / f"alone{seed}", dataset=data)
    for a, b in zip(jax.tree_util.tree_leaves(both.params), jax.tree_util.tree_leaves(alone.params)):
      np.testing.assert_allclose(np.asarray(a)[i], np.asarray(b), rtol=2e-4, atol=2e-5)
    run = tmp_path / "both" / f"seed_{seed}"
    assert json.loads((run / "config.json").read_text())["seed"] == seed
    steps = [json.loads(l)["step"] for l in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [2, 3]


def test_seed_layout_resolves_by_backend_and_rejects_unknown_names():
  c = helpers.tiny_config("betavae")
  assert seeds.layout(c, "cpu") == "unroll" and seeds.layout(c, "gpu") == "vmap"
  assert seeds.layout(c, "tpu") == "vmap"
  c.seed_layout = "vmap"
  assert seeds.layout(c, "cpu") == "vmap"
  c.seed_layout = "grouped"
  with pytest.raises(ValueError, match="seed_layout"):
    seeds.layout(c, "cpu")


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
