"""``python -m experiments.reproduce``: tables, programs, budget fraction, bad input, rendering, and
one whole table trained, resumed and printed (`disentangle.reproduce`)."""
import dataclasses
import fractions
import functools
import itertools
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from disentangle import config as config_lib
from disentangle.evaluation import aggregate
from disentangle.reproduce import plan
from disentangle.reproduce import render
from disentangle.reproduce import run
from experiments import aggregate as aggregate_entry
from experiments import tables
from experiments.configs import common
from tests import helpers

MODULES = {m.__name__.rpartition(".")[2]: m for m in aggregate_entry.config_modules()}
SCALE = functools.partial(common.scale_schedule, round_steps=True)
REQUIRED = ("cascadevae_table1", "cascadevae_table2", "cascadevae_table3", "cascadevae_table4",
            "partedvae_table1", "partedvae_table2", "partedvae_mnist256", "ffvae_fig6a",
            "ffvae_fig6b", "ffvae_fig7")


def test_listing_names_every_table_and_its_rows():
  text = plan.listing(tables.TABLES)
  assert set(REQUIRED) <= set(tables.TABLES)
  for table in tables.TABLES.values():
    assert f"{table.name}: " in text
    for row in table.rows:
      assert f"  - {row.label}" in text
      assert (row.arg or "no config") in text
      if row.config is not None:  # every row's config builds and names its published cell
        MODULES[row.config].get_config(row.variant or None)
  # the papers' seed counts: CascadeVAE 10 seeds, PartedVAE's tables five runs
  assert tables.TABLES["cascadevae_table3"].seeds == 10
  assert tables.TABLES["partedvae_table2"].seeds == 5


def _independent_run_steps(table, seeds, fraction):
  """num_steps x runs from the rows' configs alone (the sweep's grid counted from its text)."""
  total = 0
  for row in table.rows:
    if row.config is None:
      continue
    c = MODULES[row.config].get_config(row.variant or None)
    points = math.prod(len(part.split("=")[1].split("|"))
                       for part in c.get("sweep", "").split(";") if part)
    steps = c.num_steps if fraction == 1 else max(1, round(c.num_steps * fraction))
    total += steps * points * seeds
  return total


@pytest.mark.parametrize("name", REQUIRED)
def test_dry_run_of_every_table_names_each_program_and_counts_run_steps(name):
  table = tables.TABLES[name]
  fraction = fractions.Fraction(1, 50) if name != "ffvae_fig6a" else 1
  seeds = 2 if name.startswith("ffvae") else table.seeds
  programs = plan.plan_table(table, MODULES, seeds=seeds, fraction=fraction, scale=SCALE)
  text = plan.describe(table, programs, seeds=seeds, fraction=fraction, workdir="W")
  expected = _independent_run_steps(table, seeds, fraction)
  assert plan.run_steps(programs) == expected
  assert text.splitlines()[-1].startswith(f"estimated run-steps: {expected:,} ")
  for row in table.rows:
    assert (row.arg or f"row {row.label!r}: no config") in text
  for p in programs:
    assert f"-> W/runs/{p.name}" in text and f"steps: {p.num_steps}" in text
    if p.config.sweep:
      for field, values in plan.runs_lib.parse_sweep(p.config.sweep):
        assert f"sweep {field}: {', '.join(values)}" in text
  # every run belongs to a row of the table, every row with a config has seeds x points runs
  rows = {r for p in programs for r in p.rows}
  assert rows == {i for i, r in enumerate(table.rows) if r.config is not None}
  for p in programs:
    assert sorted({s.seed for s in p.runs}) == list(range(seeds))


def test_fraction_scales_every_schedule_rounding_to_whole_steps():
  c = MODULES["mnist_cascade"].get_config("m10")
  changed = common.scale_schedule(c, fractions.Fraction(1, 50), round_steps=True)
  assert (c.num_steps, c.cascade.relieve_every, c.cascade.discrete_start) == (2400, 200, 0)
  assert changed["num_steps"] == [120_000, 2400] and "cascade.discrete_start" not in changed
  c = MODULES["mnist_cascade"].get_config("m10")
  with pytest.raises(config_lib.ConfigError, match="cascade.relieve_every"):
    common.scale_schedule(c, fractions.Fraction(1, 3))  # strict: 10,000 / 3 is not whole
  c = MODULES["mnist_cascade"].get_config("m10")
  changed = common.scale_schedule(c, fractions.Fraction(1, 3), round_steps=True)
  assert (c.num_steps, c.cascade.relieve_every) == (40_000, 3333)  # 10,000 / 3 rounded
  assert changed["cascade.relieve_every"] == [10_000, 3333]
  c = MODULES["dsprites_cascade"].get_config("cascade_c")
  common.scale_schedule(c, fractions.Fraction(1, 1_000_000), round_steps=True)
  assert (c.num_steps, c.cascade.relieve_every, c.eval_every) == (1, 1, 1)  # at least one step
  assert c.cascade.discrete_start == common.NEVER
  c = MODULES["mnist_parted"].get_config("labels256")
  common.scale_schedule(c, fractions.Fraction(1, 7), round_steps=True)
  assert c.parted.plateau_epoch_steps == round(938 / 7) and c.num_steps == round(56_280 / 7)


