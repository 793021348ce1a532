"""Bad configs fail before compilation with an error naming the field."""
import importlib
import re
import subprocess
import sys

import ml_collections
import pytest

from disentangle import config as config_lib
from disentangle import methods
from tests import helpers


def cfg():
  return importlib.import_module("experiments.configs.dsprites_betavae").get_config("smoke")


@pytest.mark.parametrize("field,value,expect", [
    ("betavae.beta", -1.0, "betavae.beta"),
    ("batch_size", 0, "batch_size"),
    ("num_steps", -5, "num_steps"),
    ("model.init", "xavier", "model.init"),
    ("model.architecture", "tf", "model.architecture"),
    ("seed_layout", "grouped", "seed_layout"),
    ("eval.use_discrete", "always", "eval.use_discrete"),
    ("eval.estimators", "sklearn2018", "eval.estimators"),
    ("model.likelihood", "gauss", "model.likelihood"),
    ("eval.select", "best", "eval.select"),
    ("optimizer.learning_rate", 0.0, "optimizer.learning_rate"),
    ("optimizer.learning_rate", float("nan"), "optimizer.learning_rate"),
    # retired after a measurement (config.RETIRED_VALUES): the allowed values named
    ("model.conv_impl", "phase", "'model.conv_impl' must be one of ['auto', 'flax', 'fast', 'gemm']"),
    ("model.precision", "high", "'model.precision' must be one of ['default', 'highest']"),
])
def test_impossible_values_name_the_field(field, value, expect):
  c = cfg()
  parent, leaf = field.rsplit(".", 1) if "." in field else ("", field)
  node = c[parent] if parent else c
  with c.unlocked():
    node[leaf] = value
  with pytest.raises(config_lib.ConfigError, match=re.escape(expect)):
    methods.validate(c)


def test_wrong_type_names_the_field():
  c = cfg()
  with c.unlocked(), c.ignore_type():
    c.batch_size = "64"
  with pytest.raises(config_lib.ConfigError, match="'batch_size' must be int"):
    methods.validate(c)


def test_unknown_field_is_rejected():
  c = cfg()
  with c.unlocked():
    c.model.latent_dims = 4
  with pytest.raises(config_lib.ConfigError, match="unknown config field 'model.latent_dims'"):
    methods.validate(c)


def test_unknown_method():
  c = cfg()
  with c.unlocked():
    c.method = "nope"
  with pytest.raises(config_lib.ConfigError, match="'method'"):
    methods.validate(c)


def test_variant_overrides_and_unknown_variant():
  mod = importlib.import_module("experiments.configs.dsprites_cascade")
  c = mod.get_config("m4,seed=3,cascade.penalty=0.5")
  assert (c.model.latent_dim, c.cascade.beta_low, c.seed, c.cascade.penalty) == (4, 2.0, 3, 0.5)
  with pytest.raises(config_lib.ConfigError, match="unknown variant"):
    mod.get_config("m7")
  with pytest.raises(config_lib.ConfigError, match="unknown config field 'cascade.lambda'"):
    mod.get_config("cascade.lambda=1")


def test_paper_settings_of_cascade_configs():
  d = importlib.import_module("experiments.configs.dsprites_cascade").get_config("")
  assert (d.cascade.num_discrete, d.cascade.penalty, d.cascade.relieve_every,
          d.cascade.discrete_start, d.num_steps, d.optimizer.learning_rate) == (
              3, 0.001, 20_000, 100_000, 300_000, 3e-4)
  m = importlib.import_module("experiments.configs.mnist_cascade").get_config("")
  assert (m.cascade.num_discrete, m.cascade.penalty, m.cascade.relieve_every,
          m.cascade.discrete_start, m.num_steps, m.optimizer.learning_rate) == (
              10, 0.1, 10_000, 0, 120_000, 3e-4)
  assert m.cascade.beta_low == 1.0  # the paper's stated CascadeVAE value (m = 6); MNIST: unstated
  b2 = importlib.import_module("experiments.configs.mnist_cascade").get_config("m10,betal2")
  assert b2.cascade.beta_low == 2.0 and b2.num_steps == m.num_steps
  f = importlib.import_module("experiments.configs.fashion_mnist_cascade").get_config("m4")
  assert (f.dataset.name, f.optimizer.learning_rate, f.model.latent_dim) == (
      "fashion_mnist", 1e-4, 4)
  ch = importlib.import_module("experiments.configs.chairs_cascade").get_config("")
  assert (ch.cascade.penalty, ch.cascade.discrete_start, ch.num_steps) == (0.01, 60_000, 150_000)


