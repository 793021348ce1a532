"""Five fixed training steps of every method: the record that a redesign must reproduce.

``python -m tests.golden_steps --write`` records, for each method, the loss after each of 5 steps
on fixed batches and, for every parameter leaf after the 5 steps, its path, sum, sum of squares
and first values, into ``tests/golden/five_steps.json``. ``tests/test_golden_steps.py`` recomputes
them and compares. The record was written before the platform redesign (one trainer for every method), so the test
shows that the redesign changed no result.
"""
from __future__ import annotations

import argparse
import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from disentangle import methods
from disentangle.train import codes
from tests import helpers

PATH = pathlib.Path(__file__).parent / "golden" / "five_steps.json"
METHODS = ("betavae", "cascadevae", "factorvae", "jointvae", "betatcvae", "anchorvae")
NUM_STEPS, BATCH = 5, 8


def _config(method):
  c = helpers.tiny_config(method)
  # The record was written with the transposed convs' fan-in counted over their inputs (Flax's
  # convention), before the 'reference' init moved it to TensorFlow's (outputs).
  c.model.init = "reference_flax_fan"
  c.model.conv_impl = "auto"  # the CPU's default: 'fast'
  if method == "cascadevae":
    c.cascade.discrete_start = 2  # steps 1-2 without, 3-5 with the discrete assignment
  if method == "anchorvae":
    c.anchorvae.num_anchor = 2
  return c


def _path_str(path) -> str:
  return "/".join(str(getattr(p, "key", getattr(p, "idx", p))) for p in path)


def run(method: str) -> dict:
  config = _config(method)
  data = helpers.TinyImages()
  m = methods.build(config, data.image_shape)
  state = m.init(jax.random.PRNGKey(0))
  steps = {}  # the trainer's step of each phase (`codes.step`), chosen by the step number
  losses = []
  for i in range(NUM_STEPS):
    batch = {"image": jnp.asarray(data.get_images(np.arange(BATCH * i, BATCH * (i + 1))))}
    phase = m.phase(i)
    if phase not in steps:
      steps[phase] = jax.jit(codes.step(m.for_phase(phase)))
    state, metrics = steps[phase](state, batch)
    losses.append(float(metrics["loss"]))
  leaves = {}
  for path, leaf in jax.tree_util.tree_leaves_with_path(state.params):
    a = np.asarray(leaf, np.float64).ravel()
    leaves[_path_str(path)] = {"sum": float(a.sum()), "sumsq": float((a * a).sum()),
                               "head": a[:4].tolist()}
  return {"losses": losses, "leaves": leaves, "step": int(state.step)}


def batch_indices() -> list:
  """Dataset indices of the image-only pipeline's batches (steps 0-4 and across an epoch)."""
  from disentangle.train import input_pipeline  # pylint: disable=g-import-not-at-top
  source = input_pipeline.BatchSource(helpers.TinyImages(), global_batch=BATCH, seed=3)
  return [source.global_indices(s).tolist() for s in (0, 1, 2, 3, 4, 31, 32, 33)]


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--write", action="store_true")
  args = parser.parse_args()
  record = {name: run(name) for name in METHODS}
  record["batch_indices"] = batch_indices()
  if args.write:
    PATH.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"wrote {PATH}")
  else:
    print(json.dumps({k: v["losses"] for k, v in record.items()}, indent=1))


if __name__ == "__main__":
  main()
