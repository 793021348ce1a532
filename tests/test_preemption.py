"""SIGTERM / SIGINT during training: the step in flight ends, a checkpoint of that step is
written, the previous handlers come back, and training again resumes bitwise; two processes stop
at the same step."""
import json
import os
import signal
import subprocess
import sys

import jax
import numpy as np
import pytest

from disentangle.train import preemption
from tests import helpers
from tests.conftest import REPO


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
  from tests.test_distributed import _free_port  # pylint: disable=g-import-not-at-top
  port = _free_port()
  env = dict(os.environ, PYTHONPATH=str(REPO), DISENTANGLE_NO_DOWNLOAD="1")
  procs = [subprocess.Popen(
      [sys.executable, "-m", "tests.distributed_worker", str(i), str(port), str(workdir),
       str(steps)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      env=dict(env, DISENTANGLE_TEST_SIGTERM_AT=str(sigterm_at if i == 1 else 0)))
           for i in range(2)]
  results = []
  for p in procs:
    out, _ = p.communicate(timeout=420)
    assert p.returncode == 0, out[-3000:]
    results.append(json.loads([l for l in out.splitlines() if l.startswith("RESULT ")][-1][7:]))
  return sorted(results, key=lambda r: r["process"])


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
