"""Bad input at scale: N random bad command lines and data files, each one line and no change.

Each case is a command of ``experiments/`` with one fault drawn at random: a config override of
the wrong type or out of its range (the ``config.RULES`` table), an unknown field or variant, or
a data file truncated, bit-flipped or of mismatched shape in a canonical format (MNIST's gzipped
IDX training files, real and checksummed; CelebA's attribute list). Every case must exit
non-zero with one ``error:`` line naming the field or the file, no traceback, no run directory
and no file changed. A driver process imports the library once and forks one child per case.
A truncated file of the evaluated split (MNIST ``t10k-*``) has its own test below: the trainer
opens the evaluation data before it creates the run directory.
"""
import json
import pathlib
import subprocess
import sys

import pytest

N = 200
REPO = pathlib.Path(__file__).resolve().parents[1]

_DRIVER = r"""
import errno, gzip, hashlib, json, os, pathlib, random, re, runpy, shutil, signal, sys, time
import traceback

from disentangle import config as config_lib
from disentangle import launch  # noqa: F401  (imported once, before the forks)
from disentangle.data.datasets import synthetic
from disentangle.train import trainer  # noqa: F401
import experiments.configs.mnist_cascade as mnist_cfg

n, root, shared = int(sys.argv[1]), pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
rng = random.Random(0)
MNIST = sorted((shared / "mnist").glob("*.gz"))
CELEBA = synthetic.write_celeba(root / "celeba_src")
BASE = ["--config=experiments/configs/mnist_cascade.py:smoke"]


def digest(folder):
  return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
          for p in sorted(pathlib.Path(folder).rglob("*")) if p.is_file()}


def flatten(c, prefix=""):
  for k in c.keys():
    v = c[k]
    if hasattr(v, "keys"):
      yield from flatten(v, f"{prefix}{k}.")
    else:
      yield f"{prefix}{k}", v


SCHEMA = dict(flatten(mnist_cfg.get_config("smoke")))
RANGED = [f for f in config_lib.RULES if f in SCHEMA]
TYPED = [f for f, v in SCHEMA.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
BOOLS = [f for f, v in SCHEMA.items() if isinstance(v, bool)]


def out_of_range(field):
  ok, what = config_lib.RULES[field]
  for value in (0, -1, -7, 1.5, 2, -0.5, "bogus", 10**12):
    if isinstance(SCHEMA[field], str) != isinstance(value, str):
      continue
    if isinstance(SCHEMA[field], int) and not isinstance(SCHEMA[field], bool) and isinstance(value, float):
      continue
    if not ok(value):
      return value
  return None


def corrupt(path, how):
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


def case(k):
  kind = rng.choice(["type", "range", "unknown_field", "variant", "mnist", "mnist", "celeba"])
  data_dir = root / f"data_{k}"
  argv, names = list(BASE), None
  if kind == "type":
    field = rng.choice(TYPED + BOOLS)
    value = rng.choice(["abc", "[1, 2]", "1e", "--", "{}", "nan?"])
    if field in BOOLS:
      value = rng.choice(["maybe", "2", "yess"])
    argv.append(f"--config.{field}={value}")
    names = [field]
  elif kind == "range":
    field = rng.choice(RANGED)
    value = out_of_range(field)
    if value is None:
      return case(k)
    argv.append(f"--config.{field}={value}")
    names = [field]
  elif kind == "unknown_field":
    field = rng.choice(list(SCHEMA))
    parts = field.split(".")
    w = parts[-1]
    i = rng.randrange(len(w))
    parts[-1] = w[:i] + rng.choice("xqz") + w[i + 1:] if rng.random() < 0.5 else w + "_x"
    bad = ".".join(parts)
    if bad in SCHEMA:
      return case(k)
    argv.append(f"--config.{bad}=1")
    names = [bad]
  elif kind == "variant":
    bad = rng.choice(["smok", "smokex", "cpu2", "paper", "x"]) + str(rng.randrange(100))
    argv = [f"--config=experiments/configs/mnist_cascade.py:{bad}"]
    names = [bad]
  elif kind == "mnist":
    shutil.copytree(shared / "mnist", data_dir / "mnist")
    target = rng.choice(sorted((data_dir / "mnist").glob("train-*.gz")))
    corrupt(target, rng.choice(["truncate", "flip", "shape"]))
    argv += [f"--config.dataset.data_dir={data_dir}", "--config.dataset.synthetic_if_missing=false",
             "--config.dataset.allow_download=false"]
    names = [target.name]
  else:
    shutil.copytree(CELEBA, data_dir / "celeba")
    target = data_dir / "celeba" / "list_attr_celeba.txt"
    lines = target.read_text().splitlines()
    how = rng.choice(["truncate", "cut_row", "bad_value"])
    if how == "truncate":
      target.write_text("\n".join(lines[:rng.randrange(0, 2)]) + "\n")
    elif how == "cut_row":
      i = rng.randrange(2, len(lines))
      lines[i] = lines[i].rsplit(None, 1)[0]
      target.write_text("\n".join(lines) + "\n")
    else:
      i = rng.randrange(2, len(lines))
      lines[i] = lines[i].rsplit(None, 1)[0] + " 7"
      target.write_text("\n".join(lines) + "\n")
    argv = ["--config=experiments/configs/celeba_ffvae.py:smoke",
            f"--config.dataset.data_dir={data_dir}", "--config.dataset.synthetic_if_missing=false",
            "--config.dataset.allow_download=false"]
    names = [target.name]
    kind = f"celeba_{how}"
  return kind, argv, names


results = []
for k in range(n):
  kind, argv, names = case(k)
  workdir = root / f"run_{k}"
  argv = argv + [f"--workdir={workdir}"]
  watched = [root / f"data_{k}", pathlib.Path("experiments/configs")]
  before = {k: v for w in watched if w.exists() for k, v in digest(w).items()}
  log = root / f"log_{k}.txt"
  t0 = time.time()
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
    except BaseException:
      traceback.print_exc()
      code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
  _, status = os.waitpid(pid, 0)
  code = os.waitstatus_to_exitcode(status)
  text = log.read_text(errors="replace")
  log.unlink()
  after = {k: v for w in watched if w.exists() for k, v in digest(w).items()}
  shutil.rmtree(root / f"data_{k}", ignore_errors=True)
  errors = [l for l in re.split(r"[\r\n]", text) if l.startswith("error:")]
  results.append({
      "k": k, "kind": kind, "argv": argv, "code": code, "errors": errors,
      "traceback": "Traceback" in text, "names": names,
      "announced": "run directory:" in text,
      "named": len(errors) == 1 and any(nm in errors[0] for nm in names),
      "run_dir": workdir.exists(), "changed": sorted(p for p in before if before[p] != after.get(p)),
      "seconds": round(time.time() - t0, 2), "tail": text[-600:]})
print(json.dumps(results))
"""


