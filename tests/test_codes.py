"""The step of a method with discrete codes (`disentangle.train.codes`): the composition of costs,
solve and update is Algorithm 1 as written (the solve inside the loss); the placement is decided
once, with every condition, and recorded as decided; the overlapped placement, the runs of a
program in two groups, ends bit for bit where the one-program step ends them, solves each group's
problems once per step, and stays out of the way where there is nothing to overlap."""
import contextlib
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disentangle import assignment
from disentangle import config as config_lib
from disentangle import methods
from disentangle.train import codes
from disentangle.train import runs as runs_lib
from disentangle.train import trainer
from tests import helpers


def _state_after_discrete_start(method, images):
  """A state one update past t_d (its step past t_d, its parameters after one update)."""
  state = method.init(jax.random.PRNGKey(0))
  state, _ = jax.jit(method.train_step)(state, {"image": images})
  return state.replace(step=jnp.asarray(method.config.cascade.discrete_start + 1, jnp.int32))


@pytest.mark.parametrize("solver", ["scipy", "hungarian"])
def test_the_composed_step_is_algorithm_1(solver):
  """The trainer's step (costs, solve, update) solves the codes Algorithm 1 solves inside its loss
  and updates alike: the same codes, the loss to float32 rounding (its decoder pass taken from the
  S passes rather than run again)."""
  data = helpers.TinyImages()
  images = jnp.asarray(data.get_images(np.arange(8)))
  method = methods.build(helpers.tiny_config("cascadevae", **{"cascade.solver": solver}),
                         data.image_shape)
  state = _state_after_discrete_start(method, images)
  on = method.for_phase(True)
  assert method.code_solve is None and on.code_solve.solver == solver
  composed, metrics = jax.jit(codes.step(on))(state, {"image": images})
  alone, want = jax.jit(lambda s, b: method.descend(s, b, helpers.algorithm_1(method, on.code_solve)))(
      state, {"image": images})
  assert float(metrics["discrete_active"]) == 1.0
  np.testing.assert_array_equal(metrics["discrete_fraction"],
                                np.bincount(np.asarray(want["d"]), minlength=3) / 8)
  np.testing.assert_allclose(metrics["loss"], want["loss"], rtol=1e-6)
  for a, b in zip(jax.tree_util.tree_leaves(composed.params),
                  jax.tree_util.tree_leaves(alone.params), strict=True):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  assert codes.step(methods.build(helpers.tiny_config("betavae"), data.image_shape)).__name__ == (
      "train_step")  # a method without codes: its own step


def _placement(**fields):
  return codes.placement(config_lib.resolve_run(_config(**fields), "gpu"),
                         len(runs_lib.run_configs(_config(**fields))))


def test_the_placement_is_overlapped_only_where_every_condition_holds():
  """A GPU's ``'auto'`` asks for the overlap; it is what a run records only with enough runs in
  its layout, one process, no runs axis over devices, and codes solved on the host within the
  run. Brute force over the conditions against the rule written out."""
  vmap4 = {"num_seeds": 4, "seed_layout": "vmap"}
  assert _placement(**vmap4) == "overlapped"
  assert _placement(**vmap4, assignment_placement="step") == "step"
  assert _placement() == "step"  # one run
  assert _placement(num_seeds=3, seed_layout="vmap") == "step"
  assert _placement(num_seeds=2, seed_layout="unroll") == "overlapped"
  assert _placement(**vmap4, **{"cascade.solver": "hungarian"}) == "step"
  assert _placement(**vmap4, **{"cascade.discrete_start": 4}) == "step"  # t_d = num_steps
  config = config_lib.resolve_run(_config(**vmap4), "gpu")
  assert codes.placement(config, 4, manual=True) == "step"
  assert codes.placement(config, 4, processes=2) == "step"
  assert codes.placement(config_lib.resolve_run(_config(**vmap4), "cpu"), 4) == "step"
  beta = config_lib.resolve_run(helpers.tiny_config("betavae", num_seeds=4, seed_layout="vmap"),
                                "gpu")
  assert codes.placement(beta, 4) == "step"  # no codes at all


@pytest.mark.parametrize("num_runs, want", [(2, [(0, 1), (1, 2)]), (3, [(0, 2), (2, 3)]),
                                            (40, [(0, 20), (20, 40)])])
def test_groups_split_the_runs_in_two_halves(num_runs, want):
  assert codes.groups(num_runs) == want


def test_one_run_has_no_groups():
  with pytest.raises(ValueError, match="at least 2 runs"):
    codes.groups(1)


