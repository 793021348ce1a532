"""An evaluation's duration known before it starts (`disentangle.train.eval_duration`): the
estimate's arithmetic, the timed batch, and the first evaluation of a trainer and of a table's
program not started when it would end past the deadline (an injected batch time: no timing)."""
import json
import time
import types

import numpy as np
import pytest

from disentangle.evaluation import evaluate_run
from disentangle.evaluation import evaluator
from disentangle.reproduce import plan
from disentangle.reproduce import run
from disentangle.train import background
from disentangle.train import eval_duration as duration
from disentangle.train import preemption
from tests import helpers


def test_estimate_is_batches_times_the_batch_plus_the_metrics():
  e = duration.Estimate(images=1000, batch_size=192, batch_s=0.05, metric_s=2.0)
  assert e.batches == 6  # 5 full batches and a padded one
  assert e.seconds == pytest.approx(6 * 0.05 + 2.0)
  assert e.words() == ("about 2 s (1,000 images in 6 batches of 192 at 50.0 ms each + 2.0 s of "
                       "metrics)")
  assert duration.Estimate(192, 192, 0.5).seconds == 0.5


def test_time_batch_times_the_call_after_the_compiling_one():
  calls, ticks = [], iter([10.0, 10.75])
  seconds = duration.time_batch(lambda x: calls.append(len(x)) or np.zeros(1), np.ones((4, 2)),
                                clock=lambda: next(ticks))
  assert calls == [4, 4] and seconds == pytest.approx(0.75)


def test_expected_seconds_estimates_once_then_reads_the_last_evaluation(monkeypatch):
  ticks = iter([5.0, 8.5])  # the evaluation's start and end (`Evaluations._run`)
  monkeypatch.setattr(background, "time", types.SimpleNamespace(perf_counter=lambda: next(ticks)))
  evals, asked = background.Evaluations(background=False, pending=None), []
  estimate = lambda: asked.append(1) or 42.0  # noqa: E731
  assert evals.expected_seconds(estimate) == 42.0 and evals.expected_seconds(estimate) == 42.0
  assert asked == [1]
  evals.submit(3, lambda: None)
  assert evals.expected_seconds(estimate) == pytest.approx(3.5) and asked == [1]


def _cascade_config(**overrides):
  return helpers.tiny_config("cascadevae", **{
      "num_steps": 4, "eval_every": 2, "checkpoint_every": 2, "cascade.discrete_start": 0,
      "cascade.num_discrete": 4, "eval.num_points": 64, "eval.information": False,
      "eval.num_images": 4, "mesh.num_devices": 1, **overrides})


def test_first_evaluation_estimate_counts_every_runs_eval_points():
  from disentangle import methods  # pylint: disable=g-import-not-at-top
  config, data = _cascade_config(), helpers.TinyImages(n=100)
  method = methods.build(config, data.image_shape)
  evs = [evaluator.Evaluator(config, method, f"/nonexistent/{i}", dataset=data, batch_size=24)
         for i in range(3)]
  timed = []

  def timer(encode, images):
    timed.append(images.shape)
    return 0.25

  taken = []
  estimate = duration.of_evaluators(evs, "params", lambda p, i: taken.append((p, i)) or p,
                                    timer=timer)
  assert (estimate.images, estimate.batch_size, estimate.batch_s) == (3 * 64, 24, 0.25)
  assert estimate.seconds == pytest.approx(8 * 0.25)  # ceil(192 / 24) batches
  assert timed == [(24, 32, 32, 1)] and taken == [("params", 0)]
  assert duration.of_evaluators([object()], None, lambda p, i: p) is None  # unknown evaluators


