"""A table on a Slurm cluster: one array job, a task per program not yet done, then the table.

``experiments.reproduce --submit=slurm`` hands `submit` the command of one program
(``--program=<n>``, `run.run_program`) and the plan; `sbatch` itself is the client (no
accounting is needed: what a task did is read from the workdir, what it does from ``squeue``).

- The array: task ``n`` runs program ``n`` (the dry run's numbering), only the programs not done
  (`run.done`), at most ``parallel`` at once; ``--requeue`` and ``--signal=TERM@<seconds>``:
  before its time limit (or a preemption notice, ``scancel --signal=TERM``) Slurm sends SIGTERM
  to the program, which stops at the next step with a checkpoint and exits with status 143 (the
  trainer's); the task script then requeues its task (``scontrol requeue``), which starts again
  and resumes from the checkpoint. A SIGTERM to the task's shell (``scancel --batch``) is passed
  on to the program. Slurm makes a requeued task wait about two minutes before it may start.
- The render task, after the array (``--dependency=afterany``): writes ``table.md`` and
  ``table.json`` of what is done and names the programs that are not.
- Submitting again skips what is done: a task per program left.
"""
from __future__ import annotations

import dataclasses
import os
import re
import shlex
import subprocess
from typing import Callable, Optional, Sequence

from disentangle import paths
from disentangle.reproduce import plan as plan_lib

SIGNAL_SECONDS = 300  # the default warning before a task's end: a checkpoint and the requeue
STOPPED_STATUS = 143  # a program stopped by SIGTERM with its checkpoint (`preemption.Preempted`)
_TIME = re.compile(r"^(\d+-)?\d+(:\d+){0,2}$")  # sbatch's --time: M, M:S, H:M:S, D-H[:M[:S]]


@dataclasses.dataclass(frozen=True)
class Options:
  """What each task asks of Slurm (the command line's ``--slurm_*`` flags)."""
  partition: str = ""
  time: str = ""             # sbatch's --time of a task
  gpus_per_task: int = 0
  parallel: int = 0          # at most this many tasks at once (0: no limit)
  extra: tuple = ()          # further sbatch options, for the array and the render task
  signal_seconds: int = SIGNAL_SECONDS
  logs: str = ""             # the tasks' output folder


def options(*, partition="", time="", gpus_per_task=0, parallel=0, extra="",
            signal_seconds=SIGNAL_SECONDS, logs="") -> Options:
  """`Options` from the flags' values; `plan.BadInput` naming the flag for a bad one."""
  def count(flag, value, least):
    try:
      n = int(str(value).strip())
    except ValueError:
      n = least - 1
    if n < least:
      raise plan_lib.BadInput(f"--{flag}: expected a whole number >= {least}, got {value!r}")
    return n

  time = str(time or "").strip()
  if time and not _TIME.match(time):
    raise plan_lib.BadInput(f"--slurm_time: expected sbatch's time limit (minutes, H:M:S or "
                            f"D-H:M:S), got {time!r}")
  try:
    extra = tuple(shlex.split(extra or ""))
  except ValueError as e:
    raise plan_lib.BadInput(f"--slurm_options: not a list of sbatch options ({e}): {extra!r}") \
        from None
  if extra and not extra[0].startswith("-"):
    raise plan_lib.BadInput(f"--slurm_options: expected sbatch options (starting with -), got "
                            f"{extra[0]!r}")
  return Options(partition=str(partition or ""), time=time,
                 gpus_per_task=count("slurm_gpus_per_task", gpus_per_task, 0),
                 parallel=count("slurm_parallel", parallel, 0), extra=extra,
                 signal_seconds=count("slurm_signal", signal_seconds, 1), logs=str(logs or ""))


def array_spec(numbers: Sequence[int], parallel: int = 0) -> str:
  """sbatch's ``--array`` of task ids ``numbers``: runs joined (``1-3,5``), ``%parallel``."""
  parts, numbers = [], sorted(numbers)
  i = 0
  while i < len(numbers):
    j = i
    while j + 1 < len(numbers) and numbers[j + 1] == numbers[j] + 1:
      j += 1
    parts.append(str(numbers[i]) if i == j else f"{numbers[i]}-{numbers[j]}")
    i = j + 1
  return ",".join(parts) + (f"%{parallel}" if parallel else "")


def _header(name: str, opts: Options, logs: str, *, array: str = "", gpus: bool = True) -> list:
  lines = ["#!/bin/bash", f"#SBATCH --job-name={name}", "#SBATCH --open-mode=append",
           f"#SBATCH --chdir={os.getcwd()}"]
  lines.append(f"#SBATCH --output={logs}/" + ("%A_%a.out" if array else "%j.out"))
  if array:
    lines += [f"#SBATCH --array={array}", "#SBATCH --requeue",
              f"#SBATCH --signal=TERM@{opts.signal_seconds}"]
  if opts.partition:
    lines.append(f"#SBATCH --partition={opts.partition}")
  if opts.time and array:
    lines.append(f"#SBATCH --time={opts.time}")
  if opts.gpus_per_task and gpus:
    lines.append(f"#SBATCH --gpus-per-task={opts.gpus_per_task}")
  lines += [f"#SBATCH {o}" for o in opts.extra]
  return lines


