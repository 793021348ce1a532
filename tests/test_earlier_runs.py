"""A run directory in the form an earlier version of the code wrote it: its ``config.json`` with the
overlap switch ``assignment_overlap``, backend choices left ``'auto'`` and no record of what was
asked. It loads, evaluates with the choices it trained with, and resumes."""
import json

import numpy as np
import pytest

import disentangle
from disentangle.evaluation import evaluate_run
from disentangle.train import trainer
from tests import helpers


def _config(num_steps):
  return helpers.tiny_config("cascadevae", num_steps=num_steps, checkpoint_every=2, log_every=1,
                             num_seeds=2, assignment_placement="overlapped",
                             **{"cascade.discrete_start": 2, "mesh.num_devices": 1})


def _as_written_earlier(path):
  saved = json.loads(path.read_text())
  saved.pop("requested")
  saved["assignment_overlap"] = saved.pop("assignment_placement") == "overlapped"
  saved["seed_layout"], saved["cascade"]["unary_batching"] = "auto", "auto"
  path.write_text(json.dumps(saved))


@pytest.mark.slow
def test_a_run_written_in_an_earlier_form_loads_evaluates_and_resumes(tmp_path):
  data, workdir = helpers.TinyImages(), tmp_path / "run"
  trainer.train(_config(4), workdir, dataset=data)
  configs = sorted(workdir.glob("seed_*/config.json"))
  assert len(configs) == 2
  for path in configs:
    _as_written_earlier(path)

  model = disentangle.load(workdir, seed=1)
  images = data.get_images(np.arange(4))
  assert model.encode(images).discrete.shape == (4,)

  result = evaluate_run.evaluate_run(workdir, dataset=data, metrics=("information",),
                                     selected_too=False)
  for run in result["seeds"]:
    assert run["checkpoint"]["step"] == 4
    assert run["trained_with"]["assignment_placement"] == "overlapped"
    assert run["trained_with"]["seed_layout"] == "unroll"  # 'auto' as this CPU resolves it
    assert "requested" not in run["trained_with"]

  state = trainer.train(_config(6), workdir, dataset=data)
  assert np.asarray(state.step).tolist() == [6, 6]
  for path in configs:
    assert [json.loads(l)["step"] for l in (path.parent / "metrics.jsonl").read_text().split(
        "\n") if l] == [1, 2, 3, 4, 5, 6]
    assert json.loads(path.read_text())["assignment_placement"] == "overlapped"
