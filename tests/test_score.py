"""``python -m experiments.score`` (`disentangle.score`): a function of numpy images scored on a
ground-truth set by name, its estimate first; bad input in one line and exit status 2. That a
trained run's encoder scores what ``experiments.evaluate`` gives its run: tests/test_evaluate.py;
the guide's examples: tests/test_docs_scoring.py."""
import json
import re
import subprocess
import sys

import numpy as np
import pytest

from disentangle import command_line
from tests import helpers


def moments(images):
  """The centre of mass and the mass of the pixels: a dSprites shape's position and scale."""
  x = images[..., 0]
  ys, xs = np.mgrid[0:x.shape[1], 0:x.shape[2]] / (x.shape[1] - 1)
  mass = x.sum((1, 2)) + 1e-6
  return np.stack([(x * xs).sum((1, 2)) / mass, (x * ys).sum((1, 2)) / mass, np.sqrt(mass)], 1)


def three_axes(images):
  return moments(images)[:, :, None]


def one_short(images):
  return moments(images)[1:]


def with_nan(images):
  out = moments(images)
  out[:, 1] = np.nan
  return out


_ARGS = {"--representation": "tests.test_score:moments", "--dataset": "dsprites",
         "--source": "render", "--metrics": "mig", "--max_points": "100"}


def _score(run=helpers.run_in_process, **changes):
  args = dict(_ARGS, **{f"--{k}": v for k, v in changes.items()})
  return run("experiments.score", *(f"{k}={v}" for k, v in args.items()))


def _own_process(module, *args):
  return subprocess.run([sys.executable, "-m", module, *args], cwd=helpers.REPO,
                        capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("run", [helpers.run_in_process,
                                 pytest.param(_own_process, marks=pytest.mark.slow)],
                         ids=["in_process", "own_process"])
def test_the_command_line_prints_its_estimate_first_and_writes_the_results(tmp_path, run):
  """In its own process too: a fresh interpreter's first line is the estimate, and no library's
  log line (JAX probing for a TPU) comes before or after it."""
  proc = _score(run, output=tmp_path / "scores.json")
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert not helpers.library_log_lines(proc.stdout + proc.stderr), proc.stderr[-3000:]
  assert all(l.startswith("warning: ProceduralDataWarning: ") for l in proc.stderr.splitlines()
             if l.strip()), proc.stderr[-3000:]
  lines = proc.stdout.splitlines()
  assert lines[0].startswith("estimate: about ") and "images in" in lines[0], lines[0]
  assert lines[1].startswith("ground truth: a thinned grid encoded once, ")
  saved = json.loads((tmp_path / "scores.json").read_text())
  mig = saved["metrics"]["mig"]
  assert mig["num_points"] == 100 and saved["settings"]["max_points"] == 100
  assert saved["dataset"]["source"] == "render"
  assert not saved["dataset"]["comparable_with_published"]
  assert lines[-1] == f"dsprites: mig {mig['value']:.4f}"
  assert mig["value"] > 0.5  # x, y and scale each in a dimension of its own


@pytest.mark.parametrize("changes,expected", [
    ({"representation": "tests.test_score:three_axes"},
     r"representation: representation mean must be \[n, m\], got shape \(\d+, 3, 1\)"),
    ({"representation": "tests.test_score:one_short"},
     r"representation: (\d+) images gave means of shape \[\d+, 3\], expected \[\1, m\]"),
    ({"representation": "tests.test_score:with_nan"},
     r"representation: its means hold NaN or inf \(dims \[1\]\)"),
    ({"representation": "tests.test_score:absent"}, r"--representation: expected module:func"),
    ({"representation": "no_such_module:f"}, r"--representation: No module named 'no_such_"),
    ({"dataset": "mnist", "source": "auto"},
     r"dataset: mnist has no ground-truth factors to score against"),
    ({"dataset": "nope"}, r"config field 'dataset.name' must be one of "),
    ({"metrics": "mig,score"}, r"metrics: 'score' not registered; known: "),
    ({"max_points": "50"}, r"config field 'eval.max_points' must be 0 .* or >= 100, got 50"),
])
def test_bad_input_is_one_line(changes, expected):
  proc = _score(**changes)
  errors = [l for l in proc.stderr.splitlines() if l.startswith("error: ")]
  assert proc.returncode == command_line.BAD_INPUT_STATUS, proc.stderr[-3000:]
  assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
  assert re.match(f"error: {expected}", errors[0]), errors[0]
