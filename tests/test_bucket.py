"""Runs on a bucket (``gs://``): a Cloud Storage emulator on 127.0.0.1 (`tests.storage_emulator`,
started by the ``storage_emulator`` fixture) behind the real clients (gcsfs, tensorstore)."""
import contextlib
import http.server
import json
import signal
import socket
import subprocess
import sys
import threading
import time

import jax
import numpy as np
import pytest

from disentangle import paths
from disentangle.train import preemption
from tests import helpers


def _fs():
  """The bucket's file system, its listings cache dropped (other processes write too)."""
  fs, _ = paths.filesystem("gs://")
  fs.invalidate_cache()
  return fs




@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
  """The 9 steps of the tests below in a local folder, never stopped: (folder, parameters)."""
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  folder = tmp_path_factory.mktemp("bucket") / "local"
  config = helpers.tiny_config(**{"mesh.num_devices": 1, "num_steps": 9})
  return folder, trainer.train(config, folder, dataset=helpers.TinyImages())


@pytest.mark.slow
def test_a_run_stopped_and_resumed_on_a_bucket_equals_the_local_run(bucket, local_run):
  """9 steps (checkpoints at 3, 6, 9; metrics lines at 2, 3, 4, 6, 8, 9) in a local folder, and
  on the bucket stopped by SIGTERM during step 4 then trained again: the bucket holds the
  checkpoints 3 and 4 after the stop, and at the end the same metrics lines and the same
  parameters as the local run."""
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  data = helpers.TinyImages()
  config = helpers.tiny_config(**{"mesh.num_devices": 1, "num_steps": 9})
  folder, local = local_run

  def sigterm_at_4(state, step):
    del state
    if step == 4:
      signal.raise_signal(signal.SIGTERM)

  with pytest.raises(preemption.Preempted) as e:
    trainer.train(config, bucket, dataset=data, hooks=[sigterm_at_4])
  assert e.value.step == 4 and f"checkpoint 4 in {bucket}/checkpoints" in str(e.value)
  _fs()
  assert helpers.steps(f"{bucket}/checkpoints") == [3, 4]
  assert [l["step"] for l in helpers.lines(bucket)] == [2, 3, 4]
  resumed = trainer.train(config, bucket, dataset=data)
  for a, b in zip(jax.tree_util.tree_leaves(local), jax.tree_util.tree_leaves(resumed)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert helpers.lines(bucket) == helpers.lines(folder)
  fs = _fs()
  assert json.loads(fs.cat(f"{bucket}/config.json")) == json.loads(
      (folder / "config.json").read_text())
  events = [p for p in fs.ls(f"{bucket}/tensorboard") if "tfevents" in p]
  assert len(events) == 2 and all(fs.size(p) > 0 for p in events)  # the stopped and resumed runs
  assert helpers.steps(f"{bucket}/checkpoints") == [6, 9]


_KILLED_CHILD = """
import os, signal, sys
import jax
jax.config.update("jax_num_cpu_devices", 8)  # as tests/conftest.py: the parent's compilation
from disentangle.train import trainer
from tests import helpers
config = helpers.tiny_config(**{"mesh.num_devices": 1, "num_steps": 9})
def kill_at_5(state, step):
  del state
  if step == 5:
    os.kill(os.getpid(), signal.SIGKILL)
trainer.train(config, sys.argv[1], dataset=helpers.TinyImages(), hooks=[kill_at_5])
"""


@pytest.mark.slow
def test_a_run_killed_on_a_bucket_resumes_equal_to_the_local_run(bucket, local_run):
  """The same 9 steps in a process killed (SIGKILL, no handler runs) at step 5, past the
  checkpoint of step 3 and the metrics line of step 4, on the bucket; trained again there, it
  ends with the local run's metrics lines and parameters, bit for bit."""
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  data = helpers.TinyImages()
  config = helpers.tiny_config(**{"mesh.num_devices": 1, "num_steps": 9})
  folder, local = local_run
  child = subprocess.run([sys.executable, "-c", _KILLED_CHILD, bucket], capture_output=True,
                         text=True, timeout=600, cwd=helpers.REPO)
  assert child.returncode == -signal.SIGKILL, child.stderr[-3000:]
  _fs()
  assert helpers.steps(f"{bucket}/checkpoints") == [3]
  assert [l["step"] for l in helpers.lines(bucket)] == [2, 3, 4]  # line 4: past the checkpoint
  resumed = trainer.train(config, bucket, dataset=data)
  for a, b in zip(jax.tree_util.tree_leaves(local), jax.tree_util.tree_leaves(resumed)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert helpers.lines(bucket) == helpers.lines(folder)


@pytest.mark.slow
def test_two_processes_write_one_checkpoint_into_one_bucket_folder_and_resume(bucket):
  """The multi-host test (`tests.distributed_worker`, two processes on loopback) with its workdir
  on the bucket: both processes write their parts of the step-2 checkpoint into the one folder
  (orbax's per-process OCDBT parts, then its commit marker), then both resume from it to step 4;
  process 0 alone writes the metrics lines, once per step."""
  first = helpers.run_pair(bucket, 2)
  assert sorted(r["process"] for r in first) == [0, 1] and all(r["step"] == 2 for r in first)
  assert first[0]["params_sha256"] == first[1]["params_sha256"]
  fs = _fs()
  step = f"{bucket}/checkpoints/2"
  names = {p.rpartition("/")[2] for p in fs.ls(step)}
  assert "commit_success.txt" in names
  parts = {p.rpartition("/")[2] for p in fs.ls(f"{step}/default")}
  assert {"ocdbt.process_0", "ocdbt.process_1"} <= parts, parts
  second = helpers.run_pair(bucket, 4)  # resumes from step 2
  assert all(r["step"] == 4 for r in second)
  assert second[0]["params_sha256"] == second[1]["params_sha256"]
  assert [l["step"] for l in helpers.lines(bucket)] == [1, 2, 3, 4]
  _fs()
  assert 4 in helpers.steps(f"{bucket}/checkpoints")


def _dead_pid() -> int:
  proc = subprocess.Popen([sys.executable, "-c", "pass"])
  proc.wait()
  return proc.pid


@pytest.mark.slow
def test_reproduce_and_evaluate_read_and_write_on_a_bucket(tmp_path, bucket):
  """A one-program table (`tests.helpers.tiny_table`: train, evaluate, tabulate) in a
  local folder and on the bucket: the same table lines and the same ``results.json`` numbers;
  the lock object of a process of this host that no longer runs is taken over and the lock is
  gone after the command; a lock held by a process of another host is refused in one line
  naming the lock object; `evaluate_run` again on the bucket's run reads its checkpoint there
  and rewrites its results to the same numbers."""
  from disentangle.evaluation import evaluate_run  # pylint: disable=g-import-not-at-top
  from disentangle.reproduce import plan  # pylint: disable=g-import-not-at-top
  from disentangle.reproduce import run  # pylint: disable=g-import-not-at-top
  table, modules, kwargs = helpers.tiny_table()
  local = run.run_table(table, tmp_path, modules, **kwargs)
  fs = _fs()
  fs.pipe_file(f"{bucket}/{run.LOCK}".removeprefix("gs://"),
               f"{_dead_pid()}@{socket.gethostname()}".encode())
  remote = run.run_table(table, bucket, modules, **kwargs)
  assert helpers.without_places(remote["lines"]) == helpers.without_places(local["lines"])
  fs = _fs()
  assert not fs.exists(f"{bucket}/{run.LOCK}")
  program = next(p.rpartition("/")[2] for p in fs.ls(f"{bucket}/runs"))
  results = lambda: json.loads(fs.cat(f"{bucket}/runs/{program}/results.json"))  # noqa: E731
  local_results = json.loads((tmp_path / "runs" / program / "results.json").read_text())
  assert helpers.without_places(results()["metrics"]) == helpers.without_places(
      local_results["metrics"])
  assert json.loads(fs.cat(f"{bucket}/table.json"))["lines"] == json.loads(
      json.dumps(remote["lines"]))
  assert fs.cat(f"{bucket}/table.md") and fs.exists(f"{bucket}/{run.RECORD}")

  fs.pipe_file(f"{bucket}/{run.LOCK}".removeprefix("gs://"), b"4321@another-host")
  with pytest.raises(plan.BadInput) as e:
    run.run_table(table, bucket, modules, **kwargs)
  assert str(e.value) == (
      f"--workdir: {bucket} is in use by another experiments.reproduce (process 4321 on "
      f"another-host); wait for it to end or choose another --workdir (if it has ended, "
      f"delete {bucket}/{run.LOCK})")
  fs.rm_file(f"{bucket}/{run.LOCK}".removeprefix("gs://"))

  fs.rm_file(f"{bucket}/runs/{program}/results.json".removeprefix("gs://"))
  again = evaluate_run.evaluate_run(f"{bucket}/runs/{program}", dataset=kwargs["dataset"],
                                    metrics=table.evaluated, **kwargs["evaluate_kwargs"])
  _fs()
  drop_folder = lambda facts: {k: v for k, v in facts.items() if k != "directory"}  # noqa: E731
  assert drop_folder(again["checkpoint"]) == drop_folder(local_results["checkpoint"])
  assert helpers.without_places(results()["metrics"]) == helpers.without_places(
      local_results["metrics"])


def test_a_data_file_in_a_bucket_is_read_through_a_verified_local_copy(
    shared_data_dir, bucket, tmp_path, monkeypatch):
  """``fetch`` of a canonical file from a gs:// data folder: a local copy in the cache folder
  with the file's checksum, read like any file; a corrupt object is one `ChecksumError` naming
  the URL."""
  from disentangle.data import files  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv(files.CACHE_DIR_ENV, str(tmp_path / "cache"))
  name = "mnist/t10k-labels-idx1-ubyte.gz"
  original = (shared_data_dir / name).read_bytes()
  fs = _fs()
  fs.pipe_file(f"{bucket}/data/{name}".removeprefix("gs://"), original)
  copy = files.fetch(name, f"{bucket}/data", allow_download=False)
  assert copy.is_relative_to(tmp_path / "cache") and copy.read_bytes() == original
  assert files.file_digest(copy, files.FILES[name].algorithm) == files.FILES[name].digest
  fs.pipe_file(f"{bucket}/bad/{name}".removeprefix("gs://"), original[:-1])
  with pytest.raises(files.ChecksumError, match=f"{bucket}/bad/{name}"):
    files.fetch(name, f"{bucket}/bad", allow_download=False)


@contextlib.contextmanager
def _answering(code: int):
  """A local HTTP server answering every request with status ``code``; yields its URL."""
  class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
      self.send_response(code)
      self.end_headers()
      self.wfile.write(b"{}")

    def log_message(self, *args):
      del args

  server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
  # Polled every 10 ms, so that shutting it down takes no longer (the default polls every 0.5 s).
  threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
  try:
    yield f"http://127.0.0.1:{server.server_address[1]}"
  finally:
    server.shutdown()
    server.server_close()


@pytest.fixture
def stopped_emulator():
  """The URL of an emulator that stopped: a local port on which nothing listens."""
  from tests import storage_emulator as emulator  # pylint: disable=g-import-not-at-top
  return f"http://127.0.0.1:{emulator.free_port()}"


@pytest.mark.parametrize("case,url,cause", [
    ("emulator", "gs://no-such-bucket/run", "no such bucket 'no-such-bucket' (HTTP 404)"),
    ("stopped", "gs://disentangle-test/run", "storage unreachable (no connection to 127.0.0.1:"),
    ("unresolvable", "gs://disentangle-test/run",
     "storage unreachable (the storage host 'storage.invalid' cannot be resolved"),
    ("403", "gs://b/run", "permission denied (HTTP 403"),
    ("401", "gs://b/run", "no credentials (the storage refused them, HTTP 401)"),
    ("no credentials", "gs://b/run", "no credentials (none found"),
])
def test_a_bucket_that_cannot_be_used_is_one_line_naming_the_cause(
    case, url, cause, storage_emulator, request, monkeypatch, tmp_path):
  """`storage.check` against the emulator (a missing bucket; the emulator stopped), a storage
  host that cannot be resolved, a server answering 403 / 401, and Cloud Storage's own endpoint
  (here a local server) without credentials: `StorageError`, ``--workdir: <url>: <cause>``, in
  seconds; the emulator's bucket passes."""
  from disentangle import storage  # pylint: disable=g-import-not-at-top
  storage.check("gs://disentangle-test/run", "--workdir")  # the emulator's bucket: usable
  with contextlib.ExitStack() as stack:
    if case == "stopped":
      monkeypatch.setenv(storage.EMULATOR_ENV, request.getfixturevalue("stopped_emulator"))
    elif case == "unresolvable":
      monkeypatch.setenv(storage.EMULATOR_ENV, "http://storage.invalid:4443")
    elif case in ("403", "401"):
      monkeypatch.setenv(storage.EMULATOR_ENV, stack.enter_context(_answering(int(case))))
    elif case == "no credentials":
      monkeypatch.delenv(storage.EMULATOR_ENV)
      monkeypatch.setattr(storage, "ENDPOINT", stack.enter_context(_answering(200)))
      monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "no-key.json"))
    started = time.monotonic()
    with pytest.raises(storage.StorageError) as e:
      storage.check(url, "--workdir", timeout=10)
  assert time.monotonic() - started < 12
  assert str(e.value).startswith(f"--workdir: {url}: {cause}"), str(e.value)
  assert "\n" not in str(e.value)


@pytest.mark.slow
@pytest.mark.parametrize("module,args", [
    ("experiments.reproduce", ["--table=cascadevae_table3"]),
    ("experiments.mnist_cascade", []),
])
def test_a_command_on_a_missing_bucket_exits_2_in_one_line(module, args, storage_emulator):
  """The reproduce and training command lines on a bucket the storage does not have: exit
  status 2 and one line on stderr naming the cause, before anything runs."""
  del storage_emulator
  proc = subprocess.run([sys.executable, "-m", module, *args,
                         "--workdir=gs://no-such-bucket/run"], capture_output=True, text=True,
                        timeout=300, cwd=helpers.REPO)
  lines = [line for line in proc.stderr.splitlines() if line.strip()]
  assert proc.returncode == 2 and lines == [
      "error: --workdir: gs://no-such-bucket/run: no such bucket 'no-such-bucket' (HTTP 404)"], \
      proc.stderr[-3000:]
