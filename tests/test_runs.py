"""Several runs in one program (`disentangle.train.runs`): no discrete work before t_d, sweeps
equal to their runs alone, runs over a (runs, data) mesh, and the bad inputs."""
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
  """Counts the host assignment callbacks run by each step (the step is waited for)."""

  def __init__(self, monkeypatch):
    self.calls, self.labels = [], []
    original = assignment._assign_host  # pylint: disable=protected-access

    def counting(u, penalty):
      self.calls.append(np.shape(u))
      self.labels.append(original(u, penalty))
      return self.labels[-1]

    monkeypatch.setattr(assignment, "_assign_host", counting)
    self.per_step = {}

  def hook(self, state, done):
    jax.block_until_ready(state)
    self.per_step[done] = len(self.calls) - sum(self.per_step.values())


@pytest.mark.slow
@pytest.mark.parametrize("num_seeds, layout", [(1, "auto"), (2, "vmap"), (3, "unroll")])
def test_no_assignment_callback_before_discrete_start(tmp_path, monkeypatch, num_seeds, layout):
  """t_d = 2: steps 1 and 2 run no callback at all, step 3 exactly one, which receives every
  run's problem (u[N, B, S]) under both layouts; unrolled, its labels are those each run solves
  alone."""
  counter = CallbackCounter(monkeypatch)
  config = helpers.tiny_config("cascadevae", num_steps=3, num_seeds=num_seeds, seed_layout=layout,
                               **{"mesh.num_devices": 1})
  trainer.train(config, tmp_path / "runs", dataset=helpers.TinyImages(), hooks=[counter.hook])
  assert counter.per_step == {1: 0, 2: 0, 3: 1}
  if num_seeds == 1:
    return
  assert counter.calls[-1] == (num_seeds, config.batch_size, config.cascade.num_discrete)
  if layout == "unroll":
    together = counter.labels[-1]
    for i in range(num_seeds):
      alone = helpers.tiny_config("cascadevae", num_steps=3, seed=config.seed + i,
                                  **{"mesh.num_devices": 1})
      trainer.train(alone, tmp_path / f"alone{i}", dataset=helpers.TinyImages())
      np.testing.assert_array_equal(together[i], counter.labels[-1])


@pytest.mark.slow
@pytest.mark.parametrize("method, dataset, sweep, layout", [
    ("cascadevae", helpers.TinyImages, "cascade.beta_low=0.5|2;cascade.penalty=0.5|3", "unroll"),
    ("ffvae", helpers.TinyAttributeImages, "ffvae.alpha=0|10;optimizer.learning_rate=1e-3|3e-3",
     "vmap"),
])
def test_a_sweep_equals_its_runs_alone(tmp_path, method, dataset, sweep, layout):
  data = dataset()
  kw = {"num_steps": 3, "log_every": 1, "mesh.num_devices": 1, "seed": 4}
  grid = helpers.tiny_config(method, sweep=sweep, seed_layout=layout, **kw)
  trainer.train(grid, tmp_path / "grid", dataset=data)
  cfgs = runs.run_configs(grid)
  assert len(cfgs) == 4
  for point in (cfgs[1], cfgs[2]):  # off the first point: its values reach the program
    name = runs.run_name(grid, point)
    saved = json.loads((tmp_path / "grid" / name / "config.json").read_text())
    assert saved["sweep"] == "" and saved["num_seeds"] == 1
    alone = helpers.tiny_config(method, **kw)
    for field, _ in runs.parse_sweep(sweep):
      section, leaf = field.split(".")
      assert saved[section][leaf] == point[section][leaf]
      alone[section][leaf] = point[section][leaf]
    trainer.train(alone, tmp_path / name, dataset=data)
    helpers.assert_same_metrics(tmp_path / "grid" / name, tmp_path / name)


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


