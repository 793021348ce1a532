"""SIGTERM / SIGINT during training: the step in flight ends, a checkpoint of that step is
written, the previous handlers come back, and training again resumes bitwise; two processes stop
at the same step."""
import json
import signal

import jax
import numpy as np
import pytest

from disentangle.train import preemption
from tests import helpers


def _leaves(state):
  return [np.asarray(x) for x in jax.tree_util.tree_leaves(state)]


def _lines(run):
  return [{k: v for k, v in json.loads(l).items() if k != "steps_per_sec"}
          for l in (run / "metrics.jsonl").read_text().splitlines()]


def _steps(folder):
  return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def test_no_signal_no_stop_and_handlers_restored():
  before = {s: signal.getsignal(s) for s in preemption.SIGNALS}
  with preemption.Signals(0) as stop:
    assert all(signal.getsignal(s) == stop._handle for s in preemption.SIGNALS)  # pylint: disable=protected-access
    assert not stop.stop_at(1)
    signal.raise_signal(signal.SIGTERM)
    assert stop.stop_at(2) and stop.received == signal.SIGTERM and stop.name == "SIGTERM"
  assert {s: signal.getsignal(s) for s in preemption.SIGNALS} == before


def test_a_second_signal_is_handled_as_before():
  """Ctrl-C twice: the first asks for a stop, the second is the usual KeyboardInterrupt (the
  handler in place before is pinned: a library run earlier in the process, asyncio's runner for
  one, can leave another)."""
  outer = signal.signal(signal.SIGINT, signal.default_int_handler)
  try:
    with pytest.raises(KeyboardInterrupt):
      with preemption.Signals(0) as stop:
        signal.raise_signal(signal.SIGINT)
        assert stop.received == signal.SIGINT
        signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
  finally:
    signal.signal(signal.SIGINT, outer)


@pytest.mark.slow
@pytest.mark.parametrize("signum,num_seeds", [(signal.SIGTERM, 1), (signal.SIGINT, 1),
                                              (signal.SIGTERM, 2)])
def test_signal_stops_after_the_step_with_its_checkpoint_and_resumes_bitwise(tmp_path, signum,
                                                                             num_seeds):
  """9 steps (checkpoints at 3, 6, 9; metrics lines at 2, 3, 4, 6, 8, 9): the signal arrives
  during step 4; the run stops after it with a checkpoint of step 4 (of every run: two seeds in
  one program share the workdir's checkpoint, each has its metrics), and training again ends
  where a straight run ends, with the same metrics lines."""
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  data = helpers.TinyImages()
  config = helpers.tiny_config(**{"mesh.num_devices": 1, "num_steps": 9,
                                  "num_seeds": num_seeds})
  runs = [""] if num_seeds == 1 else [f"seed_{config.seed + i}" for i in range(num_seeds)]
  straight = trainer.train(config, tmp_path / "a", dataset=data)
  before = {s: signal.getsignal(s) for s in preemption.SIGNALS}

  def send(state, step):
    del state
    if step == 4:
      signal.raise_signal(signum)

  with pytest.raises(preemption.Preempted) as e:
    trainer.train(config, tmp_path / "b", dataset=data, hooks=[send])
  assert (e.value.step, e.value.signum, e.value.exit_status) == (4, signum, 128 + signum)
  assert str(e.value).startswith(f"stopped by {signal.Signals(signum).name} at step 4 of 9, "
                                 f"checkpoint 4 in {tmp_path / 'b' / 'checkpoints'}")
  assert {s: signal.getsignal(s) for s in preemption.SIGNALS} == before
  assert _steps(tmp_path / "b" / "checkpoints") == [3, 4]
  assert all([l["step"] for l in _lines(tmp_path / "b" / r)] == [2, 3, 4] for r in runs)
  resumed = trainer.train(config, tmp_path / "b", dataset=data)
  for a, b in zip(_leaves(straight), _leaves(resumed)):
    np.testing.assert_array_equal(a, b)
  assert all(_lines(tmp_path / "b" / r) == _lines(tmp_path / "a" / r) for r in runs)


def _run_pair(workdir, steps, sigterm_at):
  return helpers.run_pair(workdir, steps, env=[
      {"DISENTANGLE_TEST_SIGTERM_AT": str(sigterm_at if i == 1 else 0)} for i in range(2)])


