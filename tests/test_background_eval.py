"""Evaluation beside training (`disentangle.train.background`): the eval points of every run
encoded on the device in one call equal each run's own encoding; a run evaluated in the
background writes what a run evaluated in the loop writes; a SIGTERM or a kill during a
background evaluation loses nothing; an evaluation's error stops the loop."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import jax
import numpy as np
import pytest

from disentangle import methods
from disentangle.evaluation import encodings
from disentangle.evaluation import evaluate_run
from disentangle.evaluation import evaluator as evaluator_lib
from disentangle.train import preemption
from disentangle.train import runs as runs_lib
from disentangle.train import seeds
from disentangle.train import trainer
from disentangle.train import writers
from tests import faults
from tests import helpers


def _files(run, folder, pattern):
  return {p.relative_to(run): p.read_bytes() for p in sorted((run / folder).glob(pattern))}


def _train(config, workdir, data, **kwargs):
  return trainer.train(config, workdir, dataset=data,
                       evaluator_factory=evaluator_lib.factory(config, data), **kwargs)


def _leaves(tree):
  return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


@pytest.mark.slow
@pytest.mark.parametrize("method", ["betavae", "cascadevae"])
def test_all_runs_encoded_at_once_equal_each_runs_own_encoding(tmp_path, method):
  """Two runs, 50 points in batches of 16 (the last padded), chunks of two batches: every run's
  encodings equal `Evaluator.run`'s own (one call per batch on host parameters) bitwise."""
  config = helpers.tiny_config(method, **{"eval.num_points": 50})
  data = helpers.TinyImages(n=64)
  built = methods.build(config, data.image_shape)
  params = seeds.stack([jax.jit(built.init)(jax.random.PRNGKey(s)).params for s in (0, 1)])
  evaluators = [evaluator_lib.Evaluator(config, built, tmp_path / str(i), dataset=data,
                                        batch_size=16) for i in range(2)]
  encoder = evaluator_lib.RunsEncoder(evaluators, config,
                                      chunk_bytes=2 * 16 * 4 * 32 * 32)
  assert encoder.chunk == 32
  reps = encoder(params)
  for i, ev in enumerate(evaluators):
    params_i = jax.device_get(seeds.take(params, i))
    want, _ = encodings.encode_streamed(
        lambda a, b: data.get_images(ev.indices[a:b]), len(ev.indices),
        lambda x, p=params_i, ev=ev: ev._represent(p, x), ev.batch_size)  # pylint: disable=protected-access
    for got_field, want_field in zip(reps[i], want):
      assert (got_field is None) == (want_field is None)
      if want_field is not None:
        np.testing.assert_array_equal(got_field, want_field)
  assert evaluator_lib.RunsEncoder.of(evaluators[:1] + [object()], config) is None


@pytest.mark.slow
def test_background_evaluation_writes_what_the_loop_writes(tmp_path):
  """Two runs of CascadeVAE, an evaluation every 2 of 4 steps, a metrics line every step and
  the best validation accuracy kept: background evaluation and evaluation in the loop write the
  same ``eval/step_*.json`` and pictures byte for byte, the same metrics lines (without the
  timing) in the same order and the same kept checkpoints."""
  data = helpers.TinyImages(n=64)
  fields = {"mesh.num_devices": 1, "num_seeds": 2, "num_steps": 4, "eval_every": 2, "log_every": 1,
            "dataset.train_split": "train50k", "eval.select": "best_validation",
            "eval.select_metric": "accuracy", "eval.cluster_accuracy": True,
            "eval.num_points": 50, "eval.num_images": 8}
  states = {}
  for background in (True, False):
    config = helpers.tiny_config("cascadevae", **fields, **{"eval.background": background})
    states[background] = _train(config, tmp_path / str(background), data)
  for a, b in zip(_leaves(states[True]), _leaves(states[False])):
    np.testing.assert_array_equal(a, b)
  for i, run in enumerate(("seed_0", "seed_1")):
    bg, fg = tmp_path / "True" / run, tmp_path / "False" / run
    assert helpers.lines(bg) == helpers.lines(fg)
    assert sum("eval/accuracy" in l for l in helpers.lines(bg)) == 2
    for folder, pattern in (("eval", "step_*.json"), ("images", "*.png")):
      assert _files(bg, folder, pattern) == _files(fg, folder, pattern) != {}
    cfg = runs_lib.run_configs(config)[i]  # the run's own config, as the trainer builds it
    method = methods.build(cfg, data.image_shape)
    kept = []
    for side in (bg, fg):
      record = evaluate_run.read_selection_record(side)
      kept.append((record, evaluate_run.restore_selected(side, cfg, method, record["step"])[0]))
    assert kept[0][0] == kept[1][0]
    for a, b in zip(_leaves(kept[0][1]), _leaves(kept[1][1])):
      np.testing.assert_array_equal(a, b)
    assert not (tmp_path / "True" / trainer.PENDING_EVAL).exists()


def _slowed(monkeypatch, seconds, log, step_slowed):
  """`Evaluator.run` takes ``seconds`` more at ``step_slowed``; ``log`` gets (step, end time) of
  each."""
  run = evaluator_lib.Evaluator.run

  def slow(self, params, step, rep=None):
    time.sleep(seconds if step == step_slowed else 0.0)
    out = run(self, params, step, rep)
    log.append((step, time.monotonic()))
    return out
  monkeypatch.setattr(evaluator_lib.Evaluator, "run", slow)