@pytest.mark.slow
def test_runs_over_eight_devices_equal_their_runs_alone(tmp_path):
  """8 runs (one per device) and 16 (two per device) on the 8 forced CPU devices, runs axis 8:
  every run of the 8 equals its run among the 16, and sampled runs of both equal the same
  settings trained alone on one device (the assignment on from step 2)."""
  data = helpers.TinyImages()
  kw = {"num_steps": 3, "log_every": 1, "num_seeds": 8, "cascade.discrete_start": 1}
  eight = helpers.tiny_config("cascadevae", sweep="cascade.beta_low=0.5", **kw)
  sixteen = helpers.tiny_config("cascadevae", sweep="cascade.beta_low=0.5|2", **kw)
  for name, config in (("eight", eight), ("sixteen", sixteen)):
    state = trainer.train(config, tmp_path / name, dataset=data)
    assert state.step.sharding.mesh.shape == {"runs": 8, "data": 1}
    assert state.step.sharding.spec == jax.sharding.PartitionSpec("runs")
  cfgs = runs.run_configs(sixteen)
  for cfg in cfgs[:8]:
    run = runs.run_name(sixteen, cfg)
    helpers.assert_same_metrics(tmp_path / "eight" / run, tmp_path / "sixteen" / run, rtol=1e-6, atol=0)
  for cfg in (cfgs[0], cfgs[7], cfgs[12]):
    run = runs.run_name(sixteen, cfg)
    alone = helpers.tiny_config("cascadevae", **{"num_steps": 3, "log_every": 1,
                                                 "cascade.discrete_start": 1,
                                                 "mesh.num_devices": 1, "seed": cfg.seed,
                                                 "cascade.beta_low": cfg.cascade.beta_low})
    trainer.train(alone, tmp_path / run, dataset=data)
    helpers.assert_same_metrics(tmp_path / "sixteen" / run, tmp_path / run)


@pytest.mark.slow
def test_runs_and_data_axes_both_split_equal_their_runs_alone(tmp_path):
  """4 runs on 4 of the forced CPU devices as a (runs 2, data 2) mesh: each pair of devices
  steps two runs, each device a half of their batches (the assignment on from step 2, over the
  gathered batch); sampled runs equal the same settings trained alone on one device."""
  data = helpers.TinyImages()
  kw = {"num_steps": 3, "log_every": 1, "cascade.discrete_start": 1}
  config = helpers.tiny_config("cascadevae", num_seeds=2, sweep="cascade.beta_low=0.5|2",
                               **kw, **{"mesh.num_devices": 4, "mesh.runs": 2, "mesh.data": 2})
  state = trainer.train(config, tmp_path / "mesh", dataset=data)
  assert state.step.sharding.mesh.shape == {"runs": 2, "data": 2}
  cfgs = runs.run_configs(config)
  for cfg in (cfgs[1], cfgs[2]):  # a run of each block of the runs axis
    run = runs.run_name(config, cfg)
    lines = helpers.metrics_lines(tmp_path / "mesh" / run)
    assert [l["discrete_active"] for l in lines] == [0.0, 1.0, 1.0]
    alone = helpers.tiny_config("cascadevae", **kw, **{"mesh.num_devices": 1, "seed": cfg.seed,
                                                       "cascade.beta_low": cfg.cascade.beta_low})
    trainer.train(alone, tmp_path / run, dataset=data)
    helpers.assert_same_metrics(tmp_path / "mesh" / run, tmp_path / run)


@pytest.mark.slow
def test_a_partedvae_sweep_under_vmap_equals_its_runs_alone(tmp_path):
  """PartedVAE's loss weights and capacities as traced values of one vmapped program (both of its
  updates, the plateau schedules): runs off the first point equal their settings alone."""
  data = helpers.TinyDigits()
  sweep = "parted.gamma_u=5|30;parted.z_capacity_max=2|6"
  kw = {"num_steps": 3, "log_every": 1, "mesh.num_devices": 1, "seed": 4,
        "parted.z_capacity_steps": 4}
  grid = helpers.parted_config(sweep=sweep, seed_layout="vmap", **kw)
  trainer.train(grid, tmp_path / "grid", dataset=data)
  cfgs = runs.run_configs(grid)
  assert len(cfgs) == 4
  for point in (cfgs[1], cfgs[2]):
    name = runs.run_name(grid, point)
    alone = helpers.parted_config(**kw, **{"parted.gamma_u": point.parted.gamma_u,
                                                "parted.z_capacity_max":
                                                    point.parted.z_capacity_max})
    trainer.train(alone, tmp_path / name, dataset=data)
    helpers.assert_same_metrics(tmp_path / "grid" / name, tmp_path / name)