def test_unknown_field_hint_names_the_nearest_field():
  mod = importlib.import_module("experiments.configs.dsprites_cascade")
  with pytest.raises(config_lib.ConfigError,
                     match=r"unknown config field 'casade\.penalty' \(did you mean 'cascade\.penalty'\?\)"):
    mod.get_config("casade.penalty=1")


BETAVAE = "--config=experiments/configs/dsprites_betavae.py:smoke"


BAD_COMMAND_LINES = [
    ([BETAVAE, "--config.casade.penalty=1"], "unknown config field 'casade.penalty'"),
    ([BETAVAE, "--config.betavae.betaa=2"], "did you mean 'betavae.beta'"),
    ([BETAVAE + ",casade.penalty=1"], "unknown config field 'casade.penalty'"),
    ([BETAVAE, "--config.batch_size=abc"], "'batch_size': cannot parse 'abc'"),
    ([BETAVAE + "x"], "unknown variant(s) ['smokex']"),
    ([BETAVAE, "--config.batch_size=0"], "'batch_size' must be > 0"),  # found by the trainer
]


def _assert_one_line(r, expect, workdir):
  assert r.returncode == 2, r.stderr
  assert "Traceback" not in r.stderr
  lines = r.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: ") and expect in lines[0], r.stderr
  assert not workdir.exists()


@pytest.mark.parametrize("args,expect", BAD_COMMAND_LINES)
def test_bad_command_line_is_one_line_and_creates_nothing(tmp_path, args, expect):
  """A new user's typo: one line on stderr naming the field, no traceback, no run directory
  (the entry point run in this process)."""
  workdir = tmp_path / "run"
  _assert_one_line(helpers.run_in_process("experiments.dsprites_betavae", *args,
                                          f"--workdir={workdir}"), expect, workdir)


@pytest.mark.slow
@pytest.mark.parametrize("args,expect", [BAD_COMMAND_LINES[0], BAD_COMMAND_LINES[-1]],
                         ids=["while_flags_are_parsed", "by_the_validation"])
def test_bad_command_line_in_its_own_process_is_one_line(tmp_path, args, expect):
  """The same in a fresh interpreter, whose whole stderr is the one line: a field refused while
  the flags are parsed, and a value refused by the validation (`command_line.exits`)."""
  workdir = tmp_path / "run"
  r = subprocess.run([sys.executable, "-m", "experiments.dsprites_betavae", *args,
                      f"--workdir={workdir}"], cwd=helpers.REPO, capture_output=True, text=True,
                     timeout=300)
  _assert_one_line(r, expect, workdir)


def test_missing_data_is_one_message_and_creates_nothing(tmp_path):
  """A set that is not on disk: the error names the file, no traceback, no run directory."""
  workdir = tmp_path / "run"
  r = helpers.run_in_process("experiments.chairs_cascade",
                             "--config=experiments/configs/chairs_cascade.py",
                             f"--config.dataset.data_dir={tmp_path / 'empty'}",
                             f"--workdir={workdir}")
  assert r.returncode == 2, r.stderr
  assert "Traceback" not in r.stderr
  assert r.stderr.startswith("error: ") and "chairs" in r.stderr, r.stderr
  assert not workdir.exists()


