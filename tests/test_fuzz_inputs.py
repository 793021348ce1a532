"""Bad input at scale: random bad command lines and data files, each one line and no change.

Each case is a command of ``experiments/`` with one fault drawn at random (`tests.fuzz_driver`):
a config override of the wrong type or out of its range (the ``config.RULES`` table), an unknown
field or variant, or a data file truncated, bit-flipped or of mismatched shape in a canonical
format (MNIST's gzipped IDX training files, real and checksummed; CelebA's attribute list). Every
case must exit with status 2 (the config faults) or non-zero (the data faults) with one
``error:`` line naming the field or the file, no traceback, no run directory and no file
changed. The config faults are refused before any training, so their command lines run in this
process; the data faults run in children forked from one driver process that imported the
library once. A truncated file of the evaluated split (MNIST ``t10k-*``) has its own test below:
the trainer opens the evaluation data before it creates the run directory.
"""
import json
import random
import shutil
import subprocess
import sys

import pytest

from tests import fuzz_driver
from tests import helpers

N_CONFIG = 200  # command lines in this process: a few milliseconds each
N_DATA = 30  # forked children, each reading a corrupted copy of a data set: with seed 0 every
# corruption of each MNIST training file and of CelebA's attribute list at least once


def test_random_bad_configs_are_one_line_create_nothing_and_change_nothing(tmp_path):
  rng = random.Random(0)
  configs = helpers.REPO / "experiments" / "configs"
  before = fuzz_driver.digest(configs)
  results = []
  for k in range(N_CONFIG):
    kind, argv, names = fuzz_driver.config_case(rng)
    workdir = tmp_path / f"run_{k}"
    proc = helpers.run_in_process("experiments.mnist_cascade", *argv, f"--workdir={workdir}")
    results.append(fuzz_driver.outcome(kind, argv, names, proc.returncode,
                                       proc.stdout + proc.stderr, workdir, []))
  bad = [r for r in results if r["code"] != 2 or r["traceback"] or not r["named"]
         or r["run_dir"] or r["announced"]]  # refused before the run is announced
  assert not bad, (len(bad), [{k: r[k] for k in ("kind", "argv", "code", "errors", "tail")}
                              for r in bad[:3]])
  assert {r["kind"] for r in results} == set(fuzz_driver.CONFIG_KINDS)
  assert fuzz_driver.digest(configs) == before


@pytest.mark.slow
def test_random_bad_data_files_are_one_line_and_change_nothing(tmp_path, shared_data_dir):
  proc = subprocess.run([sys.executable, "-m", "tests.fuzz_driver", str(N_DATA), str(tmp_path),
                         str(shared_data_dir)],
                        capture_output=True, text=True, cwd=helpers.REPO, timeout=3000,
                        check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  results = json.loads(proc.stdout.strip().splitlines()[-1])
  assert len(results) == N_DATA
  bad = [r for r in results if r["code"] == 0 or r["traceback"] or not r["named"]
         or r["run_dir"] or r["changed"]]
  kinds = sorted({r["kind"] for r in results})
  assert not bad, (len(bad), kinds, [{k: r[k] for k in ("kind", "argv", "code", "errors", "tail")}
                                     for r in bad[:3]])
  assert set(kinds) == {"mnist_truncate", "mnist_flip", "mnist_shape", "celeba_truncate",
                        "celeba_cut_row", "celeba_bad_value"}, kinds
  mnist = {(r["kind"], r["names"][0]) for r in results if r["kind"].startswith("mnist")}
  assert len(mnist) == 6, mnist  # each corruption of the images and of the labels


@pytest.mark.slow
def test_a_truncated_evaluation_file_is_one_line_and_creates_nothing(tmp_path, shared_data_dir):
  """MNIST's test images cut in half: exit status 2, one line naming the file, no run
  directory, no traceback (the training files are intact; the command line in this process)."""
  shutil.copytree(shared_data_dir / "mnist", tmp_path / "data" / "mnist")
  target = tmp_path / "data" / "mnist" / "t10k-images-idx3-ubyte.gz"
  target.write_bytes(target.read_bytes()[:target.stat().st_size // 2])
  proc = helpers.run_in_process(
      "experiments.mnist_cascade", "--config=experiments/configs/mnist_cascade.py:smoke",
      f"--config.dataset.data_dir={tmp_path / 'data'}", "--config.dataset.allow_download=false",
      "--config.dataset.synthetic_if_missing=false", f"--workdir={tmp_path / 'run'}")
  errors = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert len(errors) == 1 and target.name in errors[0], errors
  assert "Traceback" not in proc.stderr and not (tmp_path / "run").exists()
