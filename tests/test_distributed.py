"""Two processes on loopback (jax.distributed + gloo CPU collectives): train, checkpoint, resume."""
import json
import os
import socket
import subprocess
import sys


from tests.conftest import REPO


def _free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _run_pair(workdir, steps):
  port = _free_port()
  env = dict(os.environ, PYTHONPATH=str(REPO), DISENTANGLE_NO_DOWNLOAD="1")
  procs = [subprocess.Popen([sys.executable, "-m", "tests.distributed_worker", str(i), str(port),
                             str(workdir), str(steps)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
           for i in range(2)]
  results = []
  for p in procs:
    out, _ = p.communicate(timeout=420)
    assert p.returncode == 0, out[-3000:]
    line = [l for l in out.splitlines() if l.startswith("RESULT ")][-1]
    results.append(json.loads(line[len("RESULT "):]))
  return results


def test_two_processes_train_checkpoint_and_resume(tmp_path):
  first = _run_pair(tmp_path, 2)
  assert sorted(r["process"] for r in first) == [0, 1]
  assert all(r["count"] == 2 and r["devices"] == 4 and r["step"] == 2 for r in first)
  assert first[0]["params_sha256"] == first[1]["params_sha256"]  # replicated parameters agree
  assert (tmp_path / "checkpoints" / "2").is_dir()
  second = _run_pair(tmp_path, 4)  # resumes from step 2
  assert all(r["step"] == 4 for r in second)
  assert second[0]["params_sha256"] == second[1]["params_sha256"]
  lines = [json.loads(l) for l in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert [l["step"] for l in lines] == [1, 2, 3, 4]  # process 0 alone writes, once per step