@pytest.mark.parametrize("in_process", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_a_paper_variant_without_the_dsprites_file_stops_in_one_line(tmp_path, monkeypatch,
                                                                     in_process):
  """CascadeVAE Table 1's m6 with an empty data folder (no official dSprites file, no download):
  one line saying where the file was looked for, its URL and how to train on the renderer on
  purpose, exit status 2, before anything is compiled or created; in this process and in its
  own, whose whole stderr is that line. The smoke variants train on the renderer (their runs in
  tests/test_command_line.py, tests/test_write_faults.py, ...)."""
  from disentangle.data import files  # pylint: disable=g-import-not-at-top
  data, workdir = tmp_path / "data", tmp_path / "run"
  data.mkdir()
  monkeypatch.setenv(files.DATA_DIR_ENV, str(data))
  monkeypatch.setenv(files.NO_DOWNLOAD_ENV, "1")
  args = ["--config=experiments/configs/dsprites_cascade.py:m6", f"--workdir={workdir}"]
  monkeypatch.setattr(methods, "build", lambda *a, **k: pytest.fail("a model was built"))
  r = (helpers.run_in_process("experiments.dsprites_cascade", *args) if in_process else
       subprocess.run([sys.executable, "-m", "experiments.dsprites_cascade", *args],
                      cwd=helpers.REPO, capture_output=True, text=True, timeout=120))
  spec = files.FILES[files.DSPRITES_FILE]
  _assert_one_line(r, f"looked for {data / spec.relpath} (downloads are disabled", workdir)
  for words in (spec.urls[0], "--config.dataset.source=render", "--dataset_source=render",
                "not comparable with published numbers"):
    assert words in r.stderr, r.stderr
  assert list(data.iterdir()) == []


def test_auto_implementation_choices_resolve_per_backend():
  """'auto' keeps the CPU's measured choices, the GPU's convolutions without stuffed operands, and
  the fewer-operation ones elsewhere."""
  from disentangle import config as config_lib  # pylint: disable=g-import-not-at-top
  assert config_lib.resolve("model.conv_impl", "auto", "cpu") == "fast"
  assert config_lib.resolve("model.conv_impl", "auto", "gpu") == "gemm"
  assert config_lib.resolve("model.conv_impl", "auto", "tpu") == "flax"
  assert config_lib.resolve("cascade.unary_batching", "auto", "cpu") == "per_class"
  assert config_lib.resolve("cascade.unary_batching", "auto", "tpu") == "stacked"
  assert config_lib.resolve("model.conv_impl", "flax", "cpu") == "flax"


def test_dotted_fields_are_read_and_written_through_one_walker():
  c = cfg()
  assert config_lib.get_field(c, "dataset.placement") == c.dataset.placement == "auto"
  assert config_lib.has_field(c, "betavae.beta") and not config_lib.has_field(c, "betavae.bta")
  assert not config_lib.has_field(c, "seed.x")  # a field is not a section
  with c.unlocked():
    config_lib.set_field(c, "eval.estimators", "study2019")
  assert c.eval.estimators == "study2019"
  with pytest.raises(config_lib.ConfigError, match="did you mean 'eval.estimators'"):
    config_lib.get_field(c, "eval.estimator")
  flat = dict(config_lib.flatten(c))
  assert flat["dataset.unfair_size"] == 737_280 and "dataset" not in flat
  assert all(config_lib.get_field(c, k) == v for k, v in flat.items())


def test_the_allowed_values_are_the_rules_and_the_first_is_the_default():
  base = config_lib.base_config()
  for field, values in [("dataset.placement", config_lib.PLACEMENTS),
                        ("dataset.source", config_lib.SOURCES),
                        ("dataset.variant_draw", config_lib.VARIANT_DRAWS),
                        ("eval.estimators", config_lib.ESTIMATORS)]:
    ok, _ = config_lib.RULES[field]
    assert all(ok(v) for v in values) and not ok("other"), field
    assert config_lib.get_field(base, field) == values[0], field
  ok, _ = config_lib.RULES["dataset.name"]
  assert all(ok(n) for n in config_lib.DATASETS + config_lib.TFDS_ONLY_DATASETS)
  assert {k: base.dataset[k] for k in config_lib.UNFAIR_DEFAULTS} == config_lib.UNFAIR_DEFAULTS


def test_a_saved_config_missing_fields_is_filled_from_the_schema():
  schema = methods.schema("betavae")
  saved = ml_collections.ConfigDict({"method": "betavae", "seed": 3,
                                     "dataset": {"name": "mnist"}, "gone": 1})
  filled = config_lib.fill_missing(saved, schema)
  assert filled.seed == 3 and filled.dataset.name == "mnist" and filled.gone == 1
  assert filled.dataset.placement == "auto" and filled.betavae.beta == schema.betavae.beta
  assert set(dict(config_lib.flatten(filled))) == set(dict(config_lib.flatten(schema))) | {"gone"}
  with pytest.raises(config_lib.ConfigError, match="'gone'"):  # still named by validation
    methods.validate(filled)


def test_a_saved_config_with_a_retired_option_reads_as_the_run_it_was():
  """A run directory written before an option was retired (config.RETIRED_FIELDS,
  RETIRED_VALUES) loads and validates; a new config naming the retired field is refused."""
  schema = methods.schema("cascadevae")
  saved = ml_collections.ConfigDict({"method": "cascadevae", "cascade": {"reuse_passes": False},
                                     "model": {"conv_impl": "phase", "precision": "high"}})
  filled = config_lib.fill_missing(saved, schema)
  assert "reuse_passes" not in filled.cascade
  assert (filled.model.conv_impl, filled.model.precision) == ("gemm", "highest")
  assert filled.assignment_placement == "step"  # written before the placement was a choice
  methods.validate(filled)
  with schema.unlocked():
    schema.cascade.reuse_passes = True
  with pytest.raises(config_lib.ConfigError, match="unknown config field 'cascade.reuse_passes'"):
    methods.validate(schema)


@pytest.mark.parametrize("saved, want", [({"assignment_overlap": True}, "overlapped"),
                                         ({"assignment_overlap": False}, "step"),
                                         ({}, "step"),
                                         ({"assignment_placement": "auto"}, "auto")])
def test_the_overlap_switch_reads_as_the_placement_it_chose(saved, want):
  """``assignment_overlap`` (True / False) became ``assignment_placement``: a saved config reads
  as the placement it ran, one written before either as the step's; a new config naming the old
  field is refused."""
  schema = methods.schema("cascadevae")
  filled = config_lib.fill_missing(ml_collections.ConfigDict({"method": "cascadevae", **saved}),
                                   schema, "gpu")
  assert "assignment_overlap" not in filled
  assert filled.assignment_placement == (config_lib.resolve("assignment_placement", want, "gpu"))
  methods.validate(filled)
  with schema.unlocked():
    schema.assignment_overlap = True
  with pytest.raises(config_lib.ConfigError, match="unknown config field 'assignment_overlap'"):
    methods.validate(schema)


def test_a_run_config_holds_its_resolved_values_and_what_was_asked():
  """`config.resolve_run` decides every backend 'auto' once; ``config.json`` (`to_json` with the
  config as asked) holds the resolved values and, under ``requested``, the 'auto'; read back
  (`fill_missing`) it is the resolved config, and one written before holds 'auto' resolves alike."""
  import json  # pylint: disable=g-import-not-at-top
  asked = methods.schema("cascadevae")
  resolved = config_lib.resolve_run(asked, "cpu", placement="device")
  assert config_lib.resolve_run(resolved, "cpu", placement="device") is resolved  # once
  want = {"model.conv_impl": "fast", "cascade.unary_batching": "per_class",
          "seed_layout": "unroll", "assignment_placement": "step", "dataset.placement": "device"}
  assert set(want) == set(config_lib.RESOLVED_FIELDS)
  assert {f: config_lib.get_field(resolved, f) for f in want} == want
  saved = json.loads(config_lib.to_json(resolved, requested=asked))
  assert saved["requested"] == {"model": {"conv_impl": "auto"}, "seed_layout": "auto",
                                "assignment_placement": "auto",
                                "cascade": {"unary_batching": "auto"},
                                "dataset": {"placement": "auto"}}
  read = config_lib.fill_missing(ml_collections.ConfigDict(saved), asked, "cpu")
  methods.validate(read)
  assert dict(config_lib.flatten(read)) == dict(config_lib.flatten(resolved))
  old = config_lib.fill_missing(ml_collections.ConfigDict(asked.to_dict()), asked, "cpu")
  assert {f: config_lib.get_field(old, f) for f in want} == dict(want, **{
      "dataset.placement": "auto"})  # placement: decided from the data when a run is set up


def test_a_copy_is_the_dict_rebuilt_unlocked_and_independent():
  config = methods.schema("betavae")
  config.eval.num_points = ml_collections.FieldReference(123)
  config.lock()
  out = config_lib.copy(config)
  assert out.to_dict() == ml_collections.ConfigDict(config.to_dict()).to_dict()
  assert out.eval.num_points == 123 and not out.is_locked and not out.eval.is_locked
  out.eval.num_points, out.model.latent_dim, out.new_field = 7, 99, 1
  config.eval.num_points = 5
  assert (config.eval.num_points, config.model.latent_dim, "new_field" in config) == (5, 10, False)
  assert out.eval.num_points == 7


def test_a_sweep_validates_each_point_once_and_plain_seeds_not_again(monkeypatch):
  from disentangle.train import runs  # pylint: disable=g-import-not-at-top
  calls = []
  real = methods.validate
  monkeypatch.setattr(methods, "validate", lambda c: calls.append(c.betavae.beta) or real(c))
  c = cfg()
  with c.unlocked():
    c.num_seeds = 3
  assert len(runs.run_configs(c)) == 3 and calls == []
  with c.unlocked():
    c.sweep = "betavae.beta=1|2"
  assert len(runs.run_configs(c)) == 6 and calls == [1.0, 2.0]
  with c.unlocked():
    c.sweep = "betavae.beta=1|-2"
  with pytest.raises(config_lib.ConfigError, match="betavae.beta"):
    runs.run_configs(c)