@pytest.mark.slow
def test_random_bad_inputs_are_one_line_and_change_nothing(tmp_path, shared_data_dir):
  proc = subprocess.run([sys.executable, "-c", _DRIVER, str(N), str(tmp_path), str(shared_data_dir)],
                        capture_output=True, text=True, cwd=REPO, timeout=3000, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  results = json.loads(proc.stdout.strip().splitlines()[-1])
  assert len(results) == N
  bad = [r for r in results if r["code"] == 0 or r["traceback"] or not r["named"]
         or r["run_dir"] or r["changed"]]
  kinds = sorted({r["kind"] for r in results})
  assert not bad, (len(bad), kinds, [{k: r[k] for k in ("kind", "argv", "code", "errors", "tail")}
                                     for r in bad[:3]])
  assert {"type", "range", "unknown_field", "variant", "mnist"} <= set(kinds), kinds
  # a bad config field is refused before the run is announced
  assert not [r["argv"] for r in results
              if r["kind"] in ("type", "range", "unknown_field", "variant") and r["announced"]]


@pytest.mark.slow
def test_a_truncated_evaluation_file_is_one_line_and_creates_nothing(tmp_path, shared_data_dir):
  """MNIST's test images cut in half: exit status 2, one line naming the file, no run
  directory, no traceback (the training files are intact)."""
  import shutil  # pylint: disable=g-import-not-at-top
  shutil.copytree(shared_data_dir / "mnist", tmp_path / "data" / "mnist")
  target = tmp_path / "data" / "mnist" / "t10k-images-idx3-ubyte.gz"
  target.write_bytes(target.read_bytes()[:target.stat().st_size // 2])
  proc = subprocess.run(
      [sys.executable, "-m", "experiments.mnist_cascade",
       "--config=experiments/configs/mnist_cascade.py:smoke",
       f"--config.dataset.data_dir={tmp_path / 'data'}", "--config.dataset.allow_download=false",
       "--config.dataset.synthetic_if_missing=false", f"--workdir={tmp_path / 'run'}"],
      capture_output=True, text=True, cwd=REPO, timeout=300, check=False)
  errors = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert len(errors) == 1 and target.name in errors[0], errors
  assert "Traceback" not in proc.stderr and not (tmp_path / "run").exists()