@pytest.mark.slow
def test_two_processes_stop_at_the_same_step_when_one_gets_sigterm(tmp_path):
  """Process 1 receives SIGTERM during step 2 of 12: both processes stop after the same step
  (JAX's preemption service agrees on it), with its checkpoint and its metrics line."""
  results = _run_pair(tmp_path, 12, sigterm_at=2)
  stops = [r["stopped"] for r in results]
  assert stops[0] == stops[1] and 2 <= stops[0] < 12, results
  assert [r["signal"] for r in results] == ["SIGTERM", "SIGTERM"]
  assert results[0]["params_sha256"] == results[1]["params_sha256"]
  assert stops[0] in _steps(tmp_path / "checkpoints")
  lines = [json.loads(l) for l in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert [l["step"] for l in lines] == list(range(1, stops[0] + 1))


@pytest.mark.slow
def test_an_exception_in_the_loop_closes_the_writers_and_the_checkpointer(tmp_path, monkeypatch):
  """An error raised from a hook at step 5 of 9 (as an evaluator's or a writer's would be): the
  metric writers (their TensorBoard files) and the checkpointer are closed, no thread of the
  run is left, the lines written are on disk, and the same call resumes bitwise."""
  import threading  # pylint: disable=g-import-not-at-top

  from disentangle.train import checkpoint  # pylint: disable=g-import-not-at-top
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  from disentangle.train import writers  # pylint: disable=g-import-not-at-top
  data = helpers.TinyImages()
  config = helpers.tiny_config(**{"mesh.num_devices": 1, "num_steps": 9})
  straight = trainer.train(config, tmp_path / "a", dataset=data)
  threads = set(threading.enumerate())  # library pools started by the first run stay
  closed = []
  for cls in (writers.MetricWriter, checkpoint.Checkpointer):
    monkeypatch.setattr(cls, "close", lambda self, real=cls.close: (closed.append(self),
                                                                     real(self))[1])

  def fail(state, step):
    del state
    if step == 5:
      raise RuntimeError("the evaluator failed at step 5")

  with pytest.raises(RuntimeError, match="evaluator failed"):
    trainer.train(config, tmp_path / "b", dataset=data, hooks=[fail])
  assert sorted(type(c).__name__ for c in closed) == ["Checkpointer", "MetricWriter"]
  assert [t.name for t in threading.enumerate() if t not in threads] == []
  assert [l["step"] for l in _lines(tmp_path / "b")] == [2, 3, 4]
  assert _steps(tmp_path / "b" / "checkpoints") == [3]
  monkeypatch.undo()
  resumed = trainer.train(config, tmp_path / "b", dataset=data)
  for a, b in zip(_leaves(straight), _leaves(resumed)):
    np.testing.assert_array_equal(a, b)
  assert _lines(tmp_path / "b") == _lines(tmp_path / "a")


class _Clock:
  """A `time.time()` the test moves (`preemption` reads the deadline's clock through it)."""

  def __init__(self):
    self.now = 1000.0

  def time(self):
    return self.now


class _SlowEvaluator:
  """An evaluator of one metric whose run takes ``seconds`` of wall time."""

  def __init__(self, seconds, calls):
    self.seconds, self.calls = seconds, calls

  def run(self, params, step):
    import time  # pylint: disable=g-import-not-at-top
    time.sleep(self.seconds)
    self.calls.append(step)
    return {"eval/mean_param": float(np.mean(jax.tree_util.tree_leaves(params)[0]))}


@pytest.mark.slow
@pytest.mark.parametrize("where", ["step", "evaluation"])
def test_deadline_stops_with_a_checkpoint_and_resumes_bitwise(tmp_path, monkeypatch, where):
  """9 steps, an evaluation every 3 (0.2 s each). ``step``: the clock passes the deadline during
  step 4: the run stops after it with checkpoint 4. ``evaluation``: at step 6 the deadline is
  0.1 s away, less than the last evaluation took: that evaluation is not started, the run stops
  with checkpoint 6, and the resumed run evaluates step 6 first. Either way DeadlineReached (exit
  status 124), the signal handlers as before, and training again ends bitwise where a straight
  run ends, with the same metrics lines and evaluations."""
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  data = helpers.TinyImages()
  config = helpers.tiny_config(**{"mesh.num_devices": 1, "num_steps": 9, "eval_every": 3})
  calls = []
  factory = lambda method, run_dir, i: _SlowEvaluator(0.2, calls)  # noqa: E731
  straight = trainer.train(config, tmp_path / "a", dataset=data, evaluator_factory=factory)
  assert calls == [3, 6, 9]
  clock = _Clock()
  monkeypatch.setattr(preemption, "time", clock)
  deadline = clock.now + 60

  def move(state, step):
    del state
    if where == "step" and step == 4:
      clock.now = deadline
    if where == "evaluation" and step == 5:
      clock.now = deadline - 0.1

  before = {s: signal.getsignal(s) for s in preemption.SIGNALS}
  calls.clear()
  with pytest.raises(preemption.DeadlineReached) as e:
    trainer.train(config, tmp_path / "b", dataset=data, evaluator_factory=factory,
                  hooks=[move], deadline=deadline)
  stop = 4 if where == "step" else 6
  assert (e.value.step, e.value.exit_status) == (stop, 124)
  assert str(e.value).startswith(f"stopped at the deadline at step {stop} of 9, checkpoint "
                                 f"{stop} in {tmp_path / 'b' / 'checkpoints'}")
  assert {s: signal.getsignal(s) for s in preemption.SIGNALS} == before
  assert _steps(tmp_path / "b" / "checkpoints") == [3, stop]
  assert calls == [3]  # the evaluation of step 6 was not started
  pending = tmp_path / "b" / trainer.PENDING_EVAL
  assert pending.exists() == (where == "evaluation")
  monkeypatch.undo()
  resumed = trainer.train(config, tmp_path / "b", dataset=data, evaluator_factory=factory)
  assert calls == [3, 6, 9] and not pending.exists()
  for a, b in zip(_leaves(straight), _leaves(resumed)):
    np.testing.assert_array_equal(a, b)
  assert _lines(tmp_path / "b") == _lines(tmp_path / "a")


def test_too_late_answers_whether_work_would_end_past_the_deadline(monkeypatch):
  clock = _Clock()
  monkeypatch.setattr(preemption, "time", clock)
  with preemption.Signals(0) as stop:  # no deadline: never late
    assert not stop.too_late(1e9) and not stop.stop_at(1)
  with preemption.Signals(0, deadline=clock.now + 10) as stop:
    assert not stop.too_late(9.5) and not stop.stop_at(1)
    assert stop.too_late(10.5) and stop.at_deadline and stop.name == "the deadline"
  with preemption.Signals(0, deadline=clock.now + 10) as stop:
    clock.now += 10
    assert stop.stop_at(2) and stop.at_deadline