def test_fraction_of_the_cpu_variants_equals_their_schedule():
  for name, row in (("mnist_cascade", "m4"), ("mnist_jointvae", "m10"),
                    ("mnist_parted", "labels256"), ("dsprites_parted", "labels100")):
    module = MODULES[name]
    cpu = module.get_config(f"{row},cpu")
    c = module.get_config(row)
    common.scale_schedule(c, getattr(module, "CPU_FRACTION", common.CPU_FRACTION),
                          round_steps=True)
    if name == "dsprites_parted":  # its cpu variant evaluates once, at the end
      c.eval_every = cpu.eval_every
    assert c.to_dict() == cpu.to_dict(), name


@pytest.mark.parametrize("text", ["0", "-0.5", "1.5", "abc", "1/0"])
def test_bad_fraction_is_one_line_naming_the_argument(text):
  with pytest.raises(plan.BadInput, match=r"^--fraction: ") as e:
    plan.parse_fraction(text)
  assert "\n" not in str(e.value)


def test_dataset_source_render_puts_the_dsprites_runs_alone_on_the_renderer():
  """``--dataset_source=render``: the runs on dSprites and the sets drawn from it train on the
  renderer on purpose (their lines then say "not comparable (rendered images)"), the other sets
  keep their source; without it every config keeps its own, and a paper's dSprites runs need the
  official file; any other value is one line naming the flag."""
  def sources(name, source=""):
    return {p.config.dataset.source for p in plan.plan_table(
        tables.TABLES[name], MODULES, seeds=1, fraction=fractions.Fraction(1, 50), scale=SCALE,
        dataset_source=source)}
  for name, rendered in (("cascadevae_table1", {"render"}), ("ffvae_fig7", {"render"}),
                         ("cascadevae_table3", {"auto"})):
    assert sources(name, "render") == rendered, name
    assert sources(name) == {"auto"}, name
  assert plan.parse_dataset_source(None) == plan.parse_dataset_source("") == ""
  assert plan.parse_dataset_source(" render ") == "render"
  for text in ("file", "tfds", "Render"):
    with pytest.raises(plan.BadInput, match=r"^--dataset_source: ") as e:
      plan.parse_dataset_source(text)
    assert "\n" not in str(e.value)


def test_fractions_in_range_parse_as_ratios():
  assert plan.parse_fraction("0.02") == fractions.Fraction(1, 50)
  assert plan.parse_fraction("1/50") == fractions.Fraction(1, 50)
  assert plan.parse_fraction("1") == 1


@pytest.mark.parametrize("text", ["0", "-3", "two"])
def test_bad_seeds_is_one_line_naming_the_argument(text):
  with pytest.raises(plan.BadInput, match=r"^--seeds: "):
    plan.parse_seeds(text)


def test_unknown_table_lists_the_known_ones():
  with pytest.raises(plan.BadInput, match=r"^--table: unknown table 'table9'") as e:
    plan.table_named(tables.TABLES, "table9")
  assert all(name in str(e.value) for name in tables.TABLES)


