"""Locatello et al. 2019's study as tables (``locatello2019_<data set>``): the plan against
disentanglement_lib's ``unsupervised_study_v1`` settings, bad input, and its pictures
(`disentangle.reproduce.study_figures`)."""
import functools
import json
import math
import re

import numpy as np
from PIL import Image
import pytest
from scipy import stats

from disentangle.evaluation import evaluator
from disentangle.reproduce import plan
from disentangle.reproduce import render
from disentangle.reproduce import run
from disentangle.reproduce import study_figures
from experiments import aggregate as aggregate_entry
from experiments import tables
from experiments.configs import common
from tests import helpers

MODULES = {m.__name__.rpartition(".")[2]: m for m in aggregate_entry.config_modules()}
SCALE = functools.partial(common.scale_schedule, round_steps=True)

# disentanglement_lib config/unsupervised_study_v1/sweep.py, written out here from its text:
# (model, the swept gin binding as our config field, its six values, method, fixed fields).
STUDY = (
    ("beta-VAE", "betavae.beta", (1, 2, 4, 6, 8, 16), "betavae", {}),
    ("FactorVAE", "factorvae.gamma", (10, 20, 30, 40, 50, 100), "factorvae",
     {"factorvae.disc_learning_rate": 1e-4, "factorvae.disc_b1": 0.5, "factorvae.disc_b2": 0.9,
      "factorvae.disc_layers": 6, "factorvae.disc_hidden": 1000,
      "num_steps": 150_000}),  # training_steps 300000 counts 2 global steps per iteration
    ("beta-TCVAE", "betatcvae.beta", (1, 2, 4, 6, 8, 10), "betatcvae",
     {"betatcvae.alpha": 1.0, "betatcvae.gamma": 1.0}),
    ("DIP-VAE-I", "dipvae.lambda_od", (1, 2, 5, 10, 20, 50), "dipvae",
     {"dipvae.dip_type": "i", "dipvae.lambda_d_factor": 10.0}),
    ("DIP-VAE-II", "dipvae.lambda_od", (1, 2, 5, 10, 20, 50), "dipvae",
     {"dipvae.dip_type": "ii", "dipvae.lambda_d_factor": 1.0}),
    ("AnnealedVAE", "annealedvae.c_max", (5, 10, 25, 50, 75, 100), "annealedvae",
     {"annealedvae.gamma": 1000.0, "annealedvae.iteration_threshold": 100_000}),
)
# model_configs/shared.gin
SHARED = {"batch_size": 64, "num_steps": 300_000, "model.latent_dim": 10,
          "optimizer.learning_rate": 1e-4, "optimizer.b1": 0.9, "optimizer.b2": 0.999,
          "optimizer.eps": 1e-8, "model.likelihood": "bernoulli"}
DATASETS = ("dsprites", "color_dsprites", "noisy_dsprites", "scream_dsprites", "smallnorb",
            "cars3d", "shapes3d")


@functools.cache
def _plan(dataset, seeds, fraction=1):
  """The study's programs for ``dataset`` (planned once per arguments; the tests only read them)."""
  return plan.plan_table(tables.TABLES[f"locatello2019_{dataset}"], MODULES, seeds=seeds,
                         fraction=fraction, scale=SCALE)


def _get(config, field):
  node = config
  for part in field.split("."):
    node = node[part]
  return node


@pytest.mark.parametrize("dataset", DATASETS)
def test_the_study_plans_one_program_per_model_over_its_grid_and_seeds(dataset):
  table = tables.TABLES[f"locatello2019_{dataset}"]
  assert table.seeds == 50 and table.estimators == "study2019"
  assert {"beta_vae", "factor_score_dlib", "mig", "dci", "modularity", "sap"} <= \
      set(table.metrics)
  programs = plan.plan_table(table, MODULES, seeds=3, fraction=1, scale=SCALE)
  assert len(programs) == len(STUDY) == 6
  assert len(table.rows) == 36
  for p, (model, field, values, method, fixed) in zip(programs, STUDY):
    c = p.config
    assert c.method == method and c.dataset.name == dataset
    assert c.eval.estimators == "study2019" and c.eval.downstream
    for f, v in {**SHARED, **fixed}.items():
      assert _get(c, f) == v, (model, f)
    assert [tuple(v) for f, v in plan.runs_lib.parse_sweep(c.sweep)] == \
        [tuple(repr(float(v)) for v in values)]
    assert len(p.runs) == 6 * 3
    assert sorted({s.seed for s in p.runs}) == [0, 1, 2]
    # each run's row is the row of its grid value, and that row names the model and the value
    configs = run.plan_lib.runs_lib.run_configs(c)
    for spec, cfg in zip(p.runs, configs):
      row = table.rows[spec.row]
      assert row.model == model and row.hparam[1] == _get(cfg, field) == float(row.hparam[1])
    assert sorted({table.rows[s.row].hparam[1] for s in p.runs}) == sorted(map(float, values))
  if dataset in ("smallnorb", "shapes3d"):
    assert all(p.config.dataset.source == "tfds" for p in programs)