@contextlib.contextmanager
def recorded_solves():
  """The shapes of the host solves (the callback's and the overlapped step's) made while
  active (`assignment.host_solver`)."""
  shapes = []

  def recording(u, penalty):
    shapes.append(np.shape(u))
    return assignment.assign_host(u, penalty)

  with assignment.host_solver(recording):
    yield shapes


def _config(**fields):
  return helpers.tiny_config("cascadevae", num_steps=4, log_every=1, seed=3,
                             **{"cascade.discrete_start": 1, "mesh.num_devices": 1, **fields})


def _train(tmp_path, name, **fields):
  dataset = (helpers.tiny_uint8() if "dataset.placement" in fields  # placeable on the devices
             else helpers.TinyImages())
  return trainer.train(_config(**fields), tmp_path / name, dataset=dataset)


# Three runs unrolled (groups of 2 and 1), four under vmap (two a group); a swept penalty reaches
# the host as the device holds it under vmap (traced) and in float64 unrolled (each run's
# constant).
CASES = {
    "penalty_swept_unroll": {"sweep": "cascade.penalty=0.5|2|3", "seed_layout": "unroll"},
    "penalty_swept_vmap": {"sweep": "cascade.penalty=0.5|2", "num_seeds": 2,
                           "seed_layout": "vmap"},
    # the set on the device: each group's programs gather their batches from it, and end where
    # the one-program step on the host's batches ends (the set's placement changes no bit)
    "set_on_device_vmap": {"sweep": "cascade.penalty=0.5|2", "num_seeds": 2,
                           "seed_layout": "vmap", "dataset.placement": "device"},
}


@pytest.fixture(scope="module")
def one_program(tmp_path_factory):
  """``one_program(**fields)``: (state, folder) of the one-program step on the host's batches,
  trained once per module."""
  done = {}

  def get(**fields):
    key = repr(sorted(fields.items()))
    if key not in done:
      folder = tmp_path_factory.mktemp("one")
      done[key] = _train(folder, "one", **fields), folder / "one"
    return done[key]

  return get


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_overlapped_groups_end_where_one_program_ends(tmp_path, one_program, case):
  fields = CASES[case]
  one, one_dir = one_program(**{k: "host" if k == "dataset.placement" else v
                                for k, v in fields.items()})
  with recorded_solves() as shapes:
    both = jax.block_until_ready(_train(tmp_path, "overlapped", assignment_placement="overlapped",
                                        **fields))
  runs = jax.tree_util.tree_leaves(one.step)[0].shape[0]
  # t_d = 1: steps 2, 3 and 4 solve each group once: [ceil(R/2), B, S] then [R - ceil(R/2), ...]
  sizes = [hi - lo for lo, hi in codes.groups(runs)]
  assert [s[0] for s in shapes] == sizes * 3
  for a, b in zip(jax.tree_util.tree_leaves(one), jax.tree_util.tree_leaves(both), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  compared = 0
  for run in sorted(p.name for p in one_dir.iterdir() if p.is_dir()):
    if (one_dir / run / "metrics.jsonl").exists():
      helpers.assert_same_metrics(one_dir / run, tmp_path / "overlapped" / run, rtol=0, atol=0)
      compared += 1
  assert compared == runs


@pytest.mark.slow
@pytest.mark.parametrize("fields", [{}, {"num_seeds": 3, "seed_layout": "vmap"}],
                         ids=["one_run", "three_runs_vmap"])
def test_too_few_runs_keep_the_one_program_step(tmp_path, fields):
  """One run, or fewer than four under vmap (a group of one would round differently): the
  step's own callback solves every run's problem in one call a step (steps 2 to 4)."""
  with recorded_solves() as shapes:
    jax.block_until_ready(_train(tmp_path, "run", assignment_placement="overlapped", **fields))
  c = _config(**fields)
  runs = (fields.get("num_seeds", 1),) if fields else ()
  assert shapes == [runs + (c.batch_size, c.cascade.num_discrete)] * 3
  for path in (tmp_path / "run").glob("**/config.json"):  # what trained, beside what was asked
    saved = json.loads(path.read_text())
    assert (saved["assignment_placement"], saved["requested"]["assignment_placement"]) == (
        "step", "overlapped")


@pytest.mark.slow
def test_the_device_solver_keeps_the_one_program_step(tmp_path):
  with recorded_solves() as shapes:
    state = jax.block_until_ready(_train(tmp_path, "hungarian", assignment_placement="overlapped",
                                         num_seeds=4, seed_layout="vmap",
                                         **{"cascade.solver": "hungarian"}))
  assert shapes == []
  assert np.all(np.isfinite(jax.tree_util.tree_leaves(state.params)[0]))
