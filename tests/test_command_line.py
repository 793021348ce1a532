"""The command lines' shared pieces (`disentangle.command_line`): ``--deadline`` parsed once, bad
values in one line naming the flag with nothing created, and a run stopped at its deadline."""
import importlib
import re
import subprocess
import sys
import warnings

import pytest

from disentangle import command_line
from disentangle import errors
from disentangle import launch
from tests import helpers


@pytest.mark.parametrize("text,seconds", [("90", 90), ("90s", 90), ("25m", 1500), ("1h", 3600),
                                          ("1.5h", 5400), (" 2 m ", 120), (".5s", 0.5)])
def test_deadline_is_seconds_or_a_number_with_a_unit(text, seconds):
  assert command_line.parse_deadline(text) == seconds


@pytest.mark.parametrize("text,reason", [("0", "must be positive"), ("0m", "must be positive"),
                                         ("-5m", "expected seconds"), ("abc", "expected seconds"),
                                         ("5d", "expected seconds"), ("", "expected seconds"),
                                         ("inf", "expected seconds"), ("1h30m", "expected")])
def test_bad_deadline_is_one_line_naming_the_flag(text, reason):
  with pytest.raises(ValueError) as e:
    command_line.parse_deadline(text)
  assert str(e.value).startswith("--deadline: ") and reason in str(e.value)
  assert "\n" not in str(e.value)


_SMOKE = ("--config=experiments/configs/dsprites_betavae.py:smoke", "--config.batch_size=16",
          "--config.checkpoint_every=10", "--config.eval_every=20", "--config.eval.num_points=500",
          "--config.eval.factor_score_votes=20", "--noconfig.progress_bar")


def _run(module, *args):
  return subprocess.run([sys.executable, "-m", module, *args], cwd=helpers.REPO, capture_output=True,
                        text=True, timeout=600, check=False)


@pytest.mark.parametrize("module,args", [
    ("experiments.dsprites_betavae", _SMOKE),
    ("experiments.reproduce", ("--table=cascadevae_table3", "--seeds=2", "--fraction=1/50"))])
@pytest.mark.parametrize("value", ["0", "soon"])
def test_command_lines_refuse_a_bad_deadline_in_one_line(tmp_path, module, args, value):
  proc = helpers.run_in_process(module, *args, f"--deadline={value}",
                                f"--workdir={tmp_path / 'run'}")
  lines = [l for l in proc.stderr.splitlines() if l.strip()]
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert len(lines) == 1 and lines[0].startswith("error: --deadline: "), proc.stderr[-2000:]
  assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_smoke_run_stops_at_its_deadline_with_a_checkpoint_and_resumes(tmp_path):
  """``--deadline=2s`` counts from the start: start-up and the first compilation take longer, so
  the first step ends past it; the run stops there with its checkpoint, one line on stdout with
  the command that resumes, status 124, nothing on stderr but the data's warnings, no library's
  log line (the first line is the run's own). The same command without a deadline then resumes
  and completes."""
  workdir = tmp_path / "run"
  args = _SMOKE + ("--config.num_steps=20", f"--workdir={workdir}")
  proc = _run("experiments.dsprites_betavae", *args, "--deadline=2s")
  assert proc.returncode == 124, proc.stderr[-3000:]
  assert proc.stdout.startswith(f"run directory: {workdir}  "), proc.stdout[:500]
  [line] = [l for l in proc.stdout.splitlines() if l.startswith("stopped")]
  found = re.match(r"stopped at the deadline at step (\d+) of 20, checkpoint (\d+) in (\S+); "
                   r"the same command resumes: .*--deadline=2s", line)
  assert found and found.group(1) == found.group(2), line
  step = int(found.group(1))
  assert found.group(3) == str(workdir / "checkpoints") and (workdir / "checkpoints" / str(step)) \
      .is_dir()
  assert not [l for l in proc.stderr.splitlines()
              if l.strip() and "procedurally rendered" not in l and "return DSprites(" not in l]
  done = _run("experiments.dsprites_betavae", *args)
  assert done.returncode == 0, done.stderr[-3000:]
  assert f"at step {step}" in done.stdout and "done:" in done.stdout
  for p in (proc, done):  # restoring the checkpoint too: orbax's INFO lines stay out
    assert not helpers.library_log_lines(p.stdout + p.stderr), p.stdout[-3000:] + p.stderr[-3000:]


