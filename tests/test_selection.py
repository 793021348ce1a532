"""Model selection: held-out validation split, kept best checkpoint, labels."""
import json
import math

import jax
import numpy as np
import pytest

from disentangle import config as config_lib
from disentangle import data as data_lib
from disentangle import methods
from disentangle import metrics
from disentangle.data.datasets import mnist
from disentangle.data.datasets import synthetic
from disentangle.evaluation import aggregate
from disentangle.evaluation import evaluate_run
from disentangle.evaluation import evaluator as evaluator_lib
from disentangle.evaluation import report
from disentangle.train import runs as runs_lib
from disentangle.train import selection
from disentangle.train import trainer
from tests import helpers

NUM_TRAIN = 120  # stand-in training file: its last sixth (20 rows) is the validation part


def _write_standin(root):
  synthetic.write_mnist_like(root, "mnist", num_train=NUM_TRAIN, num_test=30)
  (root / "mnist" / "SYNTHETIC.txt").write_text("test stand-in\n")
  return root


def test_validation_split_is_the_last_sixth_of_the_training_file_and_disjoint(tmp_path):
  assert mnist.held_out_rows(60000, "valid") == slice(50000, 60000)  # the paper's 50k / 10k
  assert mnist.held_out_rows(60000, "train") == slice(0, 50000)
  _write_standin(tmp_path)
  labels = mnist.read_idx(tmp_path / "mnist" / "train-labels-idx1-ubyte.gz")  # the file itself
  whole = mnist.load_mnist(tmp_path, "train", verify=False)
  train = mnist.load_mnist(tmp_path, "train50k", verify=False)
  valid = mnist.load_mnist(tmp_path, "valid10k", verify=False)
  assert (train.num_examples, valid.num_examples) == (100, 20)
  np.testing.assert_array_equal(valid.labels, labels[-20:])
  np.testing.assert_array_equal(train.labels, labels[:100])
  np.testing.assert_array_equal(valid.get_images(np.arange(20)),
                                whole.get_images(np.arange(100, 120)))
  np.testing.assert_array_equal(train.get_images(np.arange(100)), whole.get_images(np.arange(100)))
  assert "train50k" in data_lib.SPLITS["fashion_mnist"] and "valid10k" in data_lib.SPLITS["mnist"]


def _select_config(method="betavae", **overrides):
  fields = {"mesh.num_devices": 1, "eval_every": 1, "num_steps": 6, "checkpoint_every": 3,
            "dataset.train_split": "train50k", "eval.select": "best_validation",
            "eval.select_metric": "accuracy", "eval.cluster_accuracy": True}
  fields.update(overrides)
  return helpers.tiny_config(method, **fields)


class PlantedEvaluator:
  """Returns a planted validation accuracy per step (the trainer only reads ``eval/accuracy``)."""

  def __init__(self, values, calls):
    self.values, self.calls = values, calls

  def run(self, params, step):
    self.calls.append(step)
    return {"eval/accuracy": self.values[step]}


def _factory(values, calls=None):
  calls = [] if calls is None else calls
  return lambda method, run_dir, i: PlantedEvaluator(values, calls)


def _params_at(step, box):
  def hook(state, done):
    if done == step:
      box.append(jax.tree_util.tree_map(np.asarray, jax.device_get(state.params)))
  return hook


def _kept_params(run_dir, config, data):
  method = methods.build(config, data.image_shape)
  record = evaluate_run.read_selection_record(run_dir)
  params, _ = evaluate_run.restore_selected(run_dir, config, method, record["step"])
  return record, params


def _assert_same(a, b):
  for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.slow
@pytest.mark.parametrize("higher, best_step", [(True, 2), (False, 6)])
def test_kept_checkpoint_is_the_one_with_the_best_validation_metric(tmp_path, monkeypatch,
                                                                    higher, best_step):
  if not higher:  # a metric the registry marks lower-is-better
    from disentangle.metrics import registry  # pylint: disable=g-import-not-at-top
    lower = registry.Metric("accuracy", "accuracy", registry.METRICS["accuracy"].compute,
                            training_flag="cluster_accuracy")
    object.__setattr__(lower, "higher_is_better", False)
    monkeypatch.setitem(registry.METRICS, "accuracy", lower)
  values = {1: 0.2, 2: 0.6, 3: 0.5, 4: 0.6, 5: math.nan, 6: 0.1}  # tie at 4, NaN at 5
  data = helpers.TinyImages(n=64)
  config = _select_config()
  box = []
  trainer.train(config, tmp_path, dataset=data, evaluator_factory=_factory(values),
                hooks=[_params_at(best_step, box)])
  record, params = _kept_params(tmp_path, config, data)
  assert record["step"] == best_step and record["value"] == values[best_step]
  assert record["rule"] == "best_validation" and record["split"] == "valid10k"
  assert record["mode"] == ("max" if higher else "min")
  _assert_same(params, box[0])
  assert [p.name for p in (tmp_path / selection.SUBDIR).iterdir() if p.name.isdigit()] == [
      str(best_step)]


