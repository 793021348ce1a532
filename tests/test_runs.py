"""Several runs in one program (`disentangle.train.runs`): no discrete work before t_d, the runs
of one program (seeds, sweeps, layouts, meshes) equal to their runs alone, and the bad inputs."""
import json

import jax
import numpy as np
import pytest

from disentangle import assignment
from disentangle import config as config_lib
from disentangle.train import runs
from disentangle.train import trainer
from tests import helpers


class CallbackCounter:
  """Counts the host assignment callbacks run by each step (the step is waited for) while
  entered (`assignment.host_solver`)."""

  def __init__(self):
    self.calls, self.labels, self.per_step = [], [], {}

  def __enter__(self):
    def counting(u, penalty):
      self.calls.append(np.shape(u))
      self.labels.append(assignment.assign_host(u, penalty))
      return self.labels[-1]

    self._context = assignment.host_solver(counting)
    self._context.__enter__()
    return self

  def __exit__(self, *exc):
    return self._context.__exit__(*exc)

  def hook(self, state, done):
    jax.block_until_ready(state)
    self.per_step[done] = len(self.calls) - sum(self.per_step.values())


@pytest.mark.slow
def test_no_assignment_callback_before_discrete_start(tmp_path):
  """t_d = 2: steps 1 and 2 run no callback at all, step 3 exactly one, which receives every
  run's problem (u[N, B, S]) under vmap. One run, and unrolled runs with the labels each solves
  alone (t_d = 1): the programs below."""
  config = helpers.tiny_config("cascadevae", num_steps=3, num_seeds=2, seed_layout="vmap",
                               **{"mesh.num_devices": 1})
  with CallbackCounter() as counter:
    trainer.train(config, tmp_path / "runs", dataset=helpers.TinyImages(), hooks=[counter.hook])
  assert counter.per_step == {1: 0, 2: 0, 3: 1}
  assert counter.calls[-1] == (2, config.batch_size, config.cascade.num_discrete)
  # Each run's config.json holds the values that computed it, resolved once when the runs were
  # set up (`config.resolve_run`), and what was asked beside them.
  run_dirs = sorted((tmp_path / "runs").glob("seed_*"))
  assert len(run_dirs) == 2
  for run_dir in run_dirs:
    saved = json.loads((run_dir / "config.json").read_text())
    read = lambda tree, field: [tree := tree[k] for k in field.split(".")][-1]
    resolved = {f: read(saved, f) for f in config_lib.RESOLVED_FIELDS}
    assert "auto" not in resolved.values(), resolved
    assert resolved["seed_layout"] == "vmap" and read(saved["requested"], "seed_layout") == "vmap"
    assert read(saved["requested"], "cascade.unary_batching") == "auto"


def test_run_configs_cross_the_grid_with_the_seeds_and_name_the_runs():
  c = helpers.tiny_config("cascadevae", num_seeds=2, seed=7,
                          sweep="cascade.beta_low=1|2|3; cascade.relieve_every=5|9")
  cfgs = runs.run_configs(c)
  assert len(cfgs) == 12
  got = [(x.cascade.beta_low, x.cascade.relieve_every, x.seed) for x in cfgs]
  assert got == [(b, r, s) for b in (1.0, 2.0, 3.0) for r in (5, 9) for s in (7, 8)]
  assert runs.run_name(c, cfgs[3]) == "cascade.beta_low=1_cascade.relieve_every=9_seed_8"
  values = runs.values_arrays(c, cfgs)
  assert values["cascade.relieve_every"].dtype == np.int32
  np.testing.assert_array_equal(values["cascade.beta_low"], [g[0] for g in got])