def test_workdir_of_another_table_fraction_or_seed_count_is_refused(tmp_path):
  t3, t4 = tables.TABLES["cascadevae_table3"], tables.TABLES["cascadevae_table4"]
  (tmp_path / run.RECORD).write_text(json.dumps({"table": t3.name, "seeds": 2,
                                                 "fraction": "1/50"}))
  before = sorted(p.name for p in tmp_path.iterdir())
  with pytest.raises(plan.BadInput, match=r"^--workdir: .* table 'cascadevae_table3'"):
    run.check_workdir(tmp_path, t4, seeds=2, fraction=fractions.Fraction(1, 50))
  with pytest.raises(plan.BadInput, match=r"^--fraction: .* 1/50"):
    run.check_workdir(tmp_path, t3, seeds=2, fraction=fractions.Fraction(1, 10))
  with pytest.raises(plan.BadInput, match=r"^--seeds: "):
    run.check_workdir(tmp_path, t3, seeds=3, fraction=fractions.Fraction(1, 50))
  assert run.check_workdir(tmp_path, t3, seeds=2, fraction=fractions.Fraction(1, 50))
  other = tmp_path / "other"
  other.mkdir()
  (other / "config.json").write_text("{}")
  with pytest.raises(plan.BadInput, match=r"^--workdir: .* holds no reproduce.json"):
    run.check_workdir(other, t3, seeds=2, fraction=1)
  assert sorted(p.name for p in tmp_path.iterdir()) == sorted(before + ["other"])
  assert run.check_workdir(tmp_path / "new", t3, seeds=2, fraction=1) is None
  assert not (tmp_path / "new").exists()


def _tiny(**overrides):
  c = helpers.tiny_config("cascadevae", **overrides)
  return config_lib_dict(c)


def config_lib_dict(c):
  import ml_collections  # pylint: disable=g-import-not-at-top
  return ml_collections.ConfigDict(c.to_dict())


def test_group_rows_merges_a_full_grid_of_sweepable_fields_only():
  a = [_tiny(**{"cascade.penalty": p, "cascade.beta_low": b}) for p, b in
       itertools.product((0.5, 0.25), (1.0, 2.0))]
  other_shape = _tiny(**{"model.latent_dim": 4})
  swept = _tiny(sweep="cascade.penalty=0.1|0.2")
  groups = plan.group_rows(dict(enumerate(a + [other_shape, swept])))
  assert groups[0] == ((0, 1, 2, 3), {"cascade.beta_low": [1.0, 2.0],
                                      "cascade.penalty": [0.5, 0.25]})
  assert groups[1:] == [((4,), {}), ((5,), {})]
  # three points of a 2 x 2 grid are not a grid: separate programs
  assert plan.group_rows(dict(enumerate(a[:3]))) == [((0,), {}), ((1,), {}), ((2,), {})]
  # a schedule switch (t_d) cannot vary within a program
  switch = [_tiny(**{"cascade.discrete_start": t}) for t in (2, 4)]
  assert plan.group_rows(dict(enumerate(switch))) == [((0,), {}), ((1,), {})]


def test_plan_maps_every_run_of_a_merged_program_to_its_row_and_seed():
  module = helpers.fake_experiment({"lo": _tiny(**{"cascade.penalty": 0.25}),
                                    "hi": _tiny(**{"cascade.penalty": 0.5}),
                                    "m4": _tiny(**{"model.latent_dim": 4})})
  table = plan.Table("t", "tiny", "test", ("accuracy",), (
      plan.Row("lo", "3", "fake", "lo"), plan.Row("none", "3"), plan.Row("hi", "3", "fake", "hi"),
      plan.Row("m4", "4", "fake", "m4")), "final", seeds=2)
  programs = plan.plan_table(table, {"fake": module}, seeds=2, scale=SCALE)
  assert [p.name for p in programs] == ["fake_lo+hi", "fake_m4"]
  merged = programs[0]
  assert merged.config.sweep == "cascade.penalty=0.25|0.5" and merged.config.num_seeds == 2
  assert [(s.row, s.seed, s.run_dir) for s in merged.runs] == [
      (0, 0, "runs/fake_lo+hi/cascade.penalty=0.25_seed_0"),
      (0, 1, "runs/fake_lo+hi/cascade.penalty=0.25_seed_1"),
      (2, 0, "runs/fake_lo+hi/cascade.penalty=0.5_seed_0"),
      (2, 1, "runs/fake_lo+hi/cascade.penalty=0.5_seed_1")]
  assert [(s.row, s.run_dir) for s in programs[1].runs] == [
      (3, "runs/fake_m4/seed_0"), (3, "runs/fake_m4/seed_1")]
  assert plan.run_steps(programs) == 6 * 4 + 6 * 2
  # one seed, one row: the program's folder is its run
  (single,) = plan.plan_table(dataclasses.replace(table, rows=table.rows[3:]),
                              {"fake": module}, seeds=1, scale=SCALE)
  assert [s.run_dir for s in single.runs] == ["runs/fake_m4"]
  # The suite's classifiers: today's by default, the 2019 study's for a table that says so.
  assert single.config.eval.estimators == "current"
  (study,) = plan.plan_table(dataclasses.replace(table, rows=table.rows[3:],
                                                 estimators="study2019"),
                             {"fake": module}, seeds=1, scale=SCALE)
  assert study.config.eval.estimators == "study2019"