@pytest.mark.slow
def test_best_slot_survives_kill_and_resume(tmp_path):
  # The best (step 2) lies before the last checkpoint (3); after resuming, steps 4-6 are worse
  # than it but better than each other: a selector that forgot the kept value would take 6.
  values = {1: 0.1, 2: 0.9, 3: 0.2, 4: 0.3, 5: 0.4, 6: 0.5}
  data = helpers.TinyImages(n=64)
  config = _select_config()
  trainer.train(config, tmp_path / "a", dataset=data, evaluator_factory=_factory(values))

  class Killed(Exception):
    pass

  def kill_at_5(state, step):
    if step == 5:
      raise Killed()

  with pytest.raises(Killed):
    trainer.train(config, tmp_path / "b", dataset=data, evaluator_factory=_factory(values),
                  hooks=[kill_at_5])
  calls = []
  trainer.train(config, tmp_path / "b", dataset=data, evaluator_factory=_factory(values, calls))
  assert calls == [4, 5, 6]  # resumed from step 3
  straight, straight_params = _kept_params(tmp_path / "a", config, data)
  resumed, resumed_params = _kept_params(tmp_path / "b", config, data)
  assert (resumed["step"], resumed["value"]) == (straight["step"], straight["value"]) == (2, 0.9)
  _assert_same(resumed_params, straight_params)


@pytest.mark.slow
def test_multi_seed_run_keeps_each_seeds_best_in_its_own_directory(tmp_path):
  values = [{1: 0.9, 2: 0.1}, {1: 0.1, 2: 0.9}]  # seed 0's best at step 1, seed 1's at step 2
  data = helpers.TinyImages(n=64)
  config = _select_config(num_seeds=2, num_steps=2, checkpoint_every=2, seed=3)
  box = []
  trainer.train(config, tmp_path, dataset=data, hooks=[_params_at(1, box)],
                evaluator_factory=lambda m, d, i: PlantedEvaluator(values[i], []))
  final, _ = evaluate_run.restore_params(tmp_path, config,
                                        methods.build(config, data.image_shape))  # step 2
  for i, best in enumerate((1, 2)):
    cfg = runs_lib.run_configs(config)[i]  # the run's own config, as the trainer builds it
    record, params = _kept_params(tmp_path / f"seed_{3 + i}", cfg, data)
    assert (record["step"], record["value"]) == (best, 0.9)
    expected = jax.tree_util.tree_map(lambda a, i=i: a[i], box[0]) if best == 1 else final[i]
    _assert_same(params, expected)


def _direct_accuracy(method, params, data):
  rep = metrics.as_representation(jax.device_get(jax.jit(method.represent)(params, data.images)))
  return metrics.cluster_accuracy(data.labels, rep.discrete)["one_to_one"]


@pytest.mark.slow
def test_evaluate_run_reports_final_and_selected_labelled(tmp_path):
  values = {1: 0.3, 2: 0.7, 3: 0.4, 4: 0.5, 5: 0.6, 6: 0.2}
  data = helpers.TinyImages(n=64)
  config = _select_config("cascadevae")
  box = []
  state = trainer.train(config, tmp_path, dataset=data, evaluator_factory=_factory(values),
                        hooks=[_params_at(2, box)])
  result = evaluate_run.evaluate_run(tmp_path, dataset=data)
  method = methods.build(config, data.image_shape)
  final, selected = result["final"], result["selected"]
  assert final["step"] == 6 and final["label"] == "final checkpoint"
  assert final["metrics"]["accuracy"]["value"] == _direct_accuracy(method, state.params, data)
  assert selected["rule"] == "best_validation" and selected["step"] == 2
  assert selected["validation_value"] == 0.7 and not selected["same_checkpoint_as_final"]
  assert selected["selected_on"]["split"] == "valid10k"
  assert selected["metrics"]["accuracy"]["value"] == _direct_accuracy(method, box[0], data)
  saved = json.loads((tmp_path / "results.json").read_text())
  assert saved["selected"]["step"] == 2 and saved["final"]["step"] == 6
  text = (tmp_path / "report.md").read_text()
  assert "Selected checkpoint: best validation accuracy at step 2" in text
  assert "| metric | final (step 6) | selected (step 2) |" in text


def _fake_results(path, seed, final, selected):
  path.mkdir(parents=True)
  cfg = helpers.tiny_config("cascadevae", seed=seed)
  (path / "config.json").write_text(config_lib.to_json(cfg))
  record = {"rule": "best_validation", "metric": "accuracy", "step": 2, "value": selected + 0.01,
            "evaluated_on": "mnist", "split": "valid10k", "num_points": 10000}
  result = {"run_dir": str(path), "seed": seed, "method": "cascadevae", "latent_dim": 3,
            "dataset": {"name": "mnist", "class": "ArrayImages", "source": None,
                        "comparable_with_published": True},
            "checkpoint": {"step": 6, "num_steps": 6, "final": True},
            "metrics": {"accuracy": {"value": final}},
            "selected": {"rule": "best_validation", "step": 2, "label": selection.label(
                dict(record)), "selection_value": record["value"],
                         "metrics": {"accuracy": {"value": selected}}}}
  report.write_json(path / "results.json", result)
  return path


