"""The reported accuracy of a saved MNIST run, recomputed by an independent path.

A short CascadeVAE run (S = 10) is trained on the real MNIST files, then `evaluate_run` writes its
one-to-one accuracy on the 10,000 test images. The test recomputes that figure sharing no code
with `disentangle.metrics` (clustering): the labels are read straight from the IDX file with
gzip/struct, the codes are what the method's `represent` (argmax over the S decoder passes, the
evaluator's compiled function) returned to the evaluator, checked to be the test images in file
order encoded with the checkpoint's parameters (restored read-only), the confusion matrix is
counted with numpy and the mapping is scipy's `linear_sum_assignment`. Both must agree to the
last digit (both are k / 10,000).
"""
import gzip
import json
import pathlib
import struct

import chex
import numpy as np
import pytest
from scipy import optimize

from disentangle import data as data_lib
from disentangle import methods
from disentangle.evaluation import encodings
from disentangle.evaluation import evaluate_run
from disentangle.train import checkpoint
from disentangle.train import trainer
from tests import helpers

MNIST = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "mnist"
LABELS = MNIST / "t10k-labels-idx1-ubyte.gz"


def _read_idx_labels(path):
  with gzip.open(path, "rb") as f:
    magic, n = struct.unpack(">II", f.read(8))
    assert magic == 2049, f"{path} is not an IDX label file"
    return np.frombuffer(f.read(n), np.uint8).astype(np.int64)


@pytest.mark.slow
@pytest.mark.skipif(not LABELS.exists(), reason="needs the real MNIST files in ../shared/data")
def test_one_to_one_accuracy_recomputed_independently_from_the_checkpoint(tmp_path, monkeypatch):
  config = helpers.tiny_config("cascadevae", **{
      "mesh.num_devices": 1, "dataset.data_dir": str(MNIST.parent), "dataset.allow_download": False,
      "num_steps": 4, "checkpoint_every": 4, "batch_size": 16, "cascade.num_discrete": 10,
      "cascade.discrete_start": 0, "cascade.penalty": 0.1, "eval.cluster_accuracy": True,
      "eval.num_points": 0, "eval.information": False})
  trainer.train(config, tmp_path)
  # What the evaluator's compiled `represent` is given and returns. Its own codes, not a second
  # encoding: a differently compiled program moves the last float bits, which flips an argmax
  # between nearly tied decoder passes of this barely trained model (1 image in 10,000 when tried).
  calls, jit_represent = [], encodings.jit_represent

  def recorded(method, config=None, **kwargs):
    represent = jit_represent(method, config, **kwargs)

    def fn(params, images):
      out = represent(params, images)
      calls.append((params, np.asarray(images), np.asarray(out["discrete"])))
      return out
    return fn

  monkeypatch.setattr(encodings, "jit_represent", recorded)
  results = evaluate_run.evaluate_run(tmp_path, encode_batch_size=500)
  reported = json.loads((tmp_path / "results.json").read_text())["metrics"]["accuracy"]
  assert reported["value"] == results["metrics"]["accuracy"]["value"]

  # The independent path.
  labels = _read_idx_labels(LABELS)
  test = data_lib.load_dataset("mnist", data_dir=str(MNIST.parent), split="test",
                               allow_download=False)
  method = methods.build(config, test.image_shape)
  target = methods.init_states_of(method, [config.seed])  # the restore target's structure
  params = checkpoint.Checkpointer(tmp_path, read_only=True).restore(target).params
  batches = [c for c in calls if len(c[1]) == 500]
  assert len(batches) == len(labels) // 500
  for i, (used, images, _) in enumerate(batches):  # the test images in file order, these params
    np.testing.assert_array_equal(images, test.get_images(np.arange(500 * i, 500 * (i + 1))))
    chex.assert_trees_all_equal(used, params)
  codes = np.concatenate([c[2] for c in batches])
  confusion = np.zeros((10, 10), np.int64)
  np.add.at(confusion, (codes, labels), 1)
  rows, cols = optimize.linear_sum_assignment(-confusion)
  independent = confusion[rows, cols].sum() / len(labels)
  assert reported["num_examples"] == len(labels) == 10_000
  assert reported["value"] == independent, (reported["value"], independent)