def test_a_fraction_scales_the_annealing_with_the_schedule():
  programs = _plan("dsprites", 2, "1/1000")
  annealed = programs[-1].config
  assert annealed.num_steps == 300 and annealed.annealedvae.iteration_threshold == 100
  # five models of 300 steps, FactorVAE of 150 (two global steps per iteration)
  assert plan.run_steps(programs) == 5 * 6 * 2 * 300 + 6 * 2 * 150


def test_the_study_variants_leave_the_cascadevae_baselines_as_they_were():
  betavae, factorvae = MODULES["dsprites_betavae"], MODULES["dsprites_factorvae"]
  c = betavae.get_config("beta4_m10")
  assert (c.optimizer.learning_rate, c.betavae.beta, c.model.latent_dim) == (3e-4, 4.0, 10)
  c = factorvae.get_config("m5")
  assert (c.factorvae.gamma, c.model.latent_dim) == (35.0, 5)
  c = betavae.get_config("beta2")  # a grid row implies the study's settings
  assert (c.optimizer.learning_rate, c.betavae.beta, c.model.latent_dim) == (1e-4, 2.0, 10)
  c = factorvae.get_config("cars3d")
  assert (c.dataset.name, c.factorvae.gamma, c.model.latent_dim) == ("cars3d", 10.0, 10)


@pytest.mark.parametrize("dataset", DATASETS)
def test_the_study_trains_disentanglement_libs_networks_and_the_baselines_keep_theirs(dataset):
  programs = _plan(dataset, 1)
  for p in programs:
    assert (p.config.model.architecture, p.config.model.init) == ("dlib", "tensorflow")
    if p.config.method == "factorvae":
      assert p.config.factorvae.disc_init == "tensorflow"
  for config, variant in (("dsprites_betavae", "beta4_m10"), ("dsprites_factorvae", "m5"),
                          ("dsprites_betatcvae", "m10"), ("dsprites_betatcvae", "batch64")):
    c = MODULES[config].get_config(variant)
    assert (c.model.architecture, c.model.init) == ("cascade", "reference")
  assert MODULES["dsprites_factorvae"].get_config("m5").factorvae.disc_init == "flax"
  c = MODULES["dsprites_betavae"].get_config("study,model.architecture=cascade,model.init=reference")
  assert (c.model.architecture, c.model.init) == ("cascade", "reference")


def test_factorvae_makes_the_updates_its_docstring_measured():
  """The config's docstring records disentanglement_lib's global step after N iterations; the
  study variant's step count is the updates it states, half the study's training_steps."""
  factorvae = MODULES["dsprites_factorvae"]
  doc = " ".join(factorvae.__doc__.split())
  stated = re.search(r"The study's FactorVAE makes ([\d,]+) updates, not ([\d,]+)", doc)
  assert stated, "the docstring states the study's FactorVAE updates"
  updates, training_steps = (int(g.replace(",", "")) for g in stated.groups())
  measured = re.search(r"run 10, 20 and 51 times in a session: global step 20, 40, 102", doc)
  assert measured, "the docstring records the measured global steps"
  assert training_steps == SHARED["num_steps"] and updates == training_steps // 2
  for variant in ("study", "gamma40", "cars3d"):
    assert factorvae.get_config(variant).num_steps == updates == factorvae.STUDY_STEPS
  for config, variant in (("dsprites_betavae", "study"), ("dsprites_betatcvae", "study")):
    assert MODULES[config].get_config(variant).num_steps == training_steps
  assert factorvae.get_config("m10").num_steps == training_steps  # CascadeVAE's baseline