def test_aggregate_prints_final_and_selected_per_seed_and_as_mean_std_best(tmp_path):
  runs = [_fake_results(tmp_path / "s0", 0, 0.5, 0.7), _fake_results(tmp_path / "s1", 1, 0.6, 0.8)]
  table = aggregate.aggregate_runs(runs)
  (row,) = table["rows"]
  assert row["metrics_selected"]["accuracy"]["mean"] == pytest.approx(75.0)
  assert "| 55.00 (5.00) | 75.00 (5.00) | - |" in aggregate.markdown_table(table)
  text = aggregate.markdown_table(table, "all")
  assert "| accuracy (final) | accuracy (selected) | accuracy (paper) |" in text
  assert "| 55.00 (5.00) / 60.00 | 75.00 (5.00) / 80.00 | - |" in text
  assert "seed 0: final (step 6) accuracy 50.00 | selected (step 2) accuracy 70.00" in text
  assert "seed 1: final (step 6) accuracy 60.00 | selected (step 2) accuracy 80.00" in text
  assert "best validation accuracy at step 2 (accuracy 0.8100 on mnist valid10k" in text


@pytest.mark.slow
def test_training_with_best_validation_never_reads_the_test_split(tmp_path, monkeypatch):
  synth = _write_standin(tmp_path / "synth")
  monkeypatch.setenv("DISENTANGLE_SYNTHETIC_DIR", str(synth))
  loaded = []
  real_load = data_lib.load_dataset

  def spy(name, **kwargs):
    out = real_load(name, **kwargs)
    loaded.append((name, kwargs.get("split"), out))
    return out

  monkeypatch.setattr(data_lib, "load_dataset", spy)
  config = _select_config("cascadevae", num_steps=2, eval_every=2, checkpoint_every=2,
                          **{"dataset.data_dir": str(tmp_path / "nodata"),
                             "dataset.allow_download": False,
                             "dataset.synthetic_if_missing": True, "eval.num_points": 0,
                             "eval.num_images": 4, "eval.information": False})
  trainer.train(config, tmp_path / "run", evaluator_factory=evaluator_lib.factory(config))
  assert sorted(split for _, split, _ in loaded) == ["train50k", "valid10k"]  # never 'test'
  sizes = {split: d.num_examples for _, split, d in loaded}
  assert sizes == {"train50k": 100, "valid10k": 20}  # disjoint rows 0-99 / 100-119 of the file
  record = evaluate_run.read_selection_record(tmp_path / "run")
  assert record["split"] == "valid10k" and record["num_points"] == 20 and record["step"] == 2
  step = json.loads((tmp_path / "run" / "eval" / "step_2.json").read_text())
  assert step["dataset"]["split"] == "valid10k"


@pytest.mark.parametrize("fields, field", [
    ({"dataset.train_split": "train"}, "dataset.train_split"),  # would train on valid10k
    ({"dataset.name": "dsprites", "dataset.train_split": "train"}, "eval.select"),
    ({"eval.select": "best_metric"}, "eval.select"),  # MNIST: would select on the test split
    ({"eval.cluster_accuracy": False}, "eval.select_metric"),  # not computed at eval steps
    ({"eval.select_metric": "nope"}, "eval.select_metric"),
])
def test_inconsistent_selection_configs_are_config_errors(fields, field):
  with pytest.raises(config_lib.ConfigError, match=field.replace(".", r"\.")):
    selection.check(_select_config(**fields))


def test_best_metric_on_dsprites_is_allowed_and_needs_an_evaluator(tmp_path):
  config = _select_config(**{"dataset.name": "dsprites", "dataset.train_split": "train",
                             "eval.select": "best_metric", "eval.select_metric": "factor_score",
                             "eval.factor_score": True})
  selection.check(config)
  with pytest.raises(config_lib.ConfigError, match="evaluator_factory"):
    trainer.train(config, tmp_path, dataset=helpers.TinyImages(n=16))
  assert not tmp_path.joinpath("config.json").exists()


def test_resume_accepts_a_saved_config_without_the_new_default_fields(tmp_path):
  config = helpers.tiny_config()
  saved = json.loads(config_lib.to_json(config))
  del saved["eval"]["select"], saved["eval"]["select_metric"]
  (tmp_path / "config.json").write_text(json.dumps(saved))
  trainer.check_config_matches(tmp_path / "config.json", config)  # defaults: same run
  config.eval.select_metric = "mig"
  with pytest.raises(config_lib.ConfigError, match="select_metric"):
    trainer.check_config_matches(tmp_path / "config.json", config)