@pytest.mark.parametrize("sweep, match", [
    ("model.latent_dim=3|4", "model.latent_dim"),
    ("cascade.num_discrete=3|4", "cascade.num_discrete"),
    ("dataset.name=mnist|dsprites", "dataset.name"),
    ("cascade.discrete_start=2|5", "cascade.discrete_start"),
    ("cascade.beta_low=1|-2", r"cascade.beta_low.*-2"),
    ("cascade.betalow=1|2", "cascade.betalow"),
    ("cascade.beta_low", "sweep"),
])
def test_bad_sweeps_fail_before_anything_is_created(tmp_path, sweep, match):
  config = helpers.tiny_config("cascadevae", sweep=sweep)
  with pytest.raises(config_lib.ConfigError, match=match):
    trainer.train(config, tmp_path / "run", dataset=helpers.TinyImages())
  assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("overrides, match", [
    ({"num_seeds": 3, "mesh.runs": 2}, r"3 runs.*mesh.runs.*\(2\)"),
    ({"num_seeds": 2, "mesh.data": 8, "batch_size": 4}, r"batch_size.*\(4\).*8"),
    ({"mesh.num_devices": 9}, r"mesh.num_devices.*9"),
    ({"num_seeds": 4, "mesh.runs": 4, "mesh.data": 4}, r"mesh.runs.*mesh.data.*4 x 4"),
    ({"num_seeds": 4, "mesh.runs": 3}, r"mesh.runs.*\(3\).*8"),
])
def test_bad_meshes_fail_before_anything_is_created(tmp_path, overrides, match):
  config = helpers.tiny_config("cascadevae", **overrides)
  with pytest.raises(config_lib.ConfigError, match=match):
    trainer.train(config, tmp_path / "run", dataset=helpers.TinyImages())
  assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("num_runs, devices, asked, want", [
    (8, 8, {}, (8, 1)), (16, 8, {}, (8, 1)), (1, 8, {}, (1, 8)), (10, 8, {}, (2, 4)),
    (8, 8, {"mesh.data": 2}, (4, 2)), (8, 8, {"mesh.runs": 2}, (2, 4)),
])
def test_mesh_shape_puts_runs_first(num_runs, devices, asked, want):
  assert runs.mesh_shape(helpers.tiny_config("betavae", **asked), num_runs, devices) == want


# -- N runs in one program equal the same runs alone -------------------------------------------
# Every program trains 3 steps from seed 4 (CascadeVAE's assignment on from step 2), a metrics
# line each step; sampled runs of each program (a run of each half or block of the devices'
# runs axis where it has them; one off the first seed and off every swept field's first value) are
# trained alone on one device (once per module: the programs share them) and must end with
# parameters within float32 rounding of the program's (rtol 2e-4, atol 2e-5) and the same
# metrics lines (`helpers.assert_same_metrics`).
_BASE = {"cascadevae": {"cascade.discrete_start": 1}, "ffvae": {},
         "partedvae": {"parted.z_capacity_steps": 4}}
_DATA = {"cascadevae": helpers.TinyImages, "ffvae": helpers.TinyAttributeImages,
         "partedvae": helpers.TinyDigits}
_ONE = {"mesh.num_devices": 1}
# PartedVAE's vmapped sweep holds 2e-5 at XLA's default optimisation level; at the tests' level 0
# (conftest) the two programs round differently and three Adam steps, dividing by sqrt(v), carry
# that into a few parameters of one unit's column (up to 6.4e-4 here). A run mixed up with another
# still fails: its metrics lines (the losses, compared at rtol 2e-4) differ.
_ATOL = {"partedvae_sweep_vmap": 1e-3}


def _config(method, **overrides):
  kw = {"num_steps": 3, "log_every": 1, "seed": 4, **_BASE[method], **overrides}
  return helpers.parted_config(**kw) if method == "partedvae" else helpers.tiny_config(method,
                                                                                       **kw)


# name: (method, the program's fields, the indices of the runs trained alone too). The runs of a
# sweep are its points in order (the last field fastest), each point's seeds in a row. CascadeVAE's
# swept beta_low starts at its default (1), so that the runs alone of several programs coincide.
PROGRAMS = {
    # seeds: unrolled copies with the host assignment callback (the CPU's layout), vmap
    "two_seeds_unroll": ("cascadevae", {"num_seeds": 2, "seed_layout": "unroll", **_ONE},
                         (0, 1)),
    "two_seeds_vmap": ("ffvae", {"num_seeds": 2, "seed_layout": "vmap", **_ONE}, (1,)),
    # sweeps: traced values of one program; the last point differs from the first (and from the
    # defaults) in every field: each swept value reaches its run
    "sweep_unroll": ("cascadevae", {"sweep": "cascade.beta_low=0.5|2;cascade.penalty=0.5|3",
                                    "seed_layout": "unroll", **_ONE}, (3,)),
    "sweep_vmap": ("ffvae", {"sweep": "ffvae.alpha=0|5;optimizer.learning_rate=1e-3|3e-3",
                             "seed_layout": "vmap", **_ONE}, (3,)),
    # PartedVAE: both of its updates and the plateau schedules under vmap
    "partedvae_sweep_vmap": ("partedvae", {"sweep": "parted.gamma_u=5|30;"
                                                    "parted.z_capacity_max=2|6",
                                           "seed_layout": "vmap", **_ONE}, (3,)),
    # 8 runs on 4 of the forced CPU devices (runs axis 4, two runs a device): a run of the first
    # and one of the second half
    "eight_runs_on_four_devices": ("cascadevae", {"num_seeds": 4, "sweep": "cascade.beta_low=1|2",
                                                  "mesh.num_devices": 4}, (1, 5)),
    # 4 runs as a (runs 2, data 2) mesh on 4 devices: each pair of devices steps two runs, each
    # device a half of their batches (the assignment over the gathered batch); a run of each
    # block of the runs axis
    "runs_and_data_axes": ("cascadevae", {"num_seeds": 2, "sweep": "cascade.beta_low=1|2",
                                          "mesh.num_devices": 4, "mesh.runs": 2,
                                          "mesh.data": 2}, (0, 3)),
}
_MESH = {"eight_runs_on_four_devices": {"runs": 4, "data": 1},
         "runs_and_data_axes": {"runs": 2, "data": 2}}