def task_script(command: Sequence[str], name: str, opts: Options, logs: str, array: str) -> str:
  """The array's batch script: program ``$SLURM_ARRAY_TASK_ID`` under ``srun`` (so that
  ``scancel --signal=TERM`` and ``--signal`` reach it), requeued when it stops with its
  checkpoint (module docstring)."""
  run = shlex.join(list(command)) + ' --program="$SLURM_ARRAY_TASK_ID"'
  task = '"${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"'
  return "\n".join(_header(name, opts, logs, array=array) + [
      'echo "task $SLURM_ARRAY_TASK_ID (start ${SLURM_RESTART_COUNT:-0}) on $(hostname) at '
      '$(date -Is)"',
      f"srun --ntasks=1 {run} &",
      "child=$!",
      "trap 'kill -TERM \"$child\" 2>/dev/null' TERM  # a signal to this shell: to the program",
      'wait "$child"; status=$?',
      'while kill -0 "$child" 2>/dev/null; do wait "$child"; status=$?; done',
      f'if [ "$status" = {STOPPED_STATUS} ]; then',
      '  echo "task $SLURM_ARRAY_TASK_ID stopped with a checkpoint: requeued"',
      f"  scontrol requeue {task}",
      "fi",
      'exit "$status"', ""])


def render_script(command: Sequence[str], name: str, opts: Options, logs: str) -> str:
  """The render task's batch script: the table of what is done (``--render``)."""
  return "\n".join(_header(name, opts, logs, gpus=False) + [
      shlex.join([*command, "--render"]), ""])


def logs_folder(workdir: str, opts: Options) -> str:
  """The tasks' output folder: ``--slurm_logs``, else ``<workdir>/slurm`` for a local workdir,
  ``slurm_logs`` in the current folder for a bucket's."""
  if opts.logs:
    return os.path.abspath(opts.logs)
  if paths.is_remote(workdir):
    return os.path.abspath("slurm_logs")
  return os.path.join(os.path.abspath(paths.as_path(workdir)), "slurm")


def _sbatch(script: str, *args: str) -> str:
  """The job id of ``script`` submitted with ``args``; `plan.BadInput` with sbatch's line."""
  try:
    proc = subprocess.run(["sbatch", "--parsable", *args], input=script, text=True,
                          capture_output=True, timeout=120, check=False)
  except FileNotFoundError:
    raise plan_lib.BadInput("--submit=slurm: sbatch not found: run on a machine of a Slurm "
                            "cluster (docs/cluster.md)") from None
  if proc.returncode:
    why = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
    raise plan_lib.BadInput(f"--submit=slurm: sbatch refused the job: {why}")
  return proc.stdout.strip().split(";")[0]


def submit(table: plan_lib.Table, programs: Sequence[plan_lib.Program], todo: Sequence[int],
           command: Sequence[str], workdir: str, opts: Options, *, dry_run: bool = False,
           log: Callable = print) -> Optional[tuple]:
  """The array of programs ``todo`` (numbers from 1) and the render task after it, submitted
  (``(array job id, render job id)``), or printed only (``dry_run``: the scripts, the run-steps
  of each task). ``command``: one program's command line without ``--program``."""
  name = f"reproduce-{table.name}"
  logs = logs_folder(workdir, opts)
  array = array_spec(todo, opts.parallel)
  task = task_script(command, name, opts, logs, array)
  render = render_script(command, name + "-table", opts, logs)
  steps = sum(programs[k - 1].run_steps for k in todo)
  lines = [f"task {k}: program {k} ({programs[k - 1].name}): {len(programs[k - 1].runs)} runs "
           f"x {programs[k - 1].num_steps} steps, run-steps {programs[k - 1].run_steps:,}"
           for k in todo]
  summary = (f"{len(todo)} of {len(programs)} program(s) to run"
             + (f" ({len(programs) - len(todo)} done)" if len(todo) < len(programs) else "")
             + f"; estimated run-steps {steps:,}")
  if dry_run:
    log("\n".join([f"the array (sbatch --array={array}):", task, *lines, summary,
                   "then the table, after the array (sbatch --dependency=afterany:<array>):",
                   render]))
    return None
  if not todo:
    log(f"every program of {table.name} is done: nothing to submit")
    return None
  os.makedirs(logs, exist_ok=True)
  job = _sbatch(task)
  after = _sbatch(render, f"--dependency=afterany:{job}", "--kill-on-invalid-dep=no")
  log("\n".join([*lines, summary,
                 f"submitted array job {job} (tasks {array}) and job {after} (the table, after "
                 "them)",
                 f"progress: squeue --jobs={job},{after}   and   "
                 + shlex.join([*command, "--render"]),
                 f"logs: {logs}/"]))
  return job, after
