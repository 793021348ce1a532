"""A table on a real Slurm cluster (`disentangle.reproduce.slurm`): the two-program table of
`tests.cluster_tables` submitted as an array, one task stopped by SIGTERM in training, requeued
and resumed, the table rendered equal to the table run on one machine; a program across two
processes under ``srun -n 2`` equal to its one-process run.

They need a running cluster (``.ci/slurm_cluster.sh`` starts a one-node one, as root): without
one they are skipped with the reason, unless ``DISENTANGLE_REQUIRE_SLURM=1`` (CI, on the stack
that starts the cluster), where they fail.

What keeps them short: the table's processes (its tasks, its render task and its one-machine run)
at XLA's optimisation level 1 (`TABLE_ENV`: program 2's 300 steps cost more than the compilations
the tests' level 0 saves); the one-machine runs beside the cluster's jobs, the table's started
once a core is free and the compilations it shares with the tasks are in the persistent cache;
that cluster holding a requeued task for 6 s rather than two minutes (``.ci/slurm_cluster.sh``),
which the requeued task waits out by itself.
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
# The environment of the table's processes (sbatch passes the submitting one's to the tasks): at
# the tests' `--xla_backend_optimization_level=0` (tests/conftest.py) program 2's 300 steps take
# four times as long as at level 1, which compiles as fast; the one-machine table costs half the
# CPU seconds at level 1, and a quarter less than at XLA's default (3).
TABLE_ENV = {"XLA_FLAGS": " ".join([
    *(flag for flag in os.environ.get("XLA_FLAGS", "").split()
      if not flag.startswith("--xla_backend_optimization_level")),
    "--xla_backend_optimization_level=1"])}


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


def _start(*args, log, env=None) -> subprocess.Popen:
  """``args`` started in the background, its output (both streams) written to file ``log``."""
  with open(log, "w") as out:
    return subprocess.Popen(list(args), stdout=out, stderr=subprocess.STDOUT, text=True,
                            cwd=helpers.REPO, env=None if env is None else dict(os.environ, **env))


def _finished(proc: subprocess.Popen, log, timeout: float) -> str:
  """The output of ``proc`` (`_start`), once it ended with status 0 within ``timeout`` s."""
  try:
    proc.wait(timeout=timeout)
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait()
  out = log.read_text()
  assert proc.returncode == 0, (proc.args, proc.returncode, out[-4000:])
  return out


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
  --signal=TERM`` once its first checkpoint is written, requeued by its script and started again
  by Slurm (after the cluster's requeue hold), waited for with the render task; the same table
  run on one machine beside it (started once program 1's task has ended: the compilations of
  both programs' training are in the persistent cache by then): (workdir, array job id, render
  job id, the submission's output, the one-machine run (`_start`), its workdir, its log)."""
  del cluster
  workdir = tmp_path_factory.mktemp("slurm") / "table"
  here = tmp_path_factory.mktemp("one_machine")
  out = _run(sys.executable, "-m", "experiments.reproduce", *TABLE, f"--workdir={workdir}",
             "--submit=slurm", "--slurm_time=30:00", timeout=300, env=TABLE_ENV).stdout
  job, after = re.search(r"submitted array job (\d+) .* and job (\d+)", out).groups()
  one_machine = None
  try:
    long = workdir / "runs" / "tiny_experiment_long"
    _until("program 2's first checkpoint", lambda: (long / "checkpoints" / str(
        cluster_tables.LONG_CHECKPOINTS)).is_dir(),
           timeout=600, every=0.2)
    _run("scancel", "--signal=TERM", f"{job}_2")
    _until(f"program 1's task to end ({_queued(job)!r})", lambda: f"{job}_1 " not in _queued(job),
           timeout=600)
    one_machine = _start(sys.executable, "-m", "experiments.reproduce", *TABLE,
                         f"--workdir={here / 'table'}", log=here / "log", env=TABLE_ENV)
    _until(f"jobs {job} and {after} to end ({_queued(job, after)!r})",
           lambda: not _queued(job, after).strip(), timeout=900)
  except BaseException:
    subprocess.run(["scancel", job, after], check=False)
    if one_machine is not None:
      one_machine.kill()
      one_machine.wait()
    raise
  yield workdir, job, after, out, one_machine, here / "table", here / "log"
  if one_machine.poll() is None:
    one_machine.kill()
    one_machine.wait()


def test_a_submitted_table_is_rendered_equal_to_the_table_run_on_one_machine(submitted):
  """The array's table (written by the task that ended last, and again by the render task) has
  the numbers of the same table trained and evaluated by the same command on one machine, one
  program after the other (program 2 there never stopped); the submission printed its tasks,
  jobs and progress command."""
  workdir, job, after, out, one_machine, one_machine_dir, log = submitted
  assert "task 1: program 1 (tiny_experiment_short)" in out and f"squeue --jobs={job},{after}" \
      in out and "--render" in out
  assert _job(after).get("JobState") == "COMPLETED", _job(after)
  _finished(one_machine, log, timeout=900)
  here = json.loads((one_machine_dir / "table.json").read_text())
  there = json.loads((workdir / "table.json").read_text())
  assert [line["status"] for line in there["lines"]] == ["evaluated", "evaluated"]
  assert helpers.without_places(there["lines"]) == helpers.without_places(here["lines"])
  # written once: the row in the compact table (marked † where not comparable) and the full one
  assert (workdir / "table.md").read_text().count("| short ") == 2


def test_a_task_stopped_by_sigterm_is_requeued_and_resumes_from_its_checkpoint(submitted):
  """Program 2's task: stopped in training with a checkpoint (exit 143), requeued by its
  script, started again, resumed from that checkpoint (not from the start) to its last step;
  program 1's task ran once; submitting again finds nothing to do."""
  workdir, job = submitted[:2]
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
  devices (the two side by side)."""
  del cluster
  config = ("-m", "experiments.mnist_cascade", "--config=experiments/configs/mnist_cascade.py:"
            "smoke", "--config.num_steps=4", "--config.checkpoint_every=2",
            "--config.log_every=1", "--config.eval_every=1000", "--config.mesh.num_devices=0",
            "--config.progress_bar=False")
  one = tmp_path / "one"
  xla = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
  one_process = _start(sys.executable, *config, f"--workdir={one}", log=tmp_path / "one.log",
                       env={"XLA_FLAGS": xla})
  two = tmp_path / "two"
  try:
    proc = _run("srun", "-n", "2", "--time=20:00", sys.executable, *config,
                "--config.distributed.initialize=True", f"--workdir={two}", timeout=900)
  except BaseException:
    one_process.kill()
    one_process.wait()
    raise
  _finished(one_process, tmp_path / "one.log", timeout=600)
  assert proc.stdout.count(f"done: {two}") == 2, proc.stdout
  helpers.assert_same_metrics(one, two)
