"""NaN/Inf wherever they appear (a loss, the state, the host assignment's costs) end a run with
one line naming the step, the runs and the last good checkpoint (`disentangle.train.nonfinite`)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disentangle import assignment
from disentangle import command_line
from disentangle.train import nonfinite
from disentangle.train import trainer
from tests import helpers


def _costs():
  """Three problems of 8 rows and 4 classes; the second holds a NaN and a -Inf."""
  u = np.random.default_rng(0).normal(size=(3, 8, 4)).astype(np.float32)
  u[1, 2, 3], u[1, 5, 0] = np.nan, -np.inf
  return u


def test_host_solves_give_placeholders_for_non_finite_costs_and_record_them():
  """Under `Watch.solves` (the callback inside jit too) a problem with non-finite costs gets
  its non-finite rows' first non-finite class, the others their exact solve; the watch is due.
  Outside it, `assignment.assign` still raises."""
  u = _costs()
  watch = nonfinite.Watch(None, lambda: None, "ckpts")
  assert not watch.due
  with watch.solves():
    labels = np.asarray(jax.jit(lambda v: assignment.assign(v, 0.5))(jnp.asarray(u)))
  assert watch.due and watch.costs == "2 of 24 rows"
  for i in (0, 2):
    np.testing.assert_array_equal(labels[i], assignment.assign_host(u[i], 0.5))
  assert labels[1, 2] == 3 and labels[1, 5] == 0
  assert labels.dtype == np.int32 and ((labels >= 0) & (labels < 4)).all()
  with pytest.raises(ValueError, match="NaN/Inf"):
    assignment.assign(u, 0.5)


def test_the_first_non_finite_loss_is_named_with_its_runs_and_the_last_good_checkpoint():
  watch = nonfinite.Watch(["seed_0", "seed_1", "seed_2"], lambda: 4, "/run/checkpoints")
  watch.check_losses(5)  # nothing kept yet
  for step, loss in [(6, [1.0, 2.0, 3.0]), (7, [1.0, np.nan, np.inf]), (8, [np.nan] * 3)]:
    watch.add(step, jnp.asarray(loss, jnp.float32))
  with pytest.raises(nonfinite.NonFiniteError) as e:
    watch.check_losses(8)
  assert str(e.value) == (
      "loss became inf, nan at step 7 in runs seed_1, seed_2 (2 of 3); stopping: the last good "
      "checkpoint (step 4) in /run/checkpoints is intact")
  watch.check_losses(9)  # the kept losses were read once


def test_non_finite_costs_alone_and_a_non_finite_state_stop_too():
  watch = nonfinite.Watch(None, lambda: None, "/run/checkpoints")
  watch.add(3, jnp.float32(1.0))
  watch.costs = "1 of 8 rows"
  with pytest.raises(nonfinite.NonFiniteError, match=r"^the host assignment's costs became "
                     r"NaN/Inf \(1 of 8 rows\) by step 3; stopping: no checkpoint was saved"):
    watch.check_losses(3)
  runs = nonfinite.Watch(["a", "b"], lambda: 2, "/c")
  state = {"w": jnp.ones((2, 3)), "step": jnp.zeros((2,), jnp.int32)}
  runs.check_state(4, state, "saved")
  with pytest.raises(nonfinite.NonFiniteError, match=r"by step 4, not saved in run b \(1 of 2\); "
                     r"stopping: the last good checkpoint \(step 2\)"):
    runs.check_state(4, {**state, "w": state["w"].at[1, 2].set(jnp.inf)}, "saved")


@pytest.mark.slow
@pytest.mark.parametrize("fields", [{}, {"num_seeds": 2, "seed_layout": "unroll",
                                         "assignment_placement": "overlapped"}],
                         ids=["one_run", "two_runs_overlapped"])
def test_nan_costs_after_t_d_end_the_run_in_one_line(tmp_path, capsys, fields):
  """CascadeVAE from t_d = 2 on NaN images from step 5 on (the costs reach the host solve NaN):
  the run stops before its next log step (8), and the command line exits with status 2 and one
  line naming step 5, the runs and checkpoint 4; no traceback, nothing saved after step 4."""
  config = helpers.tiny_config("cascadevae", **{
      "num_steps": 8, "log_every": 8, "checkpoint_every": 4, "mesh.num_devices": 1, **fields})
  seen = []
  data = helpers.TinyImages(nan_after_calls=4 * config.num_seeds)  # a batch a seed a step
  capsys.readouterr()
  with pytest.raises(SystemExit) as stop, command_line.exits("resume"):
    trainer.train(config, tmp_path, dataset=data, hooks=[lambda state, step: seen.append(step)])
  assert stop.value.code == command_line.BAD_INPUT_STATUS and max(seen) < 7, seen
  err = capsys.readouterr().err.strip().splitlines()
  runs = " in runs seed_0, seed_1 (2 of 2)" if fields else ""
  assert len(err) == 1 and err[0].startswith(f"error: loss became nan at step 5{runs}; "), err
  assert f"the last good checkpoint (step 4) in {tmp_path.resolve() / 'checkpoints'}" in err[0]
  assert helpers.steps(tmp_path / "checkpoints") == [4]