def _config(**fields):
  base = {"mesh.num_devices": 1, "num_steps": 9, "eval_every": 3, "log_every": 1,
          "eval.num_points": 50, "eval.num_images": 8}
  return helpers.tiny_config(**dict(base, **fields))


@pytest.fixture(scope="module")
def never_stopped(tmp_path_factory):
  """`_config` evaluated in the loop, never stopped: what a stopped or killed run must end as."""
  run = tmp_path_factory.mktemp("background_eval") / "never_stopped"
  _train(_config(**{"eval.background": False}), run, helpers.TinyImages(n=64))
  return run


def _assert_same_runs(a, b, steps):
  """``a`` ends as ``b`` (`faults.compare`; config.json may differ by ``eval.background``)."""
  assert [d for d in faults.compare(a, b, steps) if d != "config.json"] == []
  assert _files(a, "images", "*.png") == _files(b, "images", "*.png")


@pytest.mark.slow
def test_sigterm_during_a_background_evaluation_loses_nothing(tmp_path, monkeypatch,
                                                              never_stopped):
  """The evaluation of step 3 takes a second; SIGTERM arrives during step 4, while it runs: the
  run stops at step 4 once that evaluation has written everything, and the same call resumes
  and ends equal to a run evaluated in the loop, never stopped."""
  data = helpers.TinyImages(n=64)
  log = []
  _slowed(monkeypatch, 1.0, log, 3)
  sent = []

  def send(state, step):
    del state
    if step == 4:
      sent.append(time.monotonic())
      signal.raise_signal(signal.SIGTERM)

  with pytest.raises(preemption.Preempted) as e:
    _train(_config(), tmp_path / "b", data, hooks=[send])
  assert e.value.step == 4
  assert log and log[0][0] == 3 and log[0][1] > sent[0]  # still running at the signal
  assert (tmp_path / "b" / "eval" / "step_3.json").exists()
  assert not (tmp_path / "b" / trainer.PENDING_EVAL).exists()
  assert [l["step"] for l in helpers.lines(tmp_path / "b")] == [1, 2, 3, 3, 4]
  _train(_config(), tmp_path / "b", data)
  _assert_same_runs(tmp_path / "b", never_stopped, 9)


_KILLED_CHILD = """
import os, pathlib, signal, sys, time
import jax
jax.config.update("jax_num_cpu_devices", 8)  # as the tests' process (conftest): the same program
from disentangle.evaluation import evaluator as evaluator_lib
from disentangle.train import trainer, writers
from tests import helpers
from tests.test_background_eval import _config
workdir = pathlib.Path(sys.argv[1])
write = writers.MetricWriter.write
def killing(self, step, metrics):
  write(self, step, metrics)
  if step == 3 and any(k.startswith("eval/") for k in metrics):
    for _ in range(6000):  # the loop saves checkpoint 3 while this evaluation runs
      if (workdir / "checkpoints" / "3").is_dir():
        os.kill(os.getpid(), signal.SIGKILL)
      time.sleep(0.01)
    sys.exit(3)
writers.MetricWriter.write = killing
config, data = _config(), helpers.TinyImages(n=64)
trainer.train(config, workdir, dataset=data,
              evaluator_factory=evaluator_lib.factory(config, data))
"""


@pytest.mark.slow
def test_a_run_killed_during_a_background_evaluation_evaluates_that_step_again(tmp_path,
                                                                              never_stopped):
  """SIGKILL inside the background evaluation of step 3, after its metrics line and after the
  loop saved checkpoint 3: the resumed run starts at step 3, evaluates it again (its line
  once) and ends equal to a run never killed (evaluated in the loop)."""
  data = helpers.TinyImages(n=64)
  run = tmp_path / "b"
  env = dict(os.environ, PYTHONPATH=str(helpers.REPO))
  proc = subprocess.run([sys.executable, "-c", _KILLED_CHILD, str(run)], cwd=helpers.REPO, env=env,
                        capture_output=True, text=True, timeout=600)
  assert proc.returncode == -signal.SIGKILL, proc.stdout[-2000:] + proc.stderr[-3000:]
  assert json.loads((run / trainer.PENDING_EVAL).read_text()) == {"step": 3}
  assert sum(l["step"] == 3 and "eval/mi_per_dim" in l for l in helpers.lines(run)) == 1
  _train(_config(), run, data)
  assert not (run / trainer.PENDING_EVAL).exists()
  _assert_same_runs(run, never_stopped, 9)


@pytest.mark.slow
def test_an_error_in_a_background_evaluation_stops_the_loop(tmp_path, monkeypatch):
  """The evaluation of step 3 fails on the worker thread: the loop raises its error at a
  later step, with the writers closed, no thread left and the lines of steps 1-3 written, as
  when the evaluation runs in the loop."""
  data = helpers.TinyImages(n=64)
  threads = set(threading.enumerate())
  closed = []
  monkeypatch.setattr(writers.MetricWriter, "close",
                      lambda self, real=writers.MetricWriter.close: (closed.append(self),
                                                                     real(self))[1])

  def fail(self, params, step, rep=None):
    raise RuntimeError(f"the evaluation failed at step {step}")
  monkeypatch.setattr(evaluator_lib.Evaluator, "run", fail)
  for background in (True, False):
    closed.clear()
    with pytest.raises(RuntimeError, match="evaluation failed at step 3"):
      _train(_config(**{"eval.background": background}), tmp_path / str(background), data)
    assert len(closed) == 1
    assert [t for t in threading.enumerate() if t not in threads and
            t.name.startswith("evaluation")] == []
    assert [l["step"] for l in helpers.lines(tmp_path / str(background))] == [1, 2, 3]