@pytest.mark.slow
def test_trainer_does_not_start_a_first_evaluation_that_would_cross_the_deadline(
    tmp_path, monkeypatch, capsys):
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  config, data = _cascade_config(), helpers.TinyImages(n=64)
  factory = evaluator.factory(config, data)
  batch_s, timed = [1000.0], []
  monkeypatch.setattr(duration, "time_batch",
                      lambda encode, images: timed.append(len(images)) or batch_s[0])
  workdir = tmp_path / "run"
  with pytest.raises(preemption.DeadlineReached, match="at step 2 of 4") as e:
    trainer.train(config, workdir, dataset=data, evaluator_factory=factory,
                  deadline=time.time() + 600)  # 1000 s a batch: far past it
  assert e.value.step == 2 and timed == [64]  # one batch of the 64 eval points, timed once
  assert "the evaluation of step 2 would take 1000 s (estimated), past the deadline: not " \
         "started" in capsys.readouterr().out
  assert json.loads((workdir / trainer.PENDING_EVAL).read_text()) == {"step": 2}
  assert not (workdir / "eval").exists()
  # With a fast batch the resumed run evaluates step 2 first, then step 4 (the second one's
  # estimate is the first one's duration: nothing more timed).
  batch_s[0] = 1e-6
  trainer.train(config, workdir, dataset=data, evaluator_factory=factory,
                deadline=time.time() + 600)
  assert sorted(p.name for p in (workdir / "eval").iterdir()) == ["step_2.json", "step_4.json"]
  assert timed == [64] and not (workdir / trainer.PENDING_EVAL).exists()


@pytest.mark.slow
def test_a_table_does_not_start_an_evaluation_that_would_cross_the_deadline(
    tmp_path, monkeypatch):
  """The run evaluation's estimate: every example of the labelled set (`images_of_run`) in
  batches of ``encode_batch_size``, each as long as the injected batch time."""
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  from experiments.configs import common  # pylint: disable=g-import-not-at-top
  config = _cascade_config()
  module = helpers.fake_experiment({"tiny": config})
  table = plan.Table("tiny", "a tiny table", "test", ("accuracy",),
                     (plan.Row("tiny", "4", "fake", "tiny"),), "final", seeds=1)
  kwargs = dict(scale=lambda c, f: common.scale_schedule(c, f, round_steps=True),
                dataset=helpers.TinyImages(n=64),
                evaluate_kwargs={"mig_points": 200, "encode_batch_size": 16})
  monkeypatch.setattr(trainer, "_first_evaluation", lambda *a: 0.0)  # tested above
  batch_s = [100.0]
  monkeypatch.setattr(duration, "time_batch", lambda encode, images: batch_s[0])
  lines = []
  with pytest.raises(preemption.DeadlineReached, match="before the evaluation of program 1/1"):
    run.run_table(table, tmp_path / "t", {"fake": module}, deadline=time.time() + 300,
                  log=lines.append, **kwargs)
  assert any("its evaluation would take about 400 s (64 images in 4 batches of 16 at 100000.0 "
             "ms each)" in line for line in lines), lines
  assert not (tmp_path / "t" / "runs" / "fake_tiny" / "results.json").exists()
  batch_s[0] = 1e-6
  data = run.run_table(table, tmp_path / "t", {"fake": module}, deadline=time.time() + 300,
                       log=lines.append, **kwargs)
  assert data["lines"][0]["status"] == "evaluated"
  assert "[1/1] fake:tiny (1 runs, 4 steps): trained" in lines


def test_metric_seconds_are_the_time_outside_encoding():
  one = {"timings_s": {"total_s": 10.0, "encode_total_s": 6.0, "encode_images_s": 2.0,
                       "encode_labelled_s": 1.5, "mig_s": 0.5}}
  assert evaluate_run.metric_seconds(one) == pytest.approx(2.5)
  assert evaluate_run.metric_seconds({"seeds": [one, one]}) == pytest.approx(5.0)


def test_images_of_run_counts_the_labelled_set_or_the_eval_points():
  from disentangle import methods  # pylint: disable=g-import-not-at-top
  data = helpers.TinyImages(n=300)
  settings = evaluate_run.RunSettings()
  cascade = _cascade_config(**{"eval.num_points": 50})
  assert evaluate_run.images_of_run(cascade, methods.build(cascade, data.image_shape), data,
                                    None, settings) == 300  # the labelled set, once
  beta = helpers.tiny_config("betavae", **{"eval.num_points": 50})
  assert evaluate_run.images_of_run(beta, methods.build(beta, data.image_shape), data, None,
                                    settings) == 50  # no discrete code: the eval points
