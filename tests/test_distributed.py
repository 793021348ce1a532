"""Two processes on loopback (jax.distributed + gloo CPU collectives): train, checkpoint, resume;
and read a TFDS builder, each process only its share of every global batch."""
import json
import os
import socket
import subprocess
import sys
import types

import pytest

from disentangle.train import input_pipeline
from tests.conftest import REPO
from tests.test_data_tfds import TRAIN_IMAGES
from tests.test_data_tfds import TinyMnist
from tests.test_data_tfds import prepare


def _free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _run_pair(workdir, steps, *extra):
  port = _free_port()
  env = dict(os.environ, PYTHONPATH=str(REPO), DISENTANGLE_NO_DOWNLOAD="1")
  procs = [subprocess.Popen([sys.executable, "-m", "tests.distributed_worker", str(i), str(port),
                             str(workdir), str(steps), *map(str, extra)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
           for i in range(2)]
  results = []
  for p in procs:
    out, _ = p.communicate(timeout=420)
    assert p.returncode == 0, out[-3000:]
    line = [l for l in out.splitlines() if l.startswith("RESULT ")][-1]
    results.append(json.loads(line[len("RESULT "):]))
  return results


@pytest.mark.slow
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


@pytest.mark.slow
def test_two_processes_each_read_only_their_share_of_a_tfds_builder(tmp_path):
  """Each process asks the TFDS source for the rows of its half of each global batch (batch 8,
  4 rows a process), once per step, and for nothing else."""
  tfds_dir = prepare(TinyMnist, tmp_path / "tfds")  # 40 MNIST-layout rows, array_record
  results = sorted(_run_pair(tmp_path / "run", 2, tfds_dir), key=lambda r: r["process"])
  assert [r["process"] for r in results] == [0, 1] and all(r["step"] == 2 for r in results)
  assert results[0]["params_sha256"] == results[1]["params_sha256"]
  # The global batches of a single-process run of the same seed (index arithmetic only).
  one = input_pipeline.BatchSource(types.SimpleNamespace(num_examples=len(TRAIN_IMAGES)),
                                   global_batch=8, seed=results[0]["seed"])
  for step in range(2):
    want = one.global_indices(step).tolist()
    shares = [r["reads"][step] for r in results]
    assert not set(shares[0]) & set(shares[1])  # disjoint
    assert sorted(shares[0] + shares[1]) == sorted(want)  # together: the global batch
    assert shares == [want[:4], want[4:]]  # contiguous halves, in order
  assert [len(r["reads"]) for r in results] == [2, 2]  # one read a step, no other row read