@pytest.fixture(scope="module")
def alone(tmp_path_factory):
  """``alone(method, **fields)``: (state, folder, the labels of its last host assignment) of that
  config trained alone on one device, once per module."""
  done = {}

  def get(method, **fields):
    config = _config(method, **_ONE, **fields)
    key = config.to_json()
    if key not in done:
      folder = tmp_path_factory.mktemp(f"alone_{method}")
      with CallbackCounter() as counter:
        state = trainer.train(config, folder, dataset=_DATA[method](), hooks=[counter.hook])
      if method == "cascadevae":  # t_d = 1: step 1 without a callback, then one a step
        assert counter.per_step == {1: 0, 2: 1, 3: 1}
        assert counter.calls[-1] == (config.batch_size, config.cascade.num_discrete)
      done[key] = state, folder, counter.labels[-1] if counter.labels else None
    return done[key]

  return get


@pytest.mark.slow
@pytest.mark.parametrize("name", PROGRAMS)
def test_the_runs_of_one_program_equal_their_runs_alone(tmp_path, alone, name):
  method, fields, sampled = PROGRAMS[name]
  program = _config(method, **fields)
  with CallbackCounter() as counter:
    state = trainer.train(program, tmp_path / "program", dataset=_DATA[method](),
                          hooks=[counter.hook])
  together = counter.labels[-1] if counter.labels else None
  cfgs = runs.run_configs(program)
  assert len(cfgs) == program.num_seeds * (4 if ";" in program.sweep else
                                           2 if program.sweep else 1)
  if name == "two_seeds_unroll":  # t_d = 1: no callback at step 1, then one a step for both runs
    assert counter.per_step == {1: 0, 2: 1, 3: 1}
    assert counter.calls[-1] == (2, program.batch_size, program.cascade.num_discrete)
  if name in _MESH:
    assert state.step.sharding.mesh.shape == _MESH[name]
    assert state.step.sharding.spec == jax.sharding.PartitionSpec("runs")
  if name == "eight_runs_on_four_devices":  # its first 4 runs in a program of 4, one a device,
    # equal to float32 rounding of the last place
    four = _config(method, num_seeds=4, sweep="cascade.beta_low=1", **{"mesh.num_devices": 4})
    four_state = trainer.train(four, tmp_path / "four", dataset=_DATA[method]())
    assert four_state.step.sharding.mesh.shape == {"runs": 4, "data": 1}
    assert four_state.step.sharding.spec == jax.sharding.PartitionSpec("runs")
    for cfg in cfgs[:4]:
      run = runs.run_name(program, cfg)
      helpers.assert_same_metrics(tmp_path / "four" / run, tmp_path / "program" / run,
                                  rtol=1e-6, atol=0)
  swept = [field for field, _ in runs.parse_sweep(program.sweep)] if program.sweep else []
  for i in sampled:
    cfg, run = cfgs[i], tmp_path / "program" / runs.run_name(program, cfgs[i])
    saved = json.loads((run / "config.json").read_text())
    assert saved["sweep"] == "" and saved["num_seeds"] == 1 and saved["seed"] == cfg.seed
    values = {}
    for field in swept:
      section, leaf = field.split(".")
      assert saved[section][leaf] == cfg[section][leaf]
      values[field] = cfg[section][leaf]
    alone_state, alone_dir, alone_labels = alone(method, seed=cfg.seed, **values)
    for a, b in zip(jax.tree_util.tree_leaves(state.params),
                    jax.tree_util.tree_leaves(alone_state.params), strict=True):
      np.testing.assert_allclose(np.asarray(a)[i], np.asarray(b), rtol=2e-4,
                                 atol=_ATOL.get(name, 2e-5))
    lines = helpers.metrics_lines(run)
    assert [l["step"] for l in lines] == [1, 2, 3]
    if method == "cascadevae":
      assert [l["discrete_active"] for l in lines] == [0.0, 1.0, 1.0]
    if name == "two_seeds_unroll":  # the labels of step 3: those the run solves alone
      np.testing.assert_array_equal(together[i], alone_labels)
    helpers.assert_same_metrics(run, alone_dir)