@pytest.mark.parametrize("make,expected", [
    pytest.param(lambda d: None,
                 "has no config.json (nor seed_*/config.json): not a run directory",
                 marks=pytest.mark.slow),  # in its own process
    (lambda d: (d.mkdir(), (d / "config.json").write_text("{}")), "has no field 'method'"),
    (lambda d: (d.mkdir(), (d / "config.json").write_text("{")), "is not JSON"),
    (lambda d: (d.mkdir(), (d / "config.json").write_text('{"method": "betavae", "num_seeds": 1}')),
     "checkpoints does not exist: the run has no checkpoint yet"),
])
def test_evaluate_on_a_folder_that_is_not_a_run_is_one_line(tmp_path, make, expected):
  """`experiments.evaluate` ends like the other command lines: one line, exit status 2, and
  nothing written into the folder it was given (the first case in its own process, whose whole
  stderr is the line; the others in this one)."""
  workdir = tmp_path / "run"
  make(workdir)
  before = sorted(p.name for p in tmp_path.rglob("*"))
  in_process = "not a run directory" not in expected
  proc = (helpers.run_in_process if in_process else _run)("experiments.evaluate",
                                                          f"--workdir={workdir}")
  lines = [l for l in proc.stderr.splitlines() if l.strip()]
  assert proc.returncode == command_line.BAD_INPUT_STATUS, proc.stderr[-2000:]
  assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], lines
  assert sorted(p.name for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("error", [
    "config.ConfigError", "reproduce.plan.BadInput", "data.files.DataFileError",
    "data.files.MissingDataError", "train.trainer.NonFiniteError",
    "train.checkpoint.CheckpointError", "atomic.WriteError", "evaluation.evaluate_run.NotARun",
    "evaluation.aggregate.NotEvaluated", "evaluation.fair_audit.NotAnFFVAERun",
    "data.files.DownloadError", "evaluation.score.ScoreError", "trained.ModelError"])
def test_every_one_line_error_is_a_user_error_and_exits_with_its_line(error, capsys):
  module, name = error.rsplit(".", 1)
  cls = getattr(importlib.import_module(f"disentangle.{module}"), name)
  assert issubclass(cls, errors.UserError)
  with pytest.raises(SystemExit) as stop, command_line.exits("resume"):
    raise cls(f"{name}: what was expected")
  assert stop.value.code == command_line.BAD_INPUT_STATUS
  assert capsys.readouterr().err == f"error: {name}: what was expected\n"


def test_any_other_exception_keeps_its_traceback():
  with pytest.raises(KeyError), command_line.exits("resume"):
    raise KeyError("a bug")


def test_a_command_line_shows_a_warning_on_one_line_without_its_source_line():
  with command_line.exits("resume"):
    shown = warnings.formatwarning("rendered, not read", UserWarning, __file__, 1, "line()")
  assert shown == "warning: UserWarning: rendered, not read\n"
  assert "line()" in warnings.formatwarning("m", UserWarning, __file__, 1, "line()")  # put back


@pytest.mark.parametrize("variant,expected", [
    ("m6", "the progress bar's time left counts the steps left at the current rate, not the 30 "
           "evaluations (one every 10,000 steps) nor the slower steps after t_d = 100,000 (S "
           "decoder passes and the exact assignment each)"),
    ("cascade_c", "the progress bar's time left counts the steps left at the current rate, not "
                  "the 30 evaluations (one every 10,000 steps)"),
    ("m6,progress_bar=False", None)])
def test_the_time_left_of_the_progress_bar_says_what_it_leaves_out(variant, expected):
  config = importlib.import_module("experiments.configs.dsprites_cascade").get_config(variant)
  assert launch.time_left_note(config) == expected
