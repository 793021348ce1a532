"""Random bad input for `tests.test_fuzz_inputs`: config faults, and data files corrupted.

``config_case(rng, k)`` draws a command line of ``experiments.mnist_cascade`` with one config
fault: a value of the wrong type or out of its range (the ``config.RULES`` table), an unknown
field (a typo of a known one) or an unknown variant; the test runs these in its own process.
``data_case(rng, root, shared, k)`` copies a data set and corrupts one file: MNIST's gzipped IDX
training files (real and checksummed) truncated, bit-flipped or of mismatched shape, CelebA's
attribute list truncated, a row cut or a value out of range.

``python -m tests.fuzz_driver N ROOT SHARED`` imports the library once and forks one child per
data case (the command line run as ``python -m`` would), printing one JSON list of the outcomes.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import pathlib
import random
import re
import runpy
import shutil
import signal
import sys
import time
import traceback

from disentangle import config as config_lib
from disentangle import launch  # noqa: F401  (imported once, before the forks)
from disentangle.data.datasets import synthetic
from disentangle.train import trainer  # noqa: F401
import experiments.configs.mnist_cascade as mnist_cfg

BASE = ["--config=experiments/configs/mnist_cascade.py:smoke"]
CONFIG_KINDS = ("type", "range", "unknown_field", "variant")
DATA_FLAGS = ["--config.dataset.synthetic_if_missing=false",
              "--config.dataset.allow_download=false"]


def digest(folder) -> dict[str, str]:
  """sha256 of every file under ``folder``."""
  return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
          for p in sorted(pathlib.Path(folder).rglob("*")) if p.is_file()}


def _flatten(c, prefix=""):
  for k in c.keys():
    v = c[k]
    if hasattr(v, "keys"):
      yield from _flatten(v, f"{prefix}{k}.")
    else:
      yield f"{prefix}{k}", v


SCHEMA = dict(_flatten(mnist_cfg.get_config("smoke")))
RANGED = [f for f in config_lib.RULES if f in SCHEMA]
TYPED = [f for f, v in SCHEMA.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
BOOLS = [f for f, v in SCHEMA.items() if isinstance(v, bool)]


def out_of_range(field):
  """A value of ``field``'s type that its rule refuses, or None."""
  ok, _ = config_lib.RULES[field]
  for value in (0, -1, -7, 1.5, 2, -0.5, "bogus", 10**12):
    if isinstance(SCHEMA[field], str) != isinstance(value, str):
      continue
    if (isinstance(SCHEMA[field], int) and not isinstance(SCHEMA[field], bool)
        and isinstance(value, float)):
      continue
    if not ok(value):
      return value
  return None


def config_case(rng: random.Random) -> tuple[str, list[str], list[str]]:
  """(kind, command-line arguments, names one of which the error line must contain)."""
  kind = rng.choice(CONFIG_KINDS)
  argv = list(BASE)
  if kind == "type":
    field = rng.choice(TYPED + BOOLS)
    value = rng.choice(["abc", "[1, 2]", "1e", "--", "{}", "nan?"])
    if field in BOOLS:
      value = rng.choice(["maybe", "2", "yess"])
    return kind, argv + [f"--config.{field}={value}"], [field]
  if kind == "range":
    field = rng.choice(RANGED)
    value = out_of_range(field)
    if value is None:
      return config_case(rng)
    return kind, argv + [f"--config.{field}={value}"], [field]
  if kind == "unknown_field":
    parts = rng.choice(list(SCHEMA)).split(".")
    w = parts[-1]
    i = rng.randrange(len(w))
    parts[-1] = w[:i] + rng.choice("xqz") + w[i + 1:] if rng.random() < 0.5 else w + "_x"
    bad = ".".join(parts)
    if bad in SCHEMA:
      return config_case(rng)
    return kind, argv + [f"--config.{bad}=1"], [bad]
  bad = rng.choice(["smok", "smokex", "cpu2", "paper", "x"]) + str(rng.randrange(100))
  return kind, [f"--config=experiments/configs/mnist_cascade.py:{bad}"], [bad]