def test_the_study_trains_and_scores_smallnorb_on_both_chunks():
  for config, variant in (("dsprites_betavae", "smallnorb"), ("dsprites_factorvae", "smallnorb"),
                          ("dsprites_betatcvae", "smallnorb"), ("dsprites_dipvae", "smallnorb"),
                          ("dsprites_annealedvae", "smallnorb")):
    c = MODULES[config].get_config(variant)
    assert (c.dataset.name, c.dataset.source) == ("smallnorb", "tfds")
    assert (c.dataset.train_split, c.dataset.eval_split) == ("all", "all")
    assert evaluator.eval_data_names(c)["split"] == "all"
  # 24,300 images per chunk (TFDS smallnorb train / test): beta-TCVAE's N is both
  assert MODULES["dsprites_betatcvae"].get_config("smallnorb").betatcvae.dataset_size == 48_600
  c = MODULES["dsprites_betavae"].get_config(
      "smallnorb,dataset.train_split=train,dataset.eval_split=test")  # the TFDS split, an option
  assert (c.dataset.train_split, evaluator.eval_data_names(c)["split"]) == ("train", "test")
  assert MODULES["smallnorb_betavae"].get_config().dataset.train_split == "train"


def test_the_study_draws_colour_noise_and_scream_anew_for_every_image():
  drawn = ("color_dsprites", "noisy_dsprites", "scream_dsprites")
  for dataset in DATASETS:
    for p in _plan(dataset, 1):
      want = "per_sample" if dataset in drawn else "per_image"
      assert p.config.dataset.variant_draw == want, (dataset, p.config.method)
  c = MODULES["dsprites_betavae"].get_config("noisy_dsprites,dataset.variant_draw=per_image")
  assert (c.dataset.name, c.dataset.variant_draw) == ("noisy_dsprites", "per_image")  # an option
  assert MODULES["dsprites_betavae"].get_config("beta4_m10").dataset.variant_draw == "per_image"


def test_the_dry_run_lists_the_settings_the_study_variants_change():
  for dataset in ("dsprites", "smallnorb", "color_dsprites"):
    table = tables.TABLES[f"locatello2019_{dataset}"]
    programs = _plan(dataset, 1)
    lines = plan.describe(table, programs, seeds=1, fraction=1).splitlines()
    settings = [ln for ln in lines if ln.startswith("  settings (beside the method's defaults): ")]
    assert len(settings) == len(programs) == 6
    for p, line in zip(programs, settings):
      words = set(line.split(": ", 1)[1].split(", "))
      assert {"model.architecture=dlib", "model.init=tensorflow", "eval.estimators=study2019",
              "optimizer.learning_rate=0.0001"} <= words
      assert f"num_steps={150_000 if p.config.method == 'factorvae' else 300_000}" in words
      assert ("factorvae.disc_init=tensorflow" in words) == (p.config.method == "factorvae")
      swept = plan.runs_lib.parse_sweep(p.config.sweep)[0][0]
      assert not any(w.startswith(swept + "=") for w in words)
      if dataset == "smallnorb":
        assert {"dataset.train_split=all", "dataset.eval_split=all", "dataset.source=tfds"} <= words
      assert ("dataset.variant_draw=per_sample" in words) == (dataset == "color_dsprites")
  table = tables.TABLES["cascadevae_table1"]  # the shared networks are the defaults: not listed
  text = plan.describe(table, plan.plan_table(table, MODULES, seeds=1, fraction=1, scale=SCALE),
                       seeds=1, fraction=1)
  assert "model.architecture" not in text and "model.init" not in text


def test_an_unknown_data_set_of_the_study_lists_the_known_ones_in_one_line():
  with pytest.raises(plan.BadInput) as e:
    plan.table_named(tables.TABLES, "locatello2019_mnist", tables.FAMILIES)
  message = str(e.value)
  assert "\n" not in message and "'mnist'" in message
  assert all(d in message for d in DATASETS)
  with pytest.raises(plan.BadInput, match="known tables: .*locatello2019_cars3d"):
    plan.table_named(tables.TABLES, "nonsense", tables.FAMILIES)


def test_command_line_unknown_data_set_is_one_line_and_exit_status_2(tmp_path):
  proc = helpers.run_in_process("experiments.reproduce", "--table=locatello2019_celeba",
                                f"--workdir={tmp_path / 'w'}")
  assert proc.returncode == 2
  lines = [ln for ln in proc.stderr.splitlines() if "locatello2019" in ln]
  assert len(lines) == 1 and "cars3d" in lines[0] and "'celeba'" in lines[0]
  assert not (tmp_path / "w").exists()