def _record(run_dir, seed, value, *, selected=None, source="file", comparable=True):
  results = {"run_dir": run_dir, "seed": seed, "checkpoint": {"step": 6, "final": True},
             "dataset": {"source": source, "comparable_with_published": comparable},
             "metrics": {"accuracy": {"value": value}}}
  if selected is not None:
    results["selected"] = {"step": 3, "label": "best accuracy on valid10k",
                           "metrics": {"accuracy": {"value": selected}}}
  return {"run_dir": run_dir, "config": {}, "results": results}


def test_table_cells_mean_population_std_and_best_beside_the_published():
  module = helpers.fake_experiment(
      {"a": _tiny(), "b": _tiny(**{"model.latent_dim": 4})},
      {"a": {"accuracy": {"mean": 81.41, "std": 9.54, "best": 97.31}}})
  table = plan.Table("t", "tiny", "Paper, Table 3", ("accuracy",), (
      plan.Row("CascadeVAE", "3", "fake", "a"), plan.Row("B", "4", "fake", "b"),
      plan.Row("VAE", "6", published={"accuracy": {"mean": 41.0}})),
      "accuracy, final and selected", seeds=3, selected=True)
  programs = plan.plan_table(table, {"fake": module}, seeds=3, scale=SCALE)
  finals, sels = [0.80, 0.90, 0.70], [0.85, 0.95, 0.60]
  records = {s.run_dir: _record(s.run_dir, s.seed, finals[s.seed], selected=sels[s.seed])
             for s in programs[0].runs}
  records.update({s.run_dir: _record(s.run_dir, s.seed, 0.5, source="render", comparable=False)
                  for s in programs[1].runs[:2]})  # seed 2 of row B not evaluated yet
  published = {i: plan.published_of(r, {"fake": module}) for i, r in enumerate(table.rows)}
  data = render.tabulate(table, programs, records, published,
                         {"seeds": 3, "fraction": "1/50", "command": "cmd"})
  a, b, vae = data["lines"]
  cell = a["metrics"]["accuracy"]
  assert cell["final"]["n"] == 3 and a["seeds"] == [0, 1, 2] and a["status"] == "evaluated"
  assert cell["final"]["mean"] == pytest.approx(80.0)
  assert cell["final"]["std"] == pytest.approx(np.std([80, 90, 70]))  # ddof 0: sqrt(200 / 3)
  assert cell["final"]["std"] == pytest.approx(math.sqrt(200 / 3))
  assert cell["final"]["best"] == pytest.approx(90.0)
  assert cell["selected"]["mean"] == pytest.approx(80.0)
  assert cell["selected"]["best"] == pytest.approx(95.0)
  assert cell["published"] == {"mean": 81.41, "std": 9.54, "best": 97.31}
  assert a["comparable_words"] == "yes"
  assert b["status"] == "partial" and b["metrics"]["accuracy"]["selected"] is None
  assert b["comparable"] is False and b["comparable_words"] == "not comparable (rendered images)"
  assert vae["status"] == "no config" and vae["published"] == {"accuracy": {"mean": 41.0}}
  assert data["fraction"] == "1/50" and data["fraction_value"] == 0.02
  assert data["std_ddof"] == 0
  text = render.markdown(data)
  # The compact table first (mean (std) of the published metric beside the paper's), then every
  # column (best seeds, comparability).
  compact, full = text.index("| method | m | seeds |"), text.index("| method | m | accuracy")
  assert compact < full and text[compact:].splitlines()[0] == (
      "| method | m | seeds | accuracy, final | accuracy, selected | accuracy, paper |")
  assert "| CascadeVAE | 3 | 3 | 80.00 (8.16) | 80.00 (14.72) | 81.41 (9.54) |" in text
  assert "| B † | 4 | 2 | 50.00 (0.00) | - | - |" in text
  assert "| VAE | 6 | - | no config | no config | 41.00 (-) |" in text
  assert ("| CascadeVAE | 3 | 80.00 (8.16) / 90.00 | 80.00 (14.72) / 95.00 | "
          "81.41 (9.54) / 97.31 | 3 | yes |") in text
  assert "| VAE | 6 | no config | no config | 41.00 (-) / - | - | no config |" in text
  assert "not comparable (rendered images)" in text and "1/50 of every schedule" in text
  assert "- CascadeVAE, m = 3, seed 1: final (step 6) accuracy 90.00 | selected (step 3) " \
         "accuracy 95.00" in text
  json.dumps(data)


