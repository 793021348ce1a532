"""A table on a real Slurm cluster (`disentangle.reproduce.slurm`): the two-program table of
`tests.cluster_tables` submitted as an array, one task stopped by SIGTERM in training, requeued
and resumed, the table rendered equal to the table run on one machine; a program across two
processes under ``srun -n 2`` equal to its one-process run.

They need a running cluster (``.ci/slurm_cluster.sh`` starts a one-node one, as root): without
one they are skipped with the reason, unless ``DISENTANGLE_REQUIRE_SLURM=1`` (CI, on the stack
that starts the cluster), where they fail.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from tests import cluster_tables
from tests import helpers

pytestmark = pytest.mark.slow

REQUIRE = "DISENTANGLE_REQUIRE_SLURM"
TABLE = ("--tables=tests.cluster_tables", "--table=tiny2")


def _no_cluster() -> str | None:
  """Why no Slurm cluster can take jobs here (None: one can)."""
  if shutil.which("sbatch") is None:
    return "no Slurm here (sbatch not found; .ci/slurm_cluster.sh starts a one-node cluster)"
  try:
    states = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True,
                            timeout=20, check=False)
  except subprocess.TimeoutExpired:
    return "Slurm's controller does not answer (sinfo timed out)"
  up = {"idle", "mixed", "allocated", "completing"}
  if states.returncode or not up & set(states.stdout.split()):
    return (f"no Slurm node takes jobs (sinfo: {(states.stderr or states.stdout).strip()!r}; "
            ".ci/slurm_cluster.sh starts a one-node cluster)")
  return None


@pytest.fixture(scope="module")
def cluster():
  reason = _no_cluster()
  if reason:
    if os.environ.get(REQUIRE) == "1":
      pytest.fail(f"{REQUIRE}=1 but {reason}")
    pytest.skip(reason)


def _run(*args, timeout=120, check=True, env=None) -> subprocess.CompletedProcess:
  proc = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, cwd=helpers.REPO,
                        check=False, env=None if env is None else dict(os.environ, **env))
  assert not check or proc.returncode == 0, (args, proc.stdout[-2000:], proc.stderr[-2000:])
  return proc


def _until(what: str, condition, timeout: float, every: float = 0.5):
  """``condition()``'s first true value, polled; fails naming ``what`` after ``timeout`` s."""
  end = time.time() + timeout
  while time.time() < end:
    value = condition()
    if value:
      return value
    time.sleep(every)
  pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")


def _job(task: str) -> dict:
  """``scontrol show job`` of ``task`` as {field: value} ({} once Slurm has forgotten it)."""
  out = _run("scontrol", "-o", "show", "job", task, check=False).stdout
  return dict(re.findall(r"(\w+)=(\S*)", out))


def _queued(*jobs: str) -> str:
  return _run("squeue", "-h", f"--jobs={','.join(jobs)}", "-o", "%i %T %r", check=False).stdout


@pytest.fixture(scope="module")
def submitted(cluster, tmp_path_factory):
  """The table submitted (``--submit=slurm``), program 2's task stopped by ``scancel
  --signal=TERM`` once its first checkpoint is written, requeued (its start made due at once:
  Slurm holds a requeued job about two minutes) and waited for with the render task:
  (workdir, array job id, render job id, the submission's output)."""
  del cluster
  workdir = tmp_path_factory.mktemp("slurm") / "table"
  out = _run(sys.executable, "-m", "experiments.reproduce", *TABLE, f"--workdir={workdir}",
             "--submit=slurm", "--slurm_time=30:00", timeout=300).stdout
  job, after = re.search(r"submitted array job (\d+) .* and job (\d+)", out).groups()
  try:
    long = workdir / "runs" / "tiny_experiment_long"
    _until("program 2's first checkpoint", lambda: (long / "checkpoints" / str(
        cluster_tables.LONG_CHECKPOINTS)).is_dir(),
           timeout=600, every=0.2)
    _run("scancel", "--signal=TERM", f"{job}_2")
    _until("program 2's task requeued", lambda: _job(f"{job}_2").get("Restarts") == "1" and
           _job(f"{job}_2").get("JobState") == "PENDING", timeout=120)
    # Slurm holds a requeued job ~2 minutes; started at once, the node would refuse it (the
    # killed task's credential is revoked up to the second of the kill): a few seconds suffice.
    time.sleep(5)
    _run("scontrol", "update", f"JobId={job}_2", "StartTime=now")
    _until(f"jobs {job} and {after} to end ({_queued(job, after)!r})",
           lambda: not _queued(job, after).strip(), timeout=900, every=2)
  except BaseException:
    subprocess.run(["scancel", job, after], check=False)
    raise
  return workdir, job, after, out


