"""A run stopped by SIGTERM or killed (SIGKILL) at any instant resumes with the same command and
ends exactly where a run never stopped ends; no half-written file is ever visible
(`tests.faults` holds the command, the kill points and the checks)."""
import json
import re
import signal
import time

import pytest

from tests import faults
from tests import helpers

STEPS = 16  # checkpoints at 4, 8, 12, 16; evaluations at 8, 16; metrics lines every 2


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
  """The smoke command of `tests.faults`, trained without interruption; (folder, wall s)."""
  run = tmp_path_factory.mktemp("faults") / "reference"
  return run, faults.reference(run, STEPS, faults.environment(run.parent))


@pytest.mark.slow
def test_a_run_killed_before_its_first_checkpoint_starts_over(tmp_path):
  """Metrics lines of an attempt that died before any checkpoint are not kept beside the lines
  of the next attempt, which starts from step 0: its lines are the died attempt's again (the
  same numbers), then the rest, each step once."""
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  data = helpers.TinyImages()
  config = helpers.tiny_config(**{"mesh.num_devices": 1, "log_every": 1})  # checkpoints at 3, 6

  class Killed(Exception):
    pass

  def kill_at_2(state, step):
    del state
    if step == 2:
      raise Killed()

  lines = lambda: [{k: v for k, v in json.loads(l).items() if k != "steps_per_sec"}  # noqa: E731
                   for l in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  with pytest.raises(Killed):
    trainer.train(config, tmp_path, dataset=data, hooks=[kill_at_2])
  assert not (tmp_path / "checkpoints").exists() or not any(
      p.name.isdigit() for p in (tmp_path / "checkpoints").iterdir())
  died = lines()
  assert [l["step"] for l in died] in ([1], [1, 2]), died
  trainer.train(config, tmp_path, dataset=data)
  assert [l["step"] for l in lines()] == list(range(1, 7)) and lines()[:len(died)] == died


@pytest.mark.slow
def test_command_line_sigterm_stops_with_one_line_and_resumes_bitwise(tmp_path, uninterrupted):
  """SIGTERM once the first metrics line is written: exit status 143, one line naming the step,
  its checkpoint and the same command; that command then ends equal to the uninterrupted run
  (final checkpoint bitwise, metrics lines, evaluation files)."""
  reference, _ = uninterrupted
  env, run, log = faults.environment(reference.parent), tmp_path / "run", tmp_path / "log"
  proc = faults.start(run, STEPS, env, log)
  deadline = time.time() + 600
  while not (run / "metrics.jsonl").exists() and proc.poll() is None and time.time() < deadline:
    time.sleep(0.05)
  proc.send_signal(signal.SIGTERM)
  assert proc.wait(timeout=600) == 128 + signal.SIGTERM, log.read_text()[-3000:]
  text = log.read_text()
  stops = [l for l in re.split(r"[\r\n]", text) if l.startswith("stopped by")]
  assert len(stops) == 1 and "Traceback" not in text, text[-3000:]
  step = int(re.match(rf"stopped by SIGTERM at step (\d+) of {STEPS}, checkpoint \1 in ",
                      stops[0])[1])
  assert stops[0].split("; the same command resumes: ")[1].endswith(f"--workdir={run}"), stops
  assert STEPS // 8 <= step < STEPS and (run / "checkpoints" / str(step)).is_dir()
  proc = faults.start(run, STEPS, env, log)
  assert proc.wait(timeout=600) == 0, log.read_text()[-3000:]
  assert f"resumed from {run.resolve() / 'checkpoints'} at step {step}" in log.read_text()
  assert faults.compare(run, reference, STEPS) == []


@pytest.mark.slow
def test_kills_at_random_instants_resume_bitwise_with_no_half_written_file(tmp_path,
                                                                           uninterrupted):
  """SIGKILL 4 times (seed 6: at a random instant, inside a checkpoint write, inside an
  evaluation write, at a step after a resume), the same command after each: no half-written
  file after any kill, every finished run equal to the uninterrupted one."""
  record = faults.run(4, 6, tmp_path, STEPS, reference_run=uninterrupted)
  assert record["kills"] == 4 and record["problems"] == [], record
  assert record["differences"] == 0, record["different"]
  assert record["temporaries_left"] == 0, record  # removed by the next write of their file
  assert record["runs_finished"] >= 1 and record["resumes"] >= 1, record
  assert all(record["kills_at"][k] >= 1 for k in ("timed", "checkpoint", "eval", "resume")), record