def _cli(*args, cwd=helpers.REPO):
  return subprocess.run([sys.executable, "-m", "experiments.reproduce", *args], cwd=cwd,
                        capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("args,argument", [  # the parsers' messages: the tests above
    pytest.param(["--table=table9"], "--table", marks=pytest.mark.slow),
    (["--table=cascadevae_table3", "--fraction=1.5"], "--fraction"),
    (["--table=cascadevae_table4", "--fraction=0.02"], "--workdir"),
])
def test_command_line_bad_input_is_one_line_and_starts_nothing(tmp_path, args, argument):
  """The first case in its own process (whose whole stderr is the line), the others with the
  command line run in this one."""
  workdir = tmp_path / "w"
  workdir.mkdir()
  (workdir / run.RECORD).write_text(json.dumps({"table": "cascadevae_table3", "seeds": 10,
                                                "fraction": "1/50"}))
  before = {p: p.stat().st_mtime_ns for p in workdir.rglob("*")}
  run_it = _cli if args == ["--table=table9"] else functools.partial(
      helpers.run_in_process, "experiments.reproduce")
  proc = run_it(*args, f"--workdir={workdir}")
  assert proc.returncode == 2, proc.stderr
  lines = [line for line in proc.stderr.splitlines() if line.strip()]
  assert len(lines) == 1 and lines[0].startswith(f"error: {argument}"), proc.stderr
  assert {p: p.stat().st_mtime_ns for p in workdir.rglob("*")} == before


def test_command_line_list_and_dry_run():
  """The command line (in this process) lists the tables and plans one without training."""
  cli = functools.partial(helpers.run_in_process, "experiments.reproduce")
  listed = cli("--list")
  assert listed.returncode == 0 and all(n in listed.stdout for n in REQUIRED)
  dry = cli("--table=cascadevae_table3", "--dry_run", "--seeds=2", "--fraction=1/50")
  assert dry.returncode == 0, dry.stderr
  assert dry.stdout.strip().splitlines()[-1] == "estimated run-steps: 17,104 in 4 program(s)"


@pytest.mark.slow
def test_a_tiny_table_trains_evaluates_resumes_without_retraining_and_prints(tmp_path):
  base = dict(num_steps=4, checkpoint_every=2, log_every=2, **{
      "cascade.discrete_start": 0, "cascade.num_discrete": 4, "eval.num_points": 64,
      "eval.information": False, "eval.num_images": 4, "mesh.num_devices": 1})
  module = helpers.fake_experiment({"lo": _tiny(**base, **{"cascade.penalty": 0.25}),
                                    "hi": _tiny(**base, **{"cascade.penalty": 0.5})},
                                   {"lo": {"accuracy": {"mean": 50.0, "std": 1.0, "best": 52.0}}})
  table = plan.Table("tiny", "a tiny table", "test", ("accuracy",), (
      plan.Row("lo", "3", "fake", "lo"), plan.Row("hi", "3", "fake", "hi"),
      plan.Row("VAE", "6", published={"accuracy": {"mean": 41.0}})), "final", seeds=2)
  data = helpers.TinyImages(n=64)
  kwargs = dict(scale=SCALE, seeds=2, fraction="1/2", command="cmd", dataset=data,
                evaluate_kwargs={"mig_points": 200, "encode_batch_size": 64})
  first = run.run_table(table, tmp_path, {"fake": module}, **kwargs)
  program = tmp_path / "runs" / "fake_lo+hi"
  checkpoints = sorted(p.name for p in (program / "checkpoints").iterdir())
  assert "2" in checkpoints  # num_steps 4 x 1/2
  files = {p: p.stat().st_mtime_ns for p in program.rglob("*") if p.is_file()}
  lo, hi, vae = first["lines"]
  for line in (lo, hi):
    assert line["status"] == "evaluated" and line["seeds"] == [0, 1]
    values = []
    for s in line["per_seed"]:
      res = json.loads((tmp_path / s["run_dir"] / "results.json").read_text())
      assert res["checkpoint"]["step"] == 2 and res["checkpoint"]["final"]
      # the table's metrics only (the run alone would also have 'information', 'mig', ...)
      assert set(res["metrics"]) == {"accuracy"} and res["settings"]["metrics"] == ["accuracy"]
      values.append(100 * res["metrics"]["accuracy"]["value"])
    cell = line["metrics"]["accuracy"]["final"]
    assert cell["mean"] == pytest.approx(np.mean(values))
    assert cell["std"] == pytest.approx(np.std(values)) and cell["best"] == max(values)
    assert line["comparable"] is False  # the test's data are an override
  assert json.loads((tmp_path / run.RECORD).read_text())["fraction"] == "1/2"
  assert vae["status"] == "no config"

  second = run.run_table(table, tmp_path, {"fake": module}, **kwargs)
  assert {p: p.stat().st_mtime_ns for p in program.rglob("*") if p.is_file()} == files
  assert sorted(p.name for p in (program / "checkpoints").iterdir()) == checkpoints
  assert second["lines"] == first["lines"]
  table_json = json.loads((tmp_path / "table.json").read_text())
  assert table_json["lines"] == json.loads(json.dumps(first["lines"]))
  assert table_json["seeds"] == 2 and table_json["device"]["backend"] == "cpu"
  text = (tmp_path / "table.md").read_text()
  assert aggregate.cell_text(lo["metrics"]["accuracy"]["final"]) in text
  assert "50.00 (1.00) / 52.00" in text and "| VAE | 6 | no config |" in text
  assert f"| lo † | 3 | 2 | {aggregate.compact_cell(lo['metrics']['accuracy']['final'])} | " \
         "50.00 (1.00) |" in text
  assert len(json.loads((tmp_path / run.RECORD).read_text())["commands"]) == 2


def test_a_figure_row_is_one_line_per_grid_point_with_the_means_along_each_field():
  module = helpers.fake_experiment(
      {"fig": _tiny(sweep="cascade.penalty=0.1|0.2;cascade.beta_low=1.0|2.0")})
  table = plan.Table("fig", "a figure", "Paper, Fig. 1", ("accuracy",), (
      plan.Row("F", "3", "fake", "fig", published="Fig. 1: plotted only"),), "final", seeds=2)
  (program,) = plan.plan_table(table, {"fake": module}, seeds=2, scale=SCALE)
  assert len(program.runs) == 8 and program.config.sweep.startswith("cascade.penalty")
  value = lambda s: 0.1 * dict(s.point)["cascade.penalty"] + 0.01 * s.seed + \
      0.001 * dict(s.point)["cascade.beta_low"]
  records = {s.run_dir: _record(s.run_dir, s.seed, value(s)) for s in program.runs}
  data = render.tabulate(table, [program], records, {0: "Fig. 1: plotted only"},
                         {"seeds": 2, "fraction": "1"})
  assert [line["point"] for line in data["lines"]] == [
      {"cascade.penalty": p, "cascade.beta_low": b} for p in (0.1, 0.2) for b in (1.0, 2.0)]
  first = data["lines"][0]["metrics"]["accuracy"]["final"]
  assert first["values"] == pytest.approx([100 * (0.01 + 0.001), 100 * (0.01 + 0.01 + 0.001)])
  at = {(e["field"], e["value"]): e for e in data["swept_means"] if e["metric"] == "accuracy"}
  expected = [100 * (0.01 + 0.01 * s + 0.001 * b) for s in (0, 1) for b in (1.0, 2.0)]
  assert at[("cascade.penalty", 0.1)]["mean"] == pytest.approx(np.mean(expected))
  assert at[("cascade.penalty", 0.1)]["n"] == 4
  text = render.markdown(data)
  # the figure's words, the same for every line, are stated once instead of a column
  assert "- published: Fig. 1: plotted only" in text and text.count("plotted only") == 1
  assert "| F (penalty = 0.1, beta_low = 1) | 3 | 2 | 1.60 (0.50) |" in text  # the compact one
  assert "| F (penalty = 0.1, beta_low = 1) | 3 | 1.60 (0.50) / 2.10 | 2 |" in text
  assert "- F: penalty = 0.1, accuracy: " in text


def test_a_mig_table_states_each_estimators_factor_set():
  """MIG's result records the factors it averaged over (eval.mig_factors) per estimator: the
  table states them once when every line agrees, per line otherwise."""
  module = helpers.fake_experiment({"fig": _tiny(sweep="cascade.penalty=0.1|0.2")})
  table = plan.Table("fig", "a figure", "Paper, Fig. 1", ("mig",), (
      plan.Row("F", "3", "fake", "fig", published="Fig. 1: plotted only"),), "final", seeds=1)
  (program,) = plan.plan_table(table, {"fake": module}, seeds=1, scale=SCALE)
  chen = {"factor_set": "chen_et_al", "factor_names": ["scale", "orientation"]}
  every = {"factor_set": "all", "factor_names": ["shape", "scale", "orientation"]}

  def record(spec, sampled):
    rec = _record(spec.run_dir, spec.seed, 0.0)
    rec["results"]["metrics"] = {"mig": {"value": 0.2, "by_estimator": {
        "histogram": dict(every, value=0.2), "sampled": dict(sampled, value=0.1)}}}
    return rec

  same = {s.run_dir: record(s, chen) for s in program.runs}
  text = render.markdown(render.tabulate(table, [program], same, {}, {"seeds": 1, "fraction": "1"}))
  assert "factors, every line: histogram: all (shape, scale, orientation); sampled: " \
         "chen_et_al (scale, orientation)." in text
  mixed = {s.run_dir: record(s, chen if i == 0 else every) for i, s in enumerate(program.runs)}
  text = render.markdown(render.tabulate(table, [program], mixed, {},
                                         {"seeds": 1, "fraction": "1"}))
  assert "every line" not in text
  assert "- F (penalty = 0.2): histogram: all (shape, scale, orientation); sampled: all " \
         "(shape, scale, orientation)" in text


_HOLD = ("import fcntl, os, sys\n"
         "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\n"
         "os.pwrite(fd, str(os.getpid()).encode(), 0)\n"
         "print('held', flush=True)\n"
         "sys.stdin.read()\n")


@pytest.mark.slow
def test_a_workdir_in_use_is_refused_in_one_line_until_its_holder_ends(tmp_path):
  """Another process holds ``reproduce.lock``: the command line (run in this process) and
  `run_table` are refused in one line naming it (status 2), nothing of the table is written; once the holder is killed (the
  system releases its lock) the same call proceeds (here to its deadline, already past)."""
  from disentangle.train import preemption  # pylint: disable=g-import-not-at-top
  workdir = tmp_path / "w"
  workdir.mkdir()
  holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(workdir / run.LOCK)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline().strip() == "held"
    proc = helpers.run_in_process("experiments.reproduce", "--table=cascadevae_table3",
                                  "--seeds=2", "--fraction=1/50", f"--workdir={workdir}")
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr
    assert lines == [f"error: --workdir: {workdir} is in use by another experiments.reproduce "
                     f"(process {holder.pid}); wait for it to end or choose another --workdir"]
    table, modules, kwargs = helpers.tiny_table()
    with pytest.raises(plan.BadInput, match="is in use by another"):
      run.run_table(table, workdir, modules, **kwargs)
    assert [p.name for p in workdir.iterdir()] == [run.LOCK]
  finally:
    holder.kill()
    holder.wait()
  with pytest.raises(preemption.DeadlineReached) as e:
    run.run_table(table, workdir, modules, deadline=0.0, **kwargs)
  assert e.value.exit_status == 124
  assert str(e.value) == (f"stopped at the deadline before the training of program 1/1 "
                          f"(fake_lo); {workdir / 'table.md'} holds what is done; the same "
                          "command resumes")
  assert json.loads((workdir / "table.json").read_text())["lines"][0]["status"] != "evaluated"


@pytest.mark.slow
def test_a_table_stopped_at_its_deadline_writes_what_is_done_and_resumes(tmp_path, monkeypatch):
  """The deadline passes during the first step of the only program: training stops there with a
  checkpoint, table.md / table.json are written (the row not evaluated) and DeadlineReached says
  where; the same call without a deadline resumes, evaluates and fills the row."""
  from disentangle.train import preemption  # pylint: disable=g-import-not-at-top
  table, modules, kwargs = helpers.tiny_table()
  monkeypatch.setattr(preemption.Signals, "passed", lambda self: self.deadline is not None)
  with pytest.raises(preemption.DeadlineReached) as e:
    run.run_table(table, tmp_path, modules, deadline=4e9, **kwargs)
  program = tmp_path / "runs" / "fake_lo"
  assert str(e.value).startswith(
      f"stopped at the deadline in the training of program 1/1 (fake_lo) at step 1 of 4 "
      f"(checkpoint 1 in {program / 'checkpoints'}); {tmp_path / 'table.md'} holds what is done")
  assert (program / "checkpoints" / "1").is_dir()
  first = json.loads((tmp_path / "table.json").read_text())
  assert first["lines"][0]["status"] != "evaluated" and (tmp_path / "table.md").is_file()
  monkeypatch.undo()
  data = run.run_table(table, tmp_path, modules, **kwargs)
  assert data["lines"][0]["status"] == "evaluated"
  assert json.loads((tmp_path / "table.json").read_text())["lines"][0]["status"] == "evaluated"


def _two_programs():
  """`tests.helpers.tiny_table` with a second row of its own program (another latent size)."""
  table, modules, kwargs = helpers.tiny_table()
  lo = modules["fake"].get_config("lo")
  wide = lo.copy_and_resolve_references()
  wide.model.latent_dim = 4
  table = dataclasses.replace(table, rows=table.rows + (plan.Row("wide", "4", "fake", "wide"),))
  return table, {"fake": helpers.fake_experiment({"lo": lo, "wide": wide})}, kwargs


@pytest.mark.slow
def test_programs_run_alone_share_a_workdir_and_the_last_writes_the_table(tmp_path):
  """`run_program` of program 2 then of program 1 in one workdir: each writes only its folder,
  its lock and its record; the first leaves no table, the second (the last program) writes it
  with both rows evaluated, as `render_table` does again; an out-of-range number is one line."""
  table, modules, kwargs = _two_programs()
  kwargs = {k: v for k, v in kwargs.items() if k != "scale"}
  assert run.run_program(table, tmp_path, modules, 2, scale=SCALE, **kwargs) is None
  names = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("runs/*"))
  assert names == ["runs/fake_wide", "runs/fake_wide.json", "runs/fake_wide.lock"]
  assert not (tmp_path / "table.json").exists() and (tmp_path / run.RECORD).is_file()
  data = run.run_program(table, tmp_path, modules, "1", scale=SCALE, command="one", **kwargs)
  assert [line["status"] for line in data["lines"]] == ["evaluated", "evaluated"]
  assert json.loads((tmp_path / "table.json").read_text())["lines"] == json.loads(
      json.dumps(data["lines"]))
  assert json.loads((tmp_path / "runs" / "fake_lo.json").read_text())["commands"] == ["one"]
  programs = plan.plan_table(table, modules, seeds=1, scale=SCALE)
  again, missing = run.render_table(table, tmp_path, modules, programs, seeds=1, fraction=1,
                                    eval_points=0)
  assert missing == [] and again["lines"] == data["lines"]
  with pytest.raises(plan.BadInput, match=r"^--program: expected a program number from 1 to 2 "
                     r"\(as --dry_run prints them\), got 3$"):
    run.run_program(table, tmp_path, modules, 3, scale=SCALE, **kwargs)


