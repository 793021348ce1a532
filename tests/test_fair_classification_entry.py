"""experiments/fair_classification.py: the audit of a tiny FFVAE run, files written atomically,
checkpoints untouched, runs without b refused, bad targets rejected, process 0 only."""
import json

import jax
import pytest

from disentangle import config as config_lib
from disentangle.evaluation import fair_audit
from disentangle.train import trainer
from experiments import fair_classification as entry
from tests import helpers

SMALL = {"ffvae.fair.train_size": 96, "ffvae.fair.validation_size": 64,
         "ffvae.fair.test_size": 64, "ffvae.fair.batch_size": 32, "ffvae.fair.max_epochs": 3,
         "num_steps": 3, "mesh.num_devices": 1}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  workdir = tmp_path_factory.mktemp("ffvae")
  data = helpers.TinyAttributeImages()
  trainer.train(helpers.tiny_config("ffvae", **SMALL), workdir, dataset=data)
  return workdir, data


def _snapshot(workdir):
  return {p: p.stat().st_mtime_ns for p in (workdir / "checkpoints").rglob("*")}


@pytest.mark.slow
def test_audit_writes_rows_and_leaves_checkpoints_alone(run):
  workdir, data = run
  before = _snapshot(workdir)
  rows = fair_audit.audit_run(workdir, dataset=data)
  json_path, md_path = fair_audit.write(workdir, rows)
  assert _snapshot(workdir) == before
  saved = json.loads(json_path.read_text())
  assert [r["removed"] for r in saved] == [[], ["right"]]
  assert saved[1]["removed_dims"] == [1]  # latent_dim 3, b = ("right", "low") -> dims 1, 2
  assert all(r["settings"]["target"] == "low" and r["method"] == "ffvae" for r in saved)
  assert all(0.0 <= r["test_accuracy"] <= 1.0 and "right" in r["demographic_parity"]
             for r in saved)
  assert saved[0]["run"].startswith(workdir.name) and "alpha=10" in saved[0]["run"]
  text = md_path.read_text()
  assert "| run | target | removed |" in text and "ΔDP(right)" in text
  assert not list(workdir.glob("*.tmp*"))


@pytest.mark.slow
def test_flags_override_target_and_subgroup(run):
  workdir, data = run
  rows = fair_audit.audit_run(workdir, dataset=data, target="right", subgroup=("low",))
  assert rows[1]["removed"] == ["low"] and rows[1]["removed_dims"] == [2]
  with pytest.raises(config_lib.ConfigError, match="ffvae.fair.target"):
    fair_audit.audit_run(workdir, dataset=data, target="right", subgroup=("right",))
  with pytest.raises(config_lib.ConfigError, match="ffvae.fair.subgroup"):
    fair_audit.audit_run(workdir, dataset=data, subgroup=("tall",))


@pytest.mark.slow
def test_run_without_b_is_refused_naming_run_and_method(tmp_path):
  data = helpers.TinyImages()
  trainer.train(helpers.tiny_config("betavae", **{"num_steps": 3}), tmp_path / "beta",
                dataset=data)
  with pytest.raises(ValueError, match=r"beta.*'betavae'.*no sensitive dimensions"):
    fair_audit.audit_run(tmp_path / "beta", dataset=data)


@pytest.mark.slow
def test_main_writes_on_process_zero_only(run, monkeypatch):
  workdir, data = run
  for name in ("fairness.json", "fairness.md"):
    (workdir / name).unlink(missing_ok=True)
  monkeypatch.setattr(jax, "process_index", lambda: 1)
  with helpers.flags_of_one_command(entry.__name__):  # its --workdir beside the trainer's
    try:
      entry.main(["prog", f"--workdir={workdir}"])
    except SystemExit as e:
      assert e.code in (0, None)
  assert not (workdir / "fairness.json").exists()
