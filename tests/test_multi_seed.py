"""num_seeds=N trains N independent seeds in one vmapped program, one run directory each."""
import json

import jax
import numpy as np
import pytest

from disentangle.train import trainer
from tests import helpers


@pytest.mark.parametrize("method, dataset", [("cascadevae", helpers.TinyImages),
                                             ("ffvae", helpers.TinyAttributeImages)])
def test_two_seeds_at_once_equal_two_separate_runs(tmp_path, method, dataset):
  data = dataset()
  kw = {"num_steps": 3, "mesh.num_devices": 1, "seed": 5}
  both = trainer.train(helpers.tiny_config(method, num_seeds=2, **kw), tmp_path / "both",
                       dataset=data)
  for i, seed in enumerate((5, 6)):
    alone = trainer.train(helpers.tiny_config(method, **dict(kw, seed=seed)),
                          tmp_path / f"alone{seed}", dataset=data)
    for a, b in zip(jax.tree_util.tree_leaves(both.params), jax.tree_util.tree_leaves(alone.params)):
      np.testing.assert_allclose(np.asarray(a)[i], np.asarray(b), rtol=2e-4, atol=2e-5)
    run = tmp_path / "both" / f"seed_{seed}"
    assert json.loads((run / "config.json").read_text())["seed"] == seed
    steps = [json.loads(l)["step"] for l in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [2, 3]