def _records(rng, n_seeds=4):
  """Constructed runs: metrics tied to the hyper-parameter to different degrees, with ties and
  one missing value."""
  out = []
  for model, grid in (("beta-VAE", (1.0, 2.0, 4.0)), ("AnnealedVAE", (5.0, 25.0, 100.0))):
    for value in grid:
      for seed in range(n_seeds):
        a = math.log(value) + 0.1 * rng.normal()
        out.append((model, value, seed, {"mig": a, "dci": a + rng.normal(),
                                         "sap": round(rng.uniform(), 1),
                                         "modularity": -a + 0.5 * rng.normal()}))
  out[3][3]["sap"] = None
  return out


def test_rank_correlation_equals_scipys_spearman_over_the_runs_having_both_values():
  records = _records(np.random.default_rng(0))
  metrics = ("mig", "dci", "sap", "modularity")
  corr = study_figures.rank_correlation(records, metrics)
  for i, a in enumerate(metrics):
    for j, b in enumerate(metrics):
      pairs = [(r[3][a], r[3][b]) for r in records
               if r[3][a] is not None and r[3][b] is not None]
      x, y = zip(*pairs)
      assert corr[i, j] == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
  assert np.allclose(np.diag(corr), 1.0) and np.allclose(corr, corr.T)
  assert corr[0, 3] < -0.5 < 0.5 < corr[0, 1]


def test_the_pictures_are_written_and_readable(tmp_path):
  records = _records(np.random.default_rng(1))
  metrics = ("mig", "sap")  # two panels each (drawing is most of the time), one value missing
  paths = study_figures.write_figures(records, tmp_path, metrics + ("not_computed",),
                                      hparams={"beta-VAE": "beta", "AnnealedVAE": "c_max"},
                                      titles={"mig": "MIG"}, subtitle="constructed")
  names = sorted(p.name for p in paths)
  assert names == sorted([study_figures.CORRELATION_PNG, "study_beta_vae.png",
                          "study_annealedvae.png"])
  for p in paths:
    with Image.open(p) as im:
      im.load()
      assert im.format == "PNG" and im.size[0] > 200 and im.size[1] > 150
  assert study_figures.write_figures([], tmp_path / "none", metrics) == []
  with pytest.raises(ValueError, match="no records"):
    study_figures.hparam_png(records, "FactorVAE", metrics, tmp_path / "x.png")


def test_records_of_a_tabulated_study_come_back_per_run_in_fractions():
  table = tables.TABLES["locatello2019_dsprites"]
  programs = _plan("dsprites", 2, "1/1000")
  records = {}
  for p in programs:
    for k, spec in enumerate(p.runs):
      results = {"dataset": {"comparable_with_published": False, "source": "render"},
                 "checkpoint": {"step": p.num_steps, "final": True},
                 "metrics": {"mig": {"value": 0.01 * k}, "sap": {"value": 0.5}}}
      records[spec.run_dir] = {"run_dir": spec.run_dir, "config": {}, "results": results}
  data = render.tabulate(table, programs, records, {}, {"fraction": "1/1000", "seeds": 2})
  got = study_figures.records_of_table(json.loads(json.dumps(data)), table.rows)
  assert len(got) == 72
  expected = sorted((table.rows[s.row].model, table.rows[s.row].hparam[1], s.seed, 0.01 * k)
                    for p in programs for k, s in enumerate(p.runs))
  got = sorted((m, v, s, d["mig"]) for m, v, s, d in got)
  assert [g[:3] for g in got] == [e[:3] for e in expected]
  assert np.allclose([g[3] for g in got], [e[3] for e in expected])