def test_a_submitted_table_is_rendered_equal_to_the_table_run_on_one_machine(submitted, tmp_path):
  """The array's table (written by the task that ended last, and again by the render task) has
  the numbers of the same table trained and evaluated by the same command on one machine, one
  program after the other (program 2 there never stopped); the submission printed its tasks,
  jobs and progress command."""
  workdir, job, after, out = submitted
  assert "task 1: program 1 (tiny_experiment_short)" in out and f"squeue --jobs={job},{after}" \
      in out and "--render" in out
  assert _job(after).get("JobState") == "COMPLETED", _job(after)
  _run(sys.executable, "-m", "experiments.reproduce", *TABLE, f"--workdir={tmp_path}",
       timeout=900)
  here = json.loads((tmp_path / "table.json").read_text())
  there = json.loads((workdir / "table.json").read_text())
  assert [line["status"] for line in there["lines"]] == ["evaluated", "evaluated"]
  assert helpers.without_places(there["lines"]) == helpers.without_places(here["lines"])
  assert (workdir / "table.md").read_text().count("| short |") == 1


def test_a_task_stopped_by_sigterm_is_requeued_and_resumes_from_its_checkpoint(submitted):
  """Program 2's task: stopped in training with a checkpoint (exit 143), requeued by its
  script, started again, resumed from that checkpoint (not from the start) to its last step;
  program 1's task ran once; submitting again finds nothing to do."""
  workdir, job, _, _ = submitted
  log = (workdir / "slurm" / f"{job}_2.out").read_text()
  assert "task 2 (start 0)" in log and "task 2 (start 1)" in log, log
  assert "stopped by SIGTERM" in log and "stopped with a checkpoint: requeued" in log, log
  resumed = re.search(r"resumed from \S+ at step (\d+)", log)
  assert resumed and cluster_tables.LONG_CHECKPOINTS <= int(resumed.group(1)) < \
      cluster_tables.LONG_STEPS, log
  assert _job(f"{job}_2").get("JobState") == "COMPLETED"
  assert "(start 1)" not in (workdir / "slurm" / f"{job}_1.out").read_text()
  lines = (workdir / "runs" / "tiny_experiment_long" / "metrics.jsonl").read_text().splitlines()
  logged = [json.loads(l)["step"] for l in lines if "loss" in json.loads(l)]
  every = cluster_tables.LONG_LOG_EVERY
  assert logged == list(range(every, cluster_tables.LONG_STEPS + 1, every))  # once each, no gap
  again = _run(sys.executable, "-m", "experiments.reproduce", *TABLE, f"--workdir={workdir}",
               "--submit=slurm", timeout=300)
  assert "every program of tiny2 is done: nothing to submit" in again.stdout, again.stdout


def test_a_program_under_srun_n_2_equals_its_one_process_run(cluster, tmp_path):
  """``srun -n 2 python -m experiments.X --config.distributed.initialize=True`` (JAX finds the
  coordinator, the process count and each process's rank in Slurm's environment; one CPU
  device each) trains the same metrics lines as the same command in one process of two
  devices."""
  del cluster
  config = ("-m", "experiments.mnist_cascade", "--config=experiments/configs/mnist_cascade.py:"
            "smoke", "--config.num_steps=4", "--config.checkpoint_every=2",
            "--config.log_every=1", "--config.eval_every=1000", "--config.mesh.num_devices=0",
            "--config.progress_bar=False")
  one = tmp_path / "one"
  xla = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
  _run(sys.executable, *config, f"--workdir={one}", timeout=600, env={"XLA_FLAGS": xla})
  two = tmp_path / "two"
  proc = _run("srun", "-n", "2", "--time=20:00", sys.executable, *config,
              "--config.distributed.initialize=True", f"--workdir={two}", timeout=900)
  assert proc.stdout.count(f"done: {two}") == 2, proc.stdout
  helpers.assert_same_metrics(one, two)
