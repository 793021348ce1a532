"""Evaluation of saved runs (`evaluate_run`) and tables over seeds (`aggregate`)."""
import functools
import importlib
import json
import logging
import os
import shutil
import subprocess
import sys
import types

import jax
import numpy as np
import pytest

import disentangle
from disentangle import command_line
from disentangle import config as config_lib
from disentangle import data as data_lib
from disentangle import methods
from disentangle import metrics
from disentangle.evaluation import aggregate
from disentangle.evaluation import encodings
from disentangle.evaluation import evaluate_run
from disentangle.evaluation import evaluator as evaluator_lib
from disentangle.metrics import registry
from disentangle.train import checkpoint
from disentangle.train import codes
from disentangle.train import runs as runs_lib
from disentangle.train import trainer
from tests import helpers

SEED = 3


class TinyGrid:
  """A complete factor grid (4 places x 4 row shifts x 4 column shifts) of TinyImages' squares.

  Ground-truth protocol with a ``factors`` array and deterministic observations (no randomness
  drawn), so a metric called on it directly sees the same random stream as through
  `encodings.EncodedGroundTruth`.
  """
  factor_sizes = (4, 4, 4)
  factor_names = ("shape", "row", "col")
  image_shape = (32, 32, 1)
  labels = None

  def __init__(self):
    self.factors = np.indices(self.factor_sizes).reshape(3, -1).T.astype(np.int64)
    self.images = np.stack([self._draw(f) for f in self.factors])
    self.num_examples = len(self.factors)

  @staticmethod
  def _draw(f):
    img = np.zeros((32, 32, 1), np.float32)
    r, c = 4 + 12 * (f[0] // 2) + f[1], 4 + 12 * (f[0] % 2) + f[2]
    img[r:r + 8, c:c + 8] = 1.0
    return img

  def get_images(self, idx):
    return self.images[np.asarray(idx)]

  def sample_factors(self, num, rng):
    return self.factors[rng.integers(0, len(self.factors), size=num)]

  def sample_observations_from_factors(self, factors, rng):
    del rng
    return self.images[np.asarray(factors) @ np.array([16, 4, 1])]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """A 6-step CascadeVAE run (checkpoints at steps 3 and 6, its evaluation at step 6) and its
  final state, written under umask 022."""
  workdir = tmp_path_factory.mktemp("run")
  data = helpers.TinyImages()
  config = helpers.tiny_config("cascadevae", seed=SEED, **{"mesh.num_devices": 1})
  umask = os.umask(0o022)
  try:
    state = trainer.train(config, workdir, dataset=data,
                          evaluator_factory=evaluator_lib.factory(config, data))
  finally:
    os.umask(umask)
  return workdir, config, data, state


def _copy(trained, tmp_path):
  workdir = tmp_path / "run"
  shutil.copytree(trained[0], workdir)
  return workdir


def _direct(method, params, images):
  return metrics.as_representation(jax.device_get(jax.jit(method.represent)(params, images)))


@pytest.mark.slow
def test_evaluate_run_matches_direct_computation(trained, tmp_path):
  workdir = _copy(trained, tmp_path)
  _, config, data, state = trained
  ckpt_files = {p: p.stat().st_mtime_ns for p in (workdir / "checkpoints").rglob("*")}
  results = evaluate_run.evaluate_run(workdir, dataset=data)

  saved = json.loads((workdir / "results.json").read_text())
  assert saved["seed"] == SEED and saved["method"] == "cascadevae"
  assert saved["checkpoint"]["step"] == 6 and saved["checkpoint"]["final"]
  assert saved["checkpoint"]["available_steps"] == [3, 6]
  assert saved["checkpoint"]["selection"] == "latest"
  assert saved["dataset"]["override"] and saved["dataset"]["comparable_with_published"] is False
  method = methods.build(config, data.image_shape)
  rep = _direct(method, state.params, data.images)
  direct = metrics.cluster_accuracy(data.labels, rep.discrete)
  assert saved["metrics"]["accuracy"]["value"] == direct["one_to_one"]
  assert saved["metrics"]["accuracy"]["num_examples"] == data.num_examples
  np.testing.assert_allclose(saved["metrics"]["information"]["kl_per_dim"],
                             metrics.kl_per_dim(rep.mean, rep.logvar), rtol=1e-6)
  assert "factor_score" not in saved["metrics"]  # no ground truth
  assert results["metrics"]["accuracy"]["value"] == saved["metrics"]["accuracy"]["value"]

  report = (workdir / "report.md").read_text()
  assert "seed 3, step 6 of 6 (final checkpoint" in report
  assert f"| {direct['one_to_one']:.4f} |" in report
  for rel in saved["images"].values():
    assert (workdir / rel).is_file() and f"]({rel})" in report
  # Read-only on the checkpoints.
  assert {p: p.stat().st_mtime_ns for p in (workdir / "checkpoints").rglob("*")} == ckpt_files


@pytest.mark.slow
def test_evaluate_run_computes_only_the_metrics_named(trained, tmp_path):
  workdir = _copy(trained, tmp_path)
  data = trained[2]
  every = evaluate_run.evaluate_run(workdir, dataset=data, write=False)
  assert {"accuracy", "information"} <= set(every["metrics"])
  named = evaluate_run.evaluate_run(workdir, dataset=data, write=False, metrics=("accuracy",))
  assert set(named["metrics"]) == {"accuracy"}
  assert named["metrics"]["accuracy"]["value"] == every["metrics"]["accuracy"]["value"]
  assert named["settings"]["metrics"] == ("accuracy",)


@pytest.mark.slow
def test_every_file_of_a_run_and_its_evaluation_takes_the_umask(trained, tmp_path):
  # The run trained under umask 022 (the fixture), evaluated under 022 here: -rw-r--r-- and
  # drwxr-xr-x, as open() and mkdir() give, for the atomic writes as for the appended lines.
  workdir = _copy(trained, tmp_path)
  umask = os.umask(0o022)
  try:
    evaluate_run.evaluate_run(workdir, dataset=trained[2], metrics=("accuracy",),
                              selected_too=False)
  finally:
    os.umask(umask)
  written = {p.relative_to(trained[0]).as_posix() for p in trained[0].rglob("*") if p.is_file()}
  assert {"config.json", "environment.json", "metrics.jsonl", "eval/step_6.json",
          "images/reconstructions.png"} <= written, sorted(written)
  evaluated = [workdir / "results.json", workdir / "report.md",
               *workdir.glob("images/evaluate_step_6_*.png")]
  assert len(evaluated) > 2
  for path in [*trained[0].rglob("*"), *evaluated]:
    mode = path.stat().st_mode & 0o777
    assert mode == (0o755 if path.is_dir() else 0o644), (path, oct(mode))


class TinyGridWide(TinyGrid):
  """A complete 4 x 10 x 10 grid of TinyImages' squares (400 images, every row unique)."""
  factor_sizes = (4, 10, 10)

  @staticmethod
  def _draw(f):
    img = np.zeros((32, 32, 1), np.float32)
    r, c = 1 + 11 * (f[0] // 2) + f[1], 1 + 11 * (f[0] % 2) + f[2]
    img[r:r + 8, c:c + 8] = 1.0
    return img

  def sample_observations_from_factors(self, factors, rng):
    del rng
    return self.images[np.asarray(factors) @ np.array([100, 10, 1])]


@pytest.mark.slow
def test_reading_a_checkpoint_leaves_out_orbaxs_read_only_notice(trained, caplog):
  with caplog.at_level(logging.WARNING):
    evaluate_run.reading(trained[0]).close()
    checkpoint.Checkpointer(trained[0], read_only=True).close()
  notices = [r for r in caplog.records if "read only" in r.getMessage()]
  assert len(notices) == 1  # the plain Checkpointer's, not `reading`'s


def test_thinned_grid_keeps_every_combination_of_evenly_spaced_values():
  assert encodings.thinned_sizes((3, 6, 40, 32, 32), 1000) == (3, 3, 5, 4, 4)  # dSprites: 720
  assert encodings.thinned_sizes((4, 10, 10), 300) == (4, 5, 10)
  assert encodings.thinned_sizes((4, 10, 10), 400) == (4, 10, 10)
  rows = TinyGridWide().factors
  picked, renumbered, sizes = encodings.thinned_grid(rows, (4, 10, 10), 300)
  assert sizes == (4, 5, 10) and len(picked) == 200
  assert sorted(set(rows[picked, 1].tolist())) == [0, 2, 4, 7, 9]  # round(linspace(0, 9, 5))
  np.testing.assert_array_equal(np.unique(renumbered, axis=0),
                                np.indices(sizes).reshape(3, -1).T)
  assert encodings.thinned_grid(rows[1:], (4, 10, 10), 300) is None  # a combination missing
  # A set that is no complete grid: a sample of its rows, read as the set is read.
  part = encodings.part_of(rows[1:], (4, 10, 10), 300)
  assert part.record == {"kind": "sampled_rows", "num_images": 300, "of_rows": 399}
  assert len(set(part.picked.tolist())) == 300 and part.factor_sizes == (4, 10, 10)
  np.testing.assert_array_equal(part.factors, rows[1:][part.picked])
  assert encodings.part_of(rows, (4, 10, 10), 400) is None  # the set fits


@pytest.mark.slow
def test_the_command_line_prints_its_estimate_first_and_honours_max_points(
    trained, tmp_path, monkeypatch):
  # experiments.evaluate on the run, its data a 400-image grid: the estimate is the first line,
  # then the points of each metric and a line per metric; --max_points=300 thins the grid to
  # 4 x 5 x 10 = 200 images and caps every metric's points. The metrics are kept to three
  # (evaluate_run's `metrics`) so that the command compiles no suite.
  workdir = _copy(trained, tmp_path)
  grid = TinyGridWide()
  monkeypatch.setattr(evaluator_lib, "load_eval_data", lambda config: grid)
  monkeypatch.setattr(evaluate_run, "evaluate_run", functools.partial(
      evaluate_run.evaluate_run, metrics=("factor_score", "mig", "information")))
  proc = helpers.run_in_process("experiments.evaluate", f"--workdir={workdir}",
                                "--max_points=300", "--noselected")
  assert proc.returncode == 0, proc.stderr[-3000:]
  lines = proc.stdout.splitlines()
  assert lines[0].startswith("estimate: about ") and "(500 images in " in lines[0], lines[0]
  assert lines[1] == ("ground truth: a thinned grid encoded once, 200 images (4x5x10 of 4x10x10;"
                      " eval.max_points = 300)")
  assert "  factor_score: num_votes 3, batch_size 100" in lines
  assert "  mig: num_points 300, num_bins 20" in lines
  assert any(line.startswith("  encoded 200 images of the ground truth in ") for line in lines)
  assert [line.split(":")[0] for line in lines if line.endswith(" s)")] == [
      "  factor_score", "  mig", "  information"]
  saved = json.loads((workdir / "results.json").read_text())
  assert saved["settings"]["max_points"] == 300
  assert saved["settings"]["eval_overrides"] == {"eval.max_points": 300}
  trained = saved["trained_with"]  # the backend's choices the run trained with, and the ask
  assert {"model.conv_impl", "seed_layout", config_lib.REQUESTED} <= set(trained) <= {
      *config_lib.RESOLVED_FIELDS, config_lib.REQUESTED}
  assert "auto" not in trained.values() and trained["seed_layout"] == "unroll"
  assert saved["metrics"]["encodings"] == "thinned_grid_encoded_once"
  assert saved["metrics"]["encoded_part"] == {"kind": "thinned_grid", "factor_sizes": [4, 5, 10],
                                              "of_factor_sizes": [4, 10, 10], "num_images": 200}
  assert saved["metrics"]["factor_score"]["num_variance_points"] == 200
  assert saved["metrics"]["mig"]["num_points"] == 300
  assert saved["metrics"]["information"]["num_points"] == 300
  assert saved["dataset"]["comparable_with_published"] is False


def test_evaluate_run_refuses_an_unknown_metric_before_reading_the_run(tmp_path):
  with pytest.raises(config_lib.ConfigError, match=r"^metrics: 'score' not registered; known: "):
    evaluate_run.evaluate_run(tmp_path / "absent", metrics=("accuracy", "score"))


@pytest.mark.slow
def test_evaluate_earlier_step_is_flagged_not_final(trained, tmp_path):
  workdir = _copy(trained, tmp_path)
  _, config, data, _ = trained
  saved = evaluate_run.evaluate_run(workdir, step=3, dataset=data)
  assert saved["checkpoint"]["step"] == 3 and not saved["checkpoint"]["final"]
  assert saved["checkpoint"]["selection"] == "requested"
  assert "NOT the final checkpoint" in (workdir / "report.md").read_text()
  method = methods.build(config, data.image_shape)
  ckpt = checkpoint.Checkpointer(workdir)
  state3 = ckpt.restore(jax.jit(method.init)(jax.random.PRNGKey(SEED)), step=3)
  ckpt.close()
  rep = _direct(method, state3.params, data.images)
  assert saved["metrics"]["accuracy"]["value"] == \
      metrics.cluster_accuracy(data.labels, rep.discrete)["one_to_one"]
  with pytest.raises(ValueError, match=r"available steps: \[3, 6\]"):
    evaluate_run.evaluate_run(workdir, step=5, dataset=data, write=False)


@pytest.mark.slow
def test_evaluated_ground_truth_metrics_equal_direct_calls_on_the_dataset(trained, tmp_path):
  workdir = _copy(trained, tmp_path)
  _, config, _, state = trained
  grid = TinyGrid()
  saved = evaluate_run.evaluate_run(workdir, dataset=grid, encode_batch_size=64, mig_points=2000)
  score = saved["metrics"]["factor_score"]
  # M = 800 spread evenly over the 3 factors, int(800 / 3) each (the authors' code): 798 cast.
  assert (score["num_votes"], score["batch_size"]) == (3 * 266, 100)
  assert score["variance_source"] == "whole_dataset" and score["num_variance_points"] == 64
  assert score["vote_source"] == "dataset_encodings"

  # The metrics called on the dataset itself, encoding through the model, each metric's stream.
  method = methods.build(config, grid.image_shape)
  represent = jax.jit(method.represent)
  fn = lambda x: jax.device_get(represent(state.params, x))
  rng = np.random.default_rng([SEED, 6])
  direct = metrics.factor_vae_score(grid, fn, registry.metric_rng(rng, "factor_score"),
                                    num_votes=800, batch_size=100, encode_batch_size=64)
  direct_mig = metrics.mig(grid, fn, registry.metric_rng(rng, "mig"), num_points=2000,
                           encode_batch_size=64)
  assert score["value"] == direct["score"]
  np.testing.assert_array_equal(score["votes"], direct["votes"])
  assert saved["metrics"]["mig"]["value"] == pytest.approx(direct_mig["score"], abs=1e-12)
  rep = _direct(method, state.params, grid.images)
  assert saved["metrics"]["shape_accuracy"]["value"] == \
      metrics.cluster_accuracy(grid.factors[:, 0], rep.discrete)["one_to_one"]
  assert saved["metrics"]["shape_accuracy"]["num_examples"] == 64
  # disentanglement_lib's suite: every metric written with its protocol, settings and stream.
  for name in metrics.dlib.NAMES:
    if registry.METRICS[name].run_flag:  # switched on by its eval field only
      assert name not in saved["metrics"]
      continue
    m = saved["metrics"][name]
    assert m["protocol"].startswith("disentanglement_lib") and m["stream"]["metric"] == name
  # eval.suite_points = 200 (tests.helpers): 200 training and 100 test points per metric.
  assert (saved["metrics"]["dci"]["num_train"], saved["metrics"]["dci"]["num_test"]) == (200, 100)
  assert saved["metrics"]["beta_vae"]["num_train"] == 200
  assert "not_computed" not in saved["metrics"]


@pytest.mark.slow
def test_the_runs_encoder_scored_by_disentangle_score_gives_what_evaluate_gives(trained, tmp_path):
  # The run's checkpoint evaluated on a ground truth, and its encoder (disentangle.load) scored
  # on the same set by disentangle.score with the run's [seed, step] and eval settings: the same
  # encodings, points and streams, so every record is the same, number for number.
  workdir = _copy(trained, tmp_path)
  grid = TinyGrid()
  names = ("factor_score", "mig", "shape_accuracy", "information", "factor_score_dlib", "dci")
  run = evaluate_run.evaluate_run(workdir, dataset=grid, metrics=names, write=False,
                                  selected_too=False)
  model = disentangle.load(workdir, image_shape=grid.image_shape)
  scored = disentangle.score(model.encode, grid, metrics=names, seed=[SEED, 6], log=None,
                             eval_overrides={"eval.suite_points": 200})
  as_json = lambda m: json.dumps(m, default=evaluator_lib.to_json, sort_keys=True)
  assert set(scored["metrics"]) == set(run["metrics"]) >= set(names)
  for name in names:
    assert as_json(scored["metrics"][name]) == as_json(run["metrics"][name]), name
  assert scored["settings"]["metrics"] == run["settings"]["metrics"] == names


class TinyGridCopies(TinyGrid):
  """TinyGrid with every combination stored ``copies`` times (128 examples per factor value)."""

  def __init__(self, copies=8):
    super().__init__()
    self.base_images = self.images
    self.factors = np.tile(self.factors, (copies, 1))
    self.images = np.tile(self.images, (copies, 1, 1, 1))
    self.num_examples = len(self.factors)

  def sample_observations_from_factors(self, factors, rng):
    del rng
    return self.base_images[np.asarray(factors) @ np.array([16, 4, 1])]


@pytest.mark.slow
def test_evaluate_run_partedvae_score_reads_every_image_not_the_eval_points(trained, tmp_path):
  workdir = _copy(trained, tmp_path)
  _, config, _, state = trained
  grid = TinyGridCopies()  # 512 examples; the eval steps' eval.num_points = 100 of them
  saved = evaluate_run.evaluate_run(workdir, dataset=grid, encode_batch_size=64, mig_points=200,
                                    eval_overrides={"eval.num_points": 100}, write=False,
                                    selected_too=False)
  score = saved["metrics"]["factor_score_partedvae"]
  assert saved["metrics"]["information"]["num_points"] == 100  # the eval points
  assert score["num_points"] == grid.num_examples == 512 and score["num_points_setting"] == "all"
  assert saved["settings"]["partedvae_score_points"] == "all"
  # One group of L = 100 of the 128 examples of each of the 3 x 4 factor values.
  assert score["num_votes"] == 12 and score["groups_per_factor"] == [4, 4, 4]
  # The same score computed directly on all 512 images through the model, on its own stream.
  method = methods.build(config, grid.image_shape)
  represent = jax.jit(method.represent)
  rng = registry.metric_rng(np.random.default_rng([SEED, 6]), "factor_score_partedvae")
  direct = metrics.factor_vae_score(grid, lambda x: jax.device_get(represent(state.params, x)),
                                    rng, protocol="partedvae", encode_batch_size=64)
  assert direct["num_points"] == 512 and direct["points_source"] == "whole_dataset"
  np.testing.assert_array_equal(score["votes"], direct["votes"])
  assert score["value"] == direct["score"]


def test_enumerate_rows_of_an_indexed_dataset_and_encoded_lookup():
  class Indexed:  # like DSprites: factors_of(indices) is a method, rows are image indices
    factor_sizes = (2, 3)
    num_examples = 6

    def factors_of(self, idx):
      return np.stack([np.asarray(idx) // 3, np.asarray(idx) % 3], axis=1)

    def get_images(self, idx):
      return np.asarray(idx, np.float32)[:, None]

  rows, are_indices = encodings.enumerate_rows(Indexed())
  np.testing.assert_array_equal(rows, np.indices((2, 3)).reshape(2, -1).T)
  assert are_indices
  rep = metrics.Representation(mean=np.arange(6.0)[:, None] * 10)
  encoded = encodings.EncodedGroundTruth(rows, rep, (2, 3))
  found = encoded.sample_observations_from_factors(np.array([[1, 2], [0, 1]]), None)
  np.testing.assert_array_equal(encoded.represent(found).mean[:, 0], [50.0, 10.0])


@pytest.mark.slow
def test_multi_seed_workdir_evaluates_every_seed(tmp_path):
  data = helpers.TinyImages(n=64)
  config = helpers.tiny_config("cascadevae", num_seeds=2, num_steps=3, seed=SEED,
                               **{"mesh.num_devices": 1})
  state = trainer.train(config, tmp_path, dataset=data)
  summary = evaluate_run.evaluate_run(tmp_path, dataset=data)
  assert [r["seed"] for r in summary["seeds"]] == [SEED, SEED + 1]
  assert json.loads((tmp_path / "results.json").read_text())["checkpoint"]["step"] == 3
  method = methods.build(config, data.image_shape)
  accuracies = []
  for i, result in enumerate(summary["seeds"]):
    assert (tmp_path / f"seed_{SEED + i}" / "results.json").is_file()
    params = jax.tree_util.tree_map(lambda a, i=i: a[i], state.params)
    rep = _direct(method, params, data.images)
    accuracies.append(metrics.cluster_accuracy(data.labels, rep.discrete)["one_to_one"])
    assert result["metrics"]["accuracy"]["value"] == accuracies[-1]
  table = aggregate.aggregate_runs([tmp_path])
  (row,) = table["rows"]
  assert row["seeds"] == [SEED, SEED + 1]
  assert row["metrics"]["accuracy"]["mean"] == pytest.approx(100 * np.mean(accuracies))


def _fake_run(path, config, score, shape_acc, *, step=None):
  path.mkdir(parents=True)
  (path / "config.json").write_text(config_lib.to_json(config))
  step = config.num_steps if step is None else step
  results = {
      "run_dir": str(path), "seed": config.seed, "method": config.method,
      "latent_dim": config.model.latent_dim,
      "dataset": {"name": "dsprites", "class": "DSprites", "source": "file",
                  "comparable_with_published": True},
      "checkpoint": {"step": step, "num_steps": config.num_steps,
                     "final": step == config.num_steps},
      "metrics": {"factor_score": {"value": score}, "shape_accuracy": {"value": shape_acc}}}
  (path / "results.json").write_text(json.dumps(results))
  return path


@pytest.mark.slow
def test_aggregate_mean_std_best_beside_published(tmp_path):
  module = importlib.import_module("experiments.configs.dsprites_cascade")
  runs = [_fake_run(tmp_path / f"s{s}", module.get_config(f"m4,seed={s}"), score, acc)
          for s, score, acc in ((0, 0.80, 0.5), (1, 0.90, 0.6), (2, 0.70, 0.7))]
  other = _fake_run(tmp_path / "short", module.get_config("m4,num_steps=1000,seed=0"), 0.5, 0.5)
  table = aggregate.aggregate_runs(runs + [other],
                                   candidates=aggregate.config_candidates([module]))
  assert table["std_ddof"] == 0 and len(table["rows"]) == 2
  full, short = sorted(table["rows"], key=lambda r: -r["num_steps"])
  assert full["experiment"]["module"] == "dsprites_cascade"
  assert full["experiment"]["variant"] == "m4" and full["experiment"]["exact"]
  s = full["metrics"]["factor_score"]
  assert s["n"] == 3 and s["mean"] == pytest.approx(80.0) and s["best"] == pytest.approx(90.0)
  assert s["std"] == pytest.approx(np.sqrt(200 / 3))  # ddof=0: deviations 0, 10, -10
  assert s["std_ddof1"] == pytest.approx(10.0)
  assert s["published"] == module.PUBLISHED["m4"]["factor_score"]
  a = full["metrics"]["shape_accuracy"]
  assert (a["mean"], a["best"]) == (pytest.approx(60.0), pytest.approx(70.0))
  assert short["experiment"]["variant"] == "m4" and not short["experiment"]["exact"]
  assert short["experiment"]["differences"] == {"num_steps": [1000, 300_000]}
  text = aggregate.markdown_table(table, "all")
  assert "80.00 (8.16) / 90.00" in text and "91.34 (7.36) / 98.62" in text
  assert "num_steps 1000 (variant 300000)" in text
  json.dumps(table)  # machine-readable as it is

  # The command line: the compact table by default (the config's published metrics beside
  # ours), every column with --columns=all, a column it has not in one line; the JSON whole.
  compact = ("| experiment | method | seeds | step | score | score (paper) | shape acc. | "
             "shape acc. (paper) |")
  out = tmp_path / "table.md"
  proc = subprocess.run([sys.executable, "-m", "experiments.aggregate", *map(str, runs),
                         f"--output={out}"], cwd=helpers.REPO, capture_output=True, text=True,
                        timeout=120, check=False)
  assert proc.returncode == 0, proc.stderr
  assert not helpers.library_log_lines(proc.stdout + proc.stderr), proc.stderr[-2000:]
  assert proc.stdout.splitlines()[0] == compact and out.read_text().splitlines()[0] == compact
  assert "| dsprites_cascade:m4 | cascadevae | 3 | 300000 | 80.00 (8.16) | 91.34 (7.36) | " \
         "60.00 (8.16) | 76.00 (22.16) |" in out.read_text()
  assert json.loads(out.with_suffix(".json").read_text())["rows"][0]["metrics"][
      "factor_score"]["n"] == 3
  every = helpers.run_in_process("experiments.aggregate", *map(str, runs), "--columns=all")
  assert every.returncode == 0 and every.stdout.startswith(text.splitlines()[0]), every.stderr
  assert "80.00 (8.16) / 90.00" in every.stdout
  bad = helpers.run_in_process("experiments.aggregate", *map(str, runs), "--columns=seeds,nope")
  assert bad.returncode == command_line.BAD_INPUT_STATUS and bad.stderr.startswith(
      "error: --columns: 'nope' not in this table; its columns: experiment, "), bad.stderr


@pytest.mark.slow
def test_training_time_evaluator_on_rendered_dsprites(tmp_path):
  module = importlib.import_module("experiments.configs.dsprites_cascade")
  config = module.get_config("smoke,eval.num_points=300,eval.factor_score_votes=100,"
                             "eval.num_images=8")
  config.model.latent_dim = 3
  with pytest.warns(data_lib.ProceduralDataWarning):
    dsprites = data_lib.DSprites(source="render")
  method = methods.build(config, dsprites.image_shape)
  params = jax.jit(method.init)(jax.random.PRNGKey(0)).params
  evaluator = evaluator_lib.Evaluator(config, method, tmp_path, dataset=dsprites)
  out = evaluator.run(params, step=7)
  details = json.loads((tmp_path / "eval" / "step_7.json").read_text())
  score = details["factor_score"]
  assert score["points"] == "the 300 eval points' encodings"
  assert score["num_variance_points"] == 300 and score["vote_source"] == "dataset_encodings"
  assert score["num_votes"] == 100  # 20 per factor over the 5 factors
  assert out["eval/factor_score"] == score["score"]
  # The discrete code against the shape factor (not the constant colour column).
  rep = _direct(method, params, dsprites.get_images(evaluator.indices))
  shape = dsprites.factors_of(evaluator.indices)[:, 0]
  assert out["eval/shape_accuracy"] == metrics.cluster_accuracy(shape, rep.discrete)["one_to_one"]
  assert (tmp_path / "images" / "reconstructions.png").is_file()


GOLDEN = helpers.REPO / "tests" / "golden"


def _written_configs(arg: str, backend: str, placement: str) -> list[dict]:
  """The ``config.json`` of each run of ``dsprites_cascade.py:arg`` as the trainer writes them
  on ``backend`` (`trainer.setup`): resolved for the backend, the solve's placement decided for
  the program's runs (`runs.Program`), the training set's ``placement``, what was asked beside."""
  requested = importlib.import_module("experiments.configs.dsprites_cascade").get_config(arg)
  config = config_lib.resolve_run(requested, backend)
  cfgs = runs_lib.run_configs(config)
  where = codes.placement(config, len(cfgs))
  out = []
  for c in cfgs:
    c = config_lib.resolve_run(c, backend, placement=placement)
    c.assignment_placement = where
    out.append(json.loads(config_lib.to_json(c, requested=requested)))
  return out


def test_runs_written_by_any_backend_or_version_form_their_published_row(tmp_path):
  """``m6`` as the CPU writes it (two unrolled runs: the solve in the step), as a GPU writes it
  (four vmapped runs: ``gemm``, the set on the device, the overlapped solve), and as the code of
  6c59d96 (before resolved fields) and of 4f5475e (resolved, on a CPU and a GPU) wrote it: one
  row, matching Table 1's ``m6`` exactly."""
  cpu = _written_configs("m6,num_seeds=2", "cpu", "host")
  gpu = _written_configs("m6,num_seeds=4,seed=2", "gpu", "device")
  assert {c["assignment_placement"] for c in cpu} == {"step"}
  assert {(c["assignment_placement"], c["model"]["conv_impl"], c["seed_layout"]) for c in gpu} == {
      ("overlapped", "gemm", "vmap")}
  earlier = [json.loads((GOLDEN / f"dsprites_cascade_m6_config_{name}.json").read_text())
             for name in ("6c59d96", "4f5475e_cpu", "4f5475e_gpu")]
  assert "assignment_overlap" in earlier[0] and earlier[2]["assignment_placement"] == "overlapped"
  module = importlib.import_module("experiments.configs.dsprites_cascade")
  candidates = aggregate.config_candidates([module])
  runs = []
  for i, saved in enumerate(cpu + gpu + earlier):
    match = aggregate.match_experiment(saved, candidates)
    assert (match["variant"], match["exact"]) == ("m6", True), (i, match["differences"])
    saved["seed"] = i
    path = tmp_path / f"run{i}"
    path.mkdir()
    (path / "config.json").write_text(json.dumps(saved))
    (path / "results.json").write_text(json.dumps({
        "run_dir": str(path), "seed": i, "method": "cascadevae", "latent_dim": 6,
        "dataset": {"name": "dsprites", "class": "DSprites", "source": "file",
                    "comparable_with_published": True},
        "checkpoint": {"step": 300_000, "num_steps": 300_000, "final": True},
        "metrics": {"factor_score": {"value": 0.5 + 0.01 * i}}}))
    runs.append(path)
  (row,) = aggregate.aggregate_runs(runs, candidates=candidates)["rows"]
  assert row["experiment"]["variant"] == "m6" and row["experiment"]["exact"]
  assert row["metrics"]["factor_score"]["n"] == 9


def test_aggregate_keeps_a_published_row_under_its_protocol_variant():
  # `:m4,best_validation` trains on the paper's 50,000 images and keeps a selected checkpoint:
  # still Table 3's m = 4 row, so the paper's numbers stand beside it; `:best_validation` alone is
  # the default row (m10) with it.
  module = importlib.import_module("experiments.configs.mnist_cascade")
  candidates = aggregate.config_candidates([module])
  for arg, row in (("m4,best_validation", "m4"), ("best_validation", "m10"), ("m4", "m4")):
    match = aggregate.match_experiment(module.get_config(arg + ",seed=3"), candidates)
    assert match["exact"], (arg, match["differences"])
    assert match["variant"] == (row if arg == row else f"{row},best_validation")
    assert match["published"] == module.PUBLISHED[row]
  # The protocol alone changes fields the plain row does not have: never equated with it.
  plain = next(c for c in candidates if c["variant"] == "m4")
  assert aggregate.match_experiment(module.get_config("m4,best_validation"),
                                    [plain])["differences"]["dataset.train_split"][1] != "train50k"


def test_aggregate_accepts_published_numbers_without_std_or_best(tmp_path):
  module = types.ModuleType("experiments.configs.fake_parted")
  module.VARIANTS = ("labels256",)
  module.PUBLISHED = {"labels256": {"factor_score": {"mean": 95.0},
                                    "shape_accuracy": {"mean": 83.0, "std": 1.5}}}
  module.get_config = lambda arg=None: helpers.tiny_config("cascadevae", seed=0)
  runs = [_fake_run(tmp_path / f"s{s}", helpers.tiny_config("cascadevae", seed=s), v, v)
          for s, v in ((0, 0.9), (1, 0.8))]
  table = aggregate.aggregate_runs(runs, candidates=aggregate.config_candidates([module]))
  (row,) = table["rows"]
  assert row["experiment"]["module"] == "fake_parted" and row["experiment"]["exact"]
  assert row["metrics"]["factor_score"]["published"] == {"mean": 95.0}
  assert "| 85.00 (5.00) | 95.00 (-) | 85.00 (5.00) | 83.00 (1.50) |" in \
      aggregate.markdown_table(table)
  text = aggregate.markdown_table(table, "all")
  assert "| 85.00 (5.00) / 90.00 | 95.00 (-) / - |" in text
  assert "| 85.00 (5.00) / 90.00 | 83.00 (1.50) / - |" in text


def test_read_only_checkpointer_refuses_to_write(tmp_path):
  with pytest.raises(FileNotFoundError, match="no checkpoint yet"):
    checkpoint.Checkpointer(tmp_path / "empty", read_only=True)
  assert not (tmp_path / "empty").exists()  # nothing created
  state = {"w": np.arange(3.0, dtype=np.float32)}
  writer = checkpoint.Checkpointer(tmp_path, keep=1)
  writer.save(1, state)
  writer.close()
  before = {p: p.stat().st_mtime_ns for p in (tmp_path / "checkpoints").rglob("*")}
  reader = checkpoint.Checkpointer(tmp_path, keep=1, read_only=True)
  assert reader.all_steps() == [1]
  with pytest.raises(checkpoint.ReadOnlyError, match="read-only"):
    reader.save(2, {"w": state["w"] + 1})
  restored = reader.restore(jax.tree_util.tree_map(jax.numpy.asarray, state))
  np.testing.assert_array_equal(restored["w"], state["w"])
  reader.close()
  assert {p: p.stat().st_mtime_ns for p in (tmp_path / "checkpoints").rglob("*")} == before


@pytest.mark.slow
def test_evaluation_on_another_set_records_trained_on_and_evaluated_on(trained, tmp_path,
                                                                      monkeypatch):
  workdir = _copy(trained, tmp_path)
  _, _, data, _ = trained
  config = json.loads((workdir / "config.json").read_text())
  config["dataset"]["eval_name"] = "fashion_mnist"  # trained on mnist
  (workdir / "config.json").write_text(json.dumps(config))
  asked = []

  def fake_load(name, **kwargs):
    asked.append((name, kwargs["split"]))
    return data

  monkeypatch.setattr(evaluator_lib.data_lib, "load_dataset", fake_load)
  evaluate_run.evaluate_run(workdir)
  assert asked == [("fashion_mnist", "test")]
  saved = json.loads((workdir / "results.json").read_text())["dataset"]
  assert (saved["trained_on"], saved["evaluated_on"], saved["name"]) == (
      "mnist", "fashion_mnist", "fashion_mnist")
  assert saved["split"] == "test" and saved["override"] is False
  assert "trained on mnist, evaluated on fashion_mnist" in (workdir / "report.md").read_text()
  # A config written before the fields, filled as a run's config is when read back, evaluates
  # the training set.
  old = config_lib.base_config()
  del old.dataset["eval_name"]
  del old.dataset["eval_split"]
  old.dataset.name = "dsprites"
  old = config_lib.fill_missing(old, config_lib.base_config())
  assert evaluator_lib.eval_data_names(old) == {"trained_on": "dsprites",
                                                "evaluated_on": "dsprites", "split": "train"}


@pytest.mark.slow
def test_the_command_line_finishes_a_dsprites_cascadevae_smoke_run_with_one_line_per_run(
    tmp_path, monkeypatch):
  # The main job's smoke run (on dSprites' synthetic subset: the official file is not here, and
  # encoding the rendered 737,280 images takes minutes), evaluated by the command line with its
  # default metrics: exit 0, a summary line with every number, the metrics that could not run on
  # this set named one line each. The training command runs in this process (one device, as a
  # fresh interpreter has), the evaluation command in its own (its whole stderr is checked).
  env = dict(os.environ, DISENTANGLE_SYNTHETIC_DIR=str(tmp_path / "synthetic"))
  monkeypatch.setenv("DISENTANGLE_SYNTHETIC_DIR", env["DISENTANGLE_SYNTHETIC_DIR"])
  run_dir = tmp_path / "run"
  overrides = ("smoke,num_steps=4,checkpoint_every=4,eval_every=4,log_every=2,batch_size=16,"
               "eval.num_points=200,eval.factor_score_votes=20,eval.suite_points=40,"
               "progress_bar=False,dataset.source=file,dataset.synthetic_if_missing=True,"
               "mesh.num_devices=1")
  train = helpers.run_in_process(
      "experiments.dsprites_cascade",
      f"--config=experiments/configs/dsprites_cascade.py:{overrides}", f"--workdir={run_dir}")
  assert train.returncode == 0, train.stderr[-3000:]
  proc = subprocess.run(
      [sys.executable, "-m", "experiments.evaluate", f"--workdir={run_dir}",
       "--factor_score_votes=20", "--vote_batch=10", "--mig_points=500"],
      capture_output=True, text=True, cwd=helpers.REPO, env=env, timeout=900, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "ConvergenceWarning" not in proc.stderr and "Traceback" not in proc.stderr
  assert not helpers.library_log_lines(proc.stdout + proc.stderr), proc.stderr[-3000:]
  lines = proc.stdout.strip().splitlines()
  saved = json.loads((run_dir / "results.json").read_text())
  head = f"{run_dir}: seed 0 step 4 (final: True): "
  (summary,) = [line for line in lines if line.startswith(head)]
  shown = {m: v for m, v in saved["metrics"].items() if isinstance(v, dict) and "value" in v}
  for name, m in shown.items():  # every per-run value printed as written
    if m["value"] is not None:
      assert f"{name} {m['value']:.4f}" in summary, name
  not_computed = saved["metrics"].get("not_computed", {})
  for line in not_computed.values():
    assert f"  not computed: {line}" in lines
  # UDR's sample has no per-run value (aggregate scores it across seeds): named, not formatted.
  assert shown["udr_sample"]["value"] is None and "factor_score" in shown and "mig" in shown
  assert [line for line in lines if line.startswith("  no per-run value:")] == [
      "  no per-run value: udr_sample (scored across seeds: python -m experiments.aggregate)"]
  assert lines[-1] == f"wrote {run_dir}/results.json and report.md"
