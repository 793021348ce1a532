"""Kill a training run at random instants, resume it each time, and compare with a run never killed.

  python -m tests.faults [--kills=50] [--seed=0] [--steps=40] [--workdir=DIR]

The command (:func:`command`: the dSprites beta-VAE smoke config, ``--steps`` steps, a
checkpoint every quarter of them, an evaluation every half, a metrics line every eighth: every
10, 20 and 5 steps of the default 40) trains once without
interruption (the reference), then again in a fresh run directory, started over with the same
command after each SIGKILL. A kill comes either after a delay drawn uniformly from [0, T]
(T: the wall time of the latest run from scratch, start-up included) or, for about one kill in four and for each
point at least once, from the process itself at a named point (:data:`POINTS`): inside a
checkpoint write (orbax's temporary folder written, not yet renamed), inside an evaluation
write (the temporary JSON written, not yet renamed), right after a metrics line, or at a step
shortly after the start (after a resume when there is a checkpoint). A run that reaches its
end is compared with the reference and the next kills go to a fresh run directory.

After each kill the run directory must hold no half-written file (:func:`check_run_dir`): every
JSON parses, every JSON-lines line parses, every picture decodes, every checkpoint restores;
temporaries of atomic writes (hidden ``.<name>.<pid>@<host>.XXXXXXXX<ext>`` files) and orbax's
temporary folders are counted (``temporaries_seen``), not failed; ``temporaries_left``: those
still in the run directories once finished. A finished run must equal the reference (:func:`compare`):
the final checkpoint (parameters, optimiser state, step) bitwise, ``metrics.jsonl`` (without the
``steps_per_sec`` timing), ``eval/*.json`` and ``config.json`` byte for byte, the same files.

Prints one JSON line: ``kills``, ``resumes``, ``differences`` (files or checkpoints unequal to
the reference), ``problems`` (half-written files seen after kills), wall time and load average.
`tests.test_faults` and `tests.test_background_eval` use its pieces with fewer kills;
`tests.test_checkpoint_faults` damages each kind of file of a checkpoint (:func:`damage`,
:data:`FILE_KINDS`, :data:`DAMAGES`).
The children share a persistent compilation cache (``JAX_COMPILATION_CACHE_DIR``, under the
work directory unless set), so a resume compiles in seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import re
import signal
import subprocess
import sys
import tempfile
import time

MODULE = "experiments.dsprites_betavae"
COMMAND = ("--config=experiments/configs/dsprites_betavae.py:smoke", "--config.batch_size=16",
           "--config.eval.num_points=500", "--config.eval.factor_score_votes=20",
           "--noconfig.progress_bar")
POINTS = ("checkpoint", "eval", "metrics", "resume")
KILL_ENV = "DISENTANGLE_FAULTS_KILL_AT"  # "<point>:<n>": the child kills itself there
TEMPORARY = re.compile(r"^\.(?P<target>.+)\.[A-Za-z0-9_]{8}(\.[A-Za-z0-9]+)?$")  # tempfile.mkstemp
ORBAX_TMP = ".orbax-checkpoint-tmp"


def child() -> None:
  """The command of :data:`MODULE`, killing itself (SIGKILL) at the point of :data:`KILL_ENV`."""
  point, _, n = os.environ.get(KILL_ENV, "").partition(":")
  if point:
    _arm(point, int(n))
  sys.argv = [MODULE.replace(".", "/") + ".py"] + sys.argv[1:]
  import runpy  # pylint: disable=g-import-not-at-top
  runpy.run_module(MODULE, run_name="__main__", alter_sys=True)


def _arm(point: str, n: int) -> None:
  """Patch the library so that the ``n``-th occurrence of ``point`` kills this process."""
  seen = [0]

  def occurs():
    seen[0] += 1
    if seen[0] == n:
      os.kill(os.getpid(), signal.SIGKILL)

  if point == "checkpoint":
    from orbax.checkpoint._src.path import atomicity  # pylint: disable=g-import-not-at-top
    finalize = atomicity.AtomicRenameTemporaryPath.finalize

    async def killing_finalize(self, *args, **kwargs):
      occurs()
      return await finalize(self, *args, **kwargs)
    atomicity.AtomicRenameTemporaryPath.finalize = killing_finalize
  elif point == "eval":
    replace = os.replace

    def killing_replace(src, dst, *args, **kwargs):
      if f"{os.sep}eval{os.sep}" in os.fspath(dst):
        occurs()
      return replace(src, dst, *args, **kwargs)
    os.replace = killing_replace
  elif point == "metrics":
    from disentangle.train import writers  # pylint: disable=g-import-not-at-top
    write = writers.MetricWriter.write

    def killing_write(self, step, metrics):
      write(self, step, metrics)
      occurs()
    writers.MetricWriter.write = killing_write
  elif point == "resume":
    from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
    train = trainer.train

    def killing_train(*args, hooks=None, **kwargs):
      return train(*args, hooks=list(hooks or ()) + [lambda state, step: occurs()], **kwargs)
    trainer.train = killing_train
  else:
    raise ValueError(f"unknown kill point {point!r}; known: {POINTS}")


def plan(rng: random.Random, kills: int) -> list[tuple[str, float | int]]:
  """The kills in order: ``('timed', fraction of T)`` or ``(point, n)`` (the ``n``-th occurrence
  of the point in the attempt). Each point once (as many as fit, leaving two timed kills), then
  about one point in four."""
  def at(p):
    return p, rng.randint(2, 4) if p == "resume" else rng.randint(1, 2)
  out = [at(p) for p in rng.sample(POINTS, min(len(POINTS), max(kills - 2, kills // 2)))]
  while len(out) < kills:
    out.append(at(rng.choice(POINTS)) if rng.random() < 0.25 else ("timed", rng.random()))
  rng.shuffle(out)
  return out


def _restore(step_dir: pathlib.Path):
  import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top
  return ocp.StandardCheckpointer().restore((step_dir / "default").resolve())


def check_run_dir(run: pathlib.Path) -> tuple[list[str], int]:
  """(half-written files, temporaries) of ``run`` after a kill (module docstring)."""
  problems, temporaries = [], 0
  for path in sorted(run.rglob("*")):
    rel = path.relative_to(run)
    if rel.parts[0] in ("tensorboard", "checkpoints"):
      continue
    if TEMPORARY.match(path.name):
      temporaries += 1
      continue
    if not path.is_file():
      continue
    try:
      if path.suffix == ".json":
        json.loads(path.read_text())
      elif path.suffix == ".jsonl":
        for line in path.read_text().splitlines():
          json.loads(line)
      elif path.suffix == ".png":
        from PIL import Image  # pylint: disable=g-import-not-at-top
        with Image.open(path) as im:
          im.load()
    except Exception as e:  # pylint: disable=broad-except
      problems.append(f"{rel}: {type(e).__name__}: {str(e)[:120]}")
  folder = run / "checkpoints"
  for step_dir in sorted(folder.iterdir()) if folder.is_dir() else ():
    if ORBAX_TMP in step_dir.name:
      temporaries += 1
    elif step_dir.name.isdigit():
      try:
        _restore(step_dir)
      except Exception as e:  # pylint: disable=broad-except
        problems.append(f"checkpoints/{step_dir.name}: {type(e).__name__}: {str(e)[:120]}")
  return problems, temporaries


def _visible(run: pathlib.Path) -> set[str]:
  return {str(p.relative_to(run)) for p in run.rglob("*")
          if p.is_file() and not TEMPORARY.match(p.name) and
          p.relative_to(run).parts[0] not in ("tensorboard", "checkpoints")}


def compare(run: pathlib.Path, reference: pathlib.Path, steps: int) -> list[str]:
  """What of a finished ``run`` differs from ``reference`` (module docstring); [] if nothing."""
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  out = []
  files = _visible(reference)
  if _visible(run) != files:
    out.append(f"files: {sorted(_visible(run) ^ files)}")
  lines = lambda r: [{k: v for k, v in json.loads(l).items() if k != "steps_per_sec"}  # noqa: E731
                     for l in (r / "metrics.jsonl").read_text().splitlines()]
  if lines(run) != lines(reference):
    out.append("metrics.jsonl")
  for name in sorted(files):
    if (name.startswith("eval/") or name == "config.json") and (run / name).exists() and \
        (run / name).read_bytes() != (reference / name).read_bytes():
      out.append(name)
  try:
    a = jax.tree_util.tree_leaves_with_path(_restore(run / "checkpoints" / str(steps)))
    b = jax.tree_util.tree_leaves_with_path(_restore(reference / "checkpoints" / str(steps)))
    if [p for p, _ in a] != [p for p, _ in b] or not all(
        np.asarray(x).dtype == np.asarray(y).dtype and
        np.array_equal(np.asarray(x), np.asarray(y)) for (_, x), (_, y) in zip(a, b)):
      out.append(f"checkpoints/{steps}")
  except Exception as e:  # pylint: disable=broad-except
    out.append(f"checkpoints/{steps}: {type(e).__name__}: {str(e)[:120]}")
  pictures = sorted(n for n in files if n.endswith(".png") and (run / n).exists() and
                    (run / n).read_bytes() != (reference / n).read_bytes())
  if pictures:
    out.append(f"pictures: {pictures}")
  return out


# Damaged checkpoints: each kind of file of a step (orbax's OCDBT layout, and the checksums of
# `disentangle.train.integrity`) and each way a file is damaged (`damage`).
FILE_KINDS = {
    "data": None,                              # the largest file: the arrays' bytes
    "array_metadata": "default/_METADATA",     # the tree and each array's shape and dtype
    "ocdbt_manifest": "default/manifest.ocdbt",  # the OCDBT database's root
    "step_metadata": "_CHECKPOINT_METADATA",   # orbax's step metadata
    "checksums": "checksums.json",             # the manifest of checksums
}
DAMAGES = ("flip", "truncate", "zero_length", "delete")
FLIPPED = 4096  # bytes a "flip" inverts


def damaged_file(step_dir: pathlib.Path, kind: str) -> pathlib.Path:
  """The file of ``kind`` (:data:`FILE_KINDS`) in a step folder (a file under ``<item>/`` for the
  item's files of a step saved with a record, e.g. ``state/_METADATA``)."""
  if FILE_KINDS[kind] is None:
    return max((p for p in step_dir.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
  rel = FILE_KINDS[kind]
  if (step_dir / rel).exists() or not rel.startswith("default/"):
    return step_dir / rel
  return next(step_dir.glob("*/" + rel.split("/", 1)[1]))


def damage(step_dir: pathlib.Path, kind: str, how: str) -> pathlib.Path:
  """Damages the file of ``kind`` in ``step_dir``: ``flip`` inverts :data:`FLIPPED` bytes from
  its middle (all of a smaller file), ``truncate`` keeps its first half, ``zero_length`` empties
  it, ``delete`` removes it. Returns the file."""
  path = damaged_file(step_dir, kind)
  data = path.read_bytes()
  if how == "flip":
    start = max(0, len(data) // 2 - FLIPPED // 2)
    chunk = bytes(b ^ 0xFF for b in data[start:start + FLIPPED])
    path.write_bytes(data[:start] + chunk + data[start + FLIPPED:])
  elif how == "truncate":
    path.write_bytes(data[:len(data) // 2])
  elif how == "zero_length":
    path.write_bytes(b"")
  elif how == "delete":
    path.unlink()
  else:
    raise ValueError(f"unknown damage {how!r}; known: {DAMAGES}")
  return path


def environment(workdir: pathlib.Path) -> dict:
  """The children's environment: the repository importable, a shared compilation cache."""
  from tests import helpers  # pylint: disable=g-import-not-at-top  (not in the children)
  env = dict(os.environ, PYTHONPATH=str(helpers.REPO))
  env.setdefault("JAX_COMPILATION_CACHE_DIR", str(pathlib.Path(workdir) / "jax_cache"))
  env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.2")
  env.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
  env.pop(KILL_ENV, None)
  return env


def command(steps: int) -> list[str]:
  """The arguments of :data:`COMMAND` training ``steps`` steps (a multiple of 8): a checkpoint
  every quarter of them, an evaluation every half, a metrics line every eighth."""
  if steps <= 0 or steps % 8:
    raise ValueError(f"steps must be a positive multiple of 8, got {steps}")
  return [*COMMAND, f"--config.checkpoint_every={steps // 4}", f"--config.eval_every={steps // 2}",
          f"--config.log_every={steps // 8}", f"--config.num_steps={steps}"]


def start(run: pathlib.Path, steps: int, env: dict, log: pathlib.Path,
          kill_at: str | None = None) -> subprocess.Popen:
  """The command (:func:`command`) training ``steps`` steps in ``run``, output to ``log``."""
  env = dict(env, **({KILL_ENV: kill_at} if kill_at else {}))
  args = [sys.executable, "-c", "from tests import faults; faults.child()", *command(steps),
          f"--workdir={run}"]
  from tests import helpers  # pylint: disable=g-import-not-at-top  (not in the children)
  with open(log, "w") as f:
    return subprocess.Popen(args, cwd=helpers.REPO, env=env, stdout=f, stderr=subprocess.STDOUT)


def reference(run: pathlib.Path, steps: int, env: dict) -> float:
  """Train ``run`` without interruption; its wall time (s)."""
  t0 = time.perf_counter()
  log = run.parent / f"{run.name}.log"
  proc = start(run, steps, env, log)
  if proc.wait() != 0:
    raise RuntimeError(f"the uninterrupted run failed (status {proc.returncode}): "
                       f"{log.read_text()[-2000:]}")
  return time.perf_counter() - t0


def run(kills: int, seed: int, workdir: pathlib.Path, steps: int = 40,
        reference_run: tuple[pathlib.Path, float] | None = None) -> dict:
  """Kill ``kills`` times (module docstring); the JSON record. ``reference_run``: an
  uninterrupted run of the same ``steps`` already trained, and its wall time."""
  workdir = pathlib.Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  env = environment(workdir)
  begin = time.perf_counter()
  if reference_run is None:
    reference_run = (workdir / "reference", reference(workdir / "reference", steps, env))
  ref, wall = reference_run
  log = workdir / "child.log"
  rng = random.Random(seed)
  todo = plan(rng, kills)
  record = {"benchmark": "faults", "kills": 0, "resumes": 0, "runs_finished": 0,
            "differences": 0, "different": [], "problems": [], "temporaries_seen": 0,
            "temporaries_left": 0,
            "kills_at": {p: 0 for p in ("timed",) + POINTS}}
  round_, attempts = 0, 0
  current = workdir / f"run_{round_}"
  while True:
    kind, value = todo[record["kills"]] if record["kills"] < kills else (None, None)
    resuming = (current / "checkpoints").is_dir() and any(
        p.name.isdigit() for p in (current / "checkpoints").iterdir())
    t0 = time.perf_counter()
    proc = start(current, steps, env, log, f"{kind}:{value}" if kind in POINTS else None)
    attempts += 1
    if kind == "timed":
      try:
        proc.wait(timeout=value * wall)
      except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
    status = proc.wait()
    text = log.read_text()
    record["resumes"] += "resumed from" in text
    if status == -signal.SIGKILL:
      record["kills"] += 1
      record["kills_at"][kind] += 1
      problems, temporaries = check_run_dir(current)
      record["problems"] += [f"{current.name} after kill {record['kills']} ({kind}): {p}"
                             for p in problems]
      record["temporaries_seen"] += temporaries
      continue
    if status != 0:
      raise RuntimeError(f"attempt {attempts} in {current} failed (status {status}, "
                         f"resuming={resuming}): {text[-3000:]}")
    if not resuming:  # T: a whole run's wall time with the compilation cache filled
      wall = time.perf_counter() - t0
    different = compare(current, ref, steps)
    record["temporaries_left"] += check_run_dir(current)[1]
    record["runs_finished"] += 1
    record["differences"] += len(different)
    record["different"] += [f"{current.name}: {d}" for d in different]
    if record["kills"] >= kills:
      break
    round_ += 1
    current = workdir / f"run_{round_}"
  record.update(attempts=attempts, steps=steps, seed=seed, run_wall_s=round(wall, 1),
                wall_s=round(time.perf_counter() - begin, 1),
                loadavg=[round(v, 2) for v in os.getloadavg()], cpus=os.cpu_count(),
                command=f"python -m {MODULE} " + " ".join(command(steps)))
  return record


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("--kills", type=int, default=50)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--steps", type=int, default=40, help="a positive multiple of 8")
  parser.add_argument("--workdir", default=None, help="kept when given; else a temporary folder")
  args = parser.parse_args(argv)
  if args.steps <= 0 or args.steps % 8:
    parser.error(f"--steps: a positive multiple of 8, got {args.steps}")
  if args.workdir:
    record = run(args.kills, args.seed, pathlib.Path(args.workdir), args.steps)
  else:
    with tempfile.TemporaryDirectory(prefix="faults_") as tmp:
      record = run(args.kills, args.seed, pathlib.Path(tmp), args.steps)
  print(json.dumps(record), flush=True)


if __name__ == "__main__":
  main()