def _corrupt(rng, path, how):
  data = path.read_bytes()
  if how == "truncate":
    path.write_bytes(data[:rng.randrange(0, len(data))])
  elif how == "flip":
    i = rng.randrange(len(data))
    path.write_bytes(data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:])
  else:  # shape: an IDX header whose dimensions do not match its data
    raw = bytearray(gzip.decompress(data))
    raw[7] = (raw[7] + 1) % 256
    path.write_bytes(gzip.compress(bytes(raw), compresslevel=1, mtime=0))  # level 9: 20 s a file


def data_case(rng: random.Random, data_dir: pathlib.Path, shared: pathlib.Path,
              celeba: pathlib.Path) -> tuple[str, list[str], list[str]]:
  """A corrupted copy of MNIST (2 draws in 3) or of the CelebA stand-in ``celeba`` in
  ``data_dir``: (kind: ``mnist_<how>`` or ``celeba_<how>``, command-line arguments, [the
  corrupted file's name])."""
  if rng.random() < 2 / 3:
    shutil.copytree(shared / "mnist", data_dir / "mnist")
    target = rng.choice(sorted((data_dir / "mnist").glob("train-*.gz")))
    how = rng.choice(["truncate", "flip", "shape"])
    _corrupt(rng, target, how)
    return f"mnist_{how}", BASE + [f"--config.dataset.data_dir={data_dir}", *DATA_FLAGS], [target.name]
  shutil.copytree(celeba, data_dir / "celeba")
  target = data_dir / "celeba" / "list_attr_celeba.txt"
  lines = target.read_text().splitlines()
  how = rng.choice(["truncate", "cut_row", "bad_value"])
  if how == "truncate":
    target.write_text("\n".join(lines[:rng.randrange(0, 2)]) + "\n")
  else:
    i = rng.randrange(2, len(lines))
    lines[i] = lines[i].rsplit(None, 1)[0] + ("" if how == "cut_row" else " 7")
    target.write_text("\n".join(lines) + "\n")
  return f"celeba_{how}", ["--config=experiments/configs/celeba_ffvae.py:smoke",
                           f"--config.dataset.data_dir={data_dir}", *DATA_FLAGS], [target.name]


def _forked(argv: list[str], log: pathlib.Path) -> int:
  """The command line ``argv`` in a forked child (stdout and stderr to ``log``): its status."""
  pid = os.fork()
  if pid == 0:
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    code = 0
    try:
      module = "experiments." + re.search(r"configs/(\w+)\.py", argv[0]).group(1)
      sys.argv = [module] + argv
      signal.alarm(120)  # a case that starts training is a failure, not a hang
      runpy.run_module(module, run_name="__main__")
    except SystemExit as e:
      code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # pylint: disable=broad-except
      traceback.print_exc()
      code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # pylint: disable=protected-access
  _, status = os.waitpid(pid, 0)
  return os.waitstatus_to_exitcode(status)


def outcome(kind, argv, names, code, text, workdir, changed) -> dict:
  """What the test checks of one case."""
  errors = [l for l in re.split(r"[\r\n]", text) if l.startswith("error:")]
  return {"kind": kind, "argv": argv, "code": code, "errors": errors,
          "traceback": "Traceback" in text, "names": names,
          "announced": "run directory:" in text,
          "named": len(errors) == 1 and any(nm in errors[0] for nm in names),
          "run_dir": workdir.exists(), "changed": changed, "tail": text[-600:]}


def main(n: int, root: pathlib.Path, shared: pathlib.Path) -> list[dict]:
  rng = random.Random(0)
  celeba = synthetic.write_celeba(root / "celeba_src")
  results = []
  for k in range(n):
    data_dir, workdir, log = root / f"data_{k}", root / f"run_{k}", root / f"log_{k}.txt"
    kind, argv, names = data_case(rng, data_dir, shared, celeba)
    argv = argv + [f"--workdir={workdir}"]
    watched = [data_dir, pathlib.Path("experiments/configs")]
    before = {p: h for w in watched for p, h in digest(w).items()}
    t0 = time.time()
    code = _forked(argv, log)
    text = log.read_text(errors="replace")
    log.unlink()
    after = {p: h for w in watched for p, h in digest(w).items()}
    shutil.rmtree(data_dir, ignore_errors=True)
    changed = sorted(p for p in before if before[p] != after.get(p))
    results.append(dict(outcome(kind, argv, names, code, text, workdir, changed),
                        seconds=round(time.time() - t0, 2)))
  return results


if __name__ == "__main__":
  print(json.dumps(main(int(sys.argv[1]), pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3]))))