def test_slurm_dry_run_prints_the_array_its_scripts_and_the_run_steps_per_task():
  """``--submit=slurm --dry_run`` (in this process): the array of every program with the
  requeue and the signal, a line per task with its run-steps, the total, the render task after
  the array; bad Slurm flags are one line naming the flag."""
  cli = functools.partial(helpers.run_in_process, "experiments.reproduce",
                          "--table=cascadevae_table3", "--seeds=2", "--fraction=1/50",
                          "--submit=slurm", "--dry_run")
  dry = cli("--slurm_parallel=3", "--slurm_time=2:00:00", "--slurm_gpus_per_task=1",
            "--slurm_options=--account=a --qos=q")
  assert dry.returncode == 0, dry.stderr
  out = dry.stdout
  for line in ("#SBATCH --array=1-4%3", "#SBATCH --requeue", "#SBATCH --signal=TERM@300",
               "#SBATCH --time=2:00:00", "#SBATCH --gpus-per-task=1", "#SBATCH --account=a",
               "#SBATCH --qos=q", "4 of 4 program(s) to run; estimated run-steps 17,104",
               "then the table, after the array (sbatch --dependency=afterany:<array>):"):
    assert line in out.splitlines(), (line, out)
  tasks = [line for line in out.splitlines() if line.startswith("task ") and "run-steps" in line]
  assert len(tasks) == 4 and sum(int(t.rpartition(" ")[2].replace(",", "")) for t in tasks) \
      == 17104
  assert out.rstrip().endswith("--render")
  rendered = cli("--dataset_source=render")  # the array's tasks and the table's task carry it
  commands = [line for line in rendered.stdout.splitlines() if "-m experiments.reproduce" in line]
  assert rendered.returncode == 0 and len(commands) == 2, rendered.stdout
  assert all("--dataset_source=render" in line for line in commands), commands
  for flag, value in (("slurm_time", "2 hours"), ("slurm_parallel", "-1"),
                      ("slurm_options", "account=a")):
    bad = cli(f"--{flag}={value}")
    lines = [line for line in bad.stderr.splitlines() if line.strip()]
    assert bad.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"error: --{flag}:"), \
        bad.stderr
