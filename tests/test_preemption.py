"""SIGTERM / SIGINT and the deadline: the handlers installed and restored, a second signal handled
as before, the deadline's arithmetic, and two processes stopping at the same step. A run stopped
by a signal or its deadline and resumed bitwise: tests/test_resume.py."""
import json
import signal

import pytest

from disentangle.train import preemption
from tests import helpers


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
  assert stops[0] in helpers.steps(tmp_path / "checkpoints")
  lines = [json.loads(l) for l in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert [l["step"] for l in lines] == list(range(1, stops[0] + 1))


class _Clock:
  """A `time.time()` the test moves (`preemption` reads the deadline's clock through it)."""

  def __init__(self):
    self.now = 1000.0

  def time(self):
    return self.now


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