def test_the_study_scores_both_representations_and_each_cell_names_its_one():
  table = tables.TABLES["locatello2019_dsprites"]
  programs = _plan("dsprites", 1, "1/1000")
  assert all(p.config.eval.representation == "both" and p.config.eval.estimators == "study2019"
             for p in programs)
  assert "eval.representation='both'" in plan.describe(table, programs, seeds=1,
                                                       fraction="1/1000")
  records = {}
  for p in programs:
    for k, spec in enumerate(p.runs):
      mig = {"value": 0.01 * k, "representation": "mean",
             "sampled": {"value": 0.5 + 0.01 * k, "representation": "sampled"}}
      results = {"dataset": {"comparable_with_published": False, "source": "render"},
                 "checkpoint": {"step": p.num_steps, "final": True}, "metrics": {"mig": mig}}
      records[spec.run_dir] = {"run_dir": spec.run_dir, "config": {}, "results": results}
  data = render.tabulate(table, programs, records, {}, {"fraction": "1/1000", "seeds": 1})
  assert data["titles"]["mig"] == "MIG [mean]" and data["titles"]["mig:sampled"] == "MIG [sampled]"
  first = data["lines"][0]["per_seed"][0]["final"]
  assert first["mig"] == 0.0 and first["mig:sampled"] == 50.0
  text = render.markdown(data)
  assert "| MIG [mean] |" in text and "| MIG [sampled] |" in text
  assert "MIG [mean] 0.00, MIG [sampled] 50.00" in text
  got = study_figures.records_of_table(data, table.rows)
  assert {"mig", "mig:sampled"} == set(got[0][3])


def test_eval_points_shrink_every_metric_and_are_recorded_and_checked(tmp_path):
  table = tables.TABLES["locatello2019_dsprites"]
  full = _plan("dsprites", 1, "1/1000")
  small = plan.plan_table(table, MODULES, seeds=1, fraction="1/1000", scale=SCALE,
                          eval_points=500)
  for a, b in zip(full, small):
    assert a.config.eval.suite_points == 0 and a.config.eval.num_points == 10_000
    assert b.config.eval.suite_points == 500 and b.config.eval.num_points == 500
    assert a.config.eval.downstream and not b.config.eval.downstream
    assert a.runs == b.runs
  assert plan.evaluate_kwargs(0) == {}
  assert plan.evaluate_kwargs(500) == {"mig_points": 500, "factor_score_votes": 5,
                                       "variance_points": 500, "whole_dataset_max": 0}
  assert plan.evaluate_kwargs(0, ("mig", "dci")) == {"metrics": ("mig", "dci")}
  # the evaluation: the cells' metrics and the study's unsupervised scores, nothing else
  assert plan.evaluate_kwargs(500, table.evaluated)["metrics"] == (*tables.STUDY_METRICS,
                                                                    "unsupervised")
  assert tables.TABLES["cascadevae_table1"].evaluated == ("factor_score",)
  assert small[0].config.eval.factor_score_votes == 5
  words = plan.describe(table, small, seeds=1, fraction="1/1000", eval_points=500)
  assert "--eval_points=500" in words and "500 train / 250 test" in words
  assert "no downstream tasks" in words
  for text in ("-1", "50", "many"):
    with pytest.raises(plan.BadInput, match="^--eval_points: ") as e:
      plan.parse_eval_points(text)
    assert "\n" not in str(e.value)
  assert plan.parse_eval_points("0") == 0 and plan.parse_eval_points("2000") == 2000
  (tmp_path / run.RECORD).write_text(json.dumps(
      {"table": table.name, "seeds": 1, "fraction": "1/1000", "eval_points": 500}))
  assert run.check_workdir(tmp_path, table, seeds=1, fraction="1/1000", eval_points=500)
  with pytest.raises(plan.BadInput, match="--eval_points=500 to resume"):
    run.check_workdir(tmp_path, table, seeds=1, fraction="1/1000", eval_points=0)
  data = {"paper": "p", "title": "t", "protocol": "x", "fraction": "1/1000", "run_steps": 1,
          "seeds": 1, "titles": {}, "metrics": [], "selected": False, "std_ddof": 0,
          "lines": [], "evaluation": plan.evaluation_words(500)}
  assert ("- evaluation: the table's metrics only (a run's others: python -m "
          "experiments.evaluate), shrunk (--eval_points=500)") in render.markdown(data)


def test_a_run_stage_asked_for_fewer_points_samples_them_instead_of_the_whole_set():
  from disentangle.evaluation import evaluate_run  # pylint: disable=g-import-not-at-top
  shrunk = evaluate_run.RunSettings(variance_points=300, whole_dataset_max=0).overrides()
  assert shrunk["factor_score"]["num_variance_points"] == 300
  assert shrunk["factor_score_partedvae"] == {"num_points": 300}
  full = evaluate_run.RunSettings().overrides()
  assert "num_variance_points" not in full["factor_score"]
  assert "factor_score_partedvae" not in full
