"""Two processes on loopback (jax.distributed + gloo CPU collectives): train, checkpoint, resume,
with the set on the host or placed on the devices by each process; and read a TFDS builder, each
process only its share of every global batch."""
import json
import types

import pytest

from disentangle.train import input_pipeline
from tests import helpers


def _placed(placement):
  return [{"DISENTANGLE_TEST_PLACEMENT": placement}] * 2


@pytest.mark.slow
def test_two_processes_train_checkpoint_and_resume_on_host_and_device_data(tmp_path):
  """The tiny config on an in-memory uint8 set: two processes train 2 steps with the set on the
  host, and with the set placed by each process on its devices, bit for bit the same; the host
  run resumes to step 4."""
  first = helpers.run_pair(tmp_path / "host", 2, env=_placed("host"))
  assert sorted(r["process"] for r in first) == [0, 1]
  assert all(r["count"] == 2 and r["devices"] == 4 and r["step"] == 2 for r in first)
  assert first[0]["params_sha256"] == first[1]["params_sha256"]  # replicated parameters agree
  assert (tmp_path / "host" / "checkpoints" / "2").is_dir()
  placed = helpers.run_pair(tmp_path / "device", 2, env=_placed("device"))
  assert all(r["count"] == 2 and r["devices"] == 4 and r["step"] == 2 for r in placed)
  assert {r["params_sha256"] for r in placed} == {first[0]["params_sha256"]}
  second = helpers.run_pair(tmp_path / "host", 4, env=_placed("host"))  # resumes from step 2
  assert all(r["step"] == 4 for r in second)
  assert second[0]["params_sha256"] == second[1]["params_sha256"]
  assert second[0]["params_sha256"] != first[0]["params_sha256"]
  lines = [json.loads(l) for l in (tmp_path / "host" / "metrics.jsonl").read_text().splitlines()]
  assert [l["step"] for l in lines] == [2, 4]  # process 0 alone writes, once per line


@pytest.mark.slow
def test_two_processes_each_read_only_their_share_of_a_tfds_builder(tmp_path):
  """Each process asks the TFDS source for the rows of its half of each global batch (batch 8,
  4 rows a process), once per step, and for nothing else."""
  tfds_dir = helpers.prepare(helpers.TinyMnist, tmp_path / "tfds")  # 40 MNIST-layout rows, array_record
  results = helpers.run_pair(tmp_path / "run", 2, tfds_dir)
  assert [r["process"] for r in results] == [0, 1] and all(r["step"] == 2 for r in results)
  assert results[0]["params_sha256"] == results[1]["params_sha256"]
  # The global batches of a single-process run of the same seed (index arithmetic only).
  one = input_pipeline.BatchSource(types.SimpleNamespace(num_examples=len(helpers.TRAIN_IMAGES)),
                                   global_batch=8, seed=results[0]["seed"])
  for step in range(2):
    want = one.global_indices(step).tolist()
    shares = [r["reads"][step] for r in results]
    assert not set(shares[0]) & set(shares[1])  # disjoint
    assert sorted(shares[0] + shares[1]) == sorted(want)  # together: the global batch
    assert shares == [want[:4], want[4:]]  # contiguous halves, in order
  assert [len(r["reads"]) for r in results] == [2, 2]  # one read a step, no other row read
