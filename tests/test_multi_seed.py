"""num_seeds=N trains N independent seeds in one program: the layout chosen per backend
(`disentangle.train.seeds`). Both layouts equal N separate runs, one run directory each, through
the trainer's one step builder (`runs.Runs`, `codes.runs_step`): tests/test_runs.py
(`test_the_runs_of_one_program_equal_their_runs_alone`), which covers what the removed tests of
`seeds.over_seeds` checked."""
from disentangle.train import seeds
from tests import helpers


def test_seed_layout_resolves_by_backend():
  c = helpers.tiny_config("betavae")
  assert seeds.layout(c, "cpu") == "unroll" and seeds.layout(c, "gpu") == "vmap"
  assert seeds.layout(c, "tpu") == "vmap"
  c.seed_layout = "vmap"
  assert seeds.layout(c, "cpu") == "vmap"
