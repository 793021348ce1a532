"""PartedVAE configs: Table 6 per variant, every variant valid, smoke runs, every bad input named."""
import importlib

import numpy as np
import pytest

from disentangle import config as config_lib
from disentangle import methods
from disentangle.data import files
from disentangle.data.datasets import celeba
from disentangle.data.datasets import synthetic
from disentangle.methods import partedvae_config
from disentangle.train import input_pipeline
from disentangle.train import mesh as mesh_lib
from disentangle.train import trainer
from tests import helpers

MODULES = ("mnist_parted", "dsprites_parted", "celeba_parted")


def _module(name):
  return importlib.import_module(f"experiments.configs.{name}")


def _settings(c):
  p = c.parted
  return dict(latent_dim=c.model.latent_dim, sizes=tuple(p.discrete_sizes), u_dim=p.u_dim,
              lr=c.optimizer.learning_rate,
              gammas=(p.gamma_c, p.gamma_h, p.gamma_z, p.gamma_u, p.gamma_bc),
              delta=p.bc_threshold,
              z_cap=(p.z_capacity_min, p.z_capacity_max, p.z_capacity_steps),
              u_cap=(p.u_capacity_min, p.u_capacity_max, p.u_capacity_steps),
              likelihood=c.model.likelihood, num_steps=c.num_steps, batch=c.batch_size,
              adam=(c.optimizer.b1, c.optimizer.b2, c.optimizer.eps))


def test_table6_settings_of_every_variant():
  mn = _module("mnist_parted")
  for v in ("", "labels256", "classifier256"):
    c = mn.get_config(v)
    assert _settings(c) == dict(
        latent_dim=6, sizes=(10,), u_dim=10, lr=1.5e-3, gammas=(15.0, 30.0, 15.0, 15.0, 30.0),
        delta=0.15, z_cap=(0.0, 7.0, 100_000), u_cap=(0.0, 7.0, 100_000),
        likelihood="bernoulli", num_steps=56_280, batch=64, adam=(0.9, 0.999, 1e-8))
    assert (c.parted.num_labelled, c.parted.labelled_subset, c.parted.labelled_batch_size,
            tuple(c.parted.targets), c.model.encoder_widths, c.parted.prior_c) == (
                256, "first", 64, ("digit",), "dupont", ())
    assert c.parted.unsupervised == (v != "classifier256")
  assert mn.PUBLISHED == {"labels256": {"accuracy_direct": {"mean": 95.0}},
                          "classifier256": {"accuracy_direct": {"mean": 83.0}}}
  ds = _module("dsprites_parted")
  published = {"unsup": (0, 77.5, 2.0), "labels100": (100, 62.6, 4.0),
               "labels737": (737, 71.8, 3.0), "labels1000": (1000, 73.5, 4.0),
               "labels3686": (3686, 88.1, 11.0), "labels10000": (10_000, 90.5, 10.0),
               "labels3686_no_bc": (3686, 82.9, None)}
  for v, (n, mean, std) in published.items():
    c = ds.get_config(v)
    gamma_bc = 0.0 if v.endswith("no_bc") else 10.0
    assert _settings(c) == dict(
        latent_dim=5, sizes=(3,), u_dim=1, lr=5e-4, gammas=(100.0, 10.0, 50.0, 50.0, gamma_bc),
        delta=0.1, z_cap=(0.0, 30.0, 300_000), u_cap=(0.0, 5.0, 300_000),
        likelihood="bernoulli", num_steps=345_600, batch=64, adam=(0.9, 0.999, 1e-8))
    assert c.parted.num_labelled == n and c.parted.prior_c == ((0.33, 0.33, 0.34),)
    assert (c.parted.labelled_subset, c.parted.plateau_patience) == ("dsprites_stratified", 1)
    entry = ds.PUBLISHED[v]["factor_score_partedvae"]
    assert entry["mean"] == mean and entry.get("std") == std
  ce = _module("celeba_parted").get_config("")
  assert _settings(ce) == dict(
      latent_dim=10, sizes=(4, 3, 2, 3, 2, 2, 2, 2), u_dim=1, lr=5e-4,
      gammas=(2000.0, 10.0, 1000.0, 1000.0, 500.0), delta=0.2, z_cap=(0.0, 30.0, 125_000),
      u_cap=(0.0, 15.0, 125_000), likelihood="l1", num_steps=80 * 2544, batch=64,
      adam=(0.9, 0.999, 1e-8))
  assert ce.parted.num_labelled == 814 and ce.dataset.train_split == "official_train"
  assert tuple(ce.parted.targets) == tuple(n for n, _ in celeba.PARTED_VARIABLES)
  for vec, authors in zip(ce.parted.prior_c, _module("celeba_parted").AUTHORS_PRIOR_C):
    np.testing.assert_allclose(vec, np.asarray(authors) / sum(authors), rtol=1e-12)


def test_cpu_variants_end_the_schedules_at_the_same_fraction():
  for name in ("mnist_parted", "dsprites_parted"):
    full, cpu = _module(name).get_config(""), _module(name).get_config("cpu")
    for field in ("z_capacity_steps", "u_capacity_steps"):
      assert cpu.parted[field] / cpu.num_steps == full.parted[field] / full.num_steps
    assert abs(cpu.parted.plateau_epoch_steps / cpu.num_steps
               - full.parted.plateau_epoch_steps / full.num_steps) < 1e-4
  assert _module("mnist_parted").get_config("cpu").num_steps == 11_256


@pytest.mark.slow
@pytest.mark.parametrize("name", MODULES)
def test_smoke_builds_and_runs_one_step(name, tmp_path, monkeypatch):
  monkeypatch.setenv("DISENTANGLE_SYNTHETIC_DIR", str(tmp_path / "synthetic"))
  c = _module(name).get_config("smoke,num_steps=1,mesh.num_devices=1,progress_bar=false")
  state = trainer.train(c, tmp_path / "run")
  assert int(state.step) == 1


# -- bad input ----------------------------------------------------------------------------------
BAD = [
    ({"parted.discrete_sizes": ()}, "parted.discrete_sizes"),
    ({"parted.discrete_sizes": (4, 1)}, "parted.discrete_sizes"),
    ({"parted.u_dim": 0}, "parted.u_dim"),
    ({"model.latent_dim": 0}, "model.latent_dim"),
    ({"parted.prior_c": ((0.5, 0.5), (0.5, 0.5))}, "parted.prior_c"),
    ({"parted.prior_c": ((0.5, 0.5),)}, "parted.prior_c"),
    ({"parted.prior_c": ((-0.5, 0.5, 0.5, 0.5),)}, "parted.prior_c"),
    ({"parted.prior_c": ((0.3, 0.3, 0.3, 0.099),)}, "parted.prior_c"),
    ({"parted.gamma_bc": -1.0}, "parted.gamma_bc"),
    ({"parted.gamma_h": -1.0}, "parted.gamma_h"),
    ({"parted.bc_threshold": 1.0}, "parted.bc_threshold"),
    ({"parted.bc_threshold": -0.1}, "parted.bc_threshold"),
    ({"parted.z_capacity_min": 2.0, "parted.z_capacity_max": 1.0}, "parted.z_capacity_max"),
    ({"parted.u_capacity_steps": 0}, "parted.u_capacity_steps"),
    ({"parted.temperature": 0.0}, "parted.temperature"),
    ({"parted.sharpness_start": 2.0, "parted.sharpness_max": 1.0}, "parted.sharpness_max"),
    ({"parted.num_labelled": 4}, "parted.num_labelled"),
    ({"parted.targets": ("label", "label")}, "parted.targets"),
    ({"parted.labelled_subset": "every_other"}, "parted.labelled_subset"),
    ({"parted.qc_scope": "shard"}, "parted.qc_scope"),
    ({"parted.u_kl": "mean"}, "parted.u_kl"),
    ({"model.likelihood": "l2"}, "model.likelihood"),
]


@pytest.mark.parametrize("overrides,field", BAD)
def test_bad_input_names_the_field(overrides, field):
  with pytest.raises(config_lib.ConfigError, match=field.replace(".", r"\.")):
    methods.validate(helpers.parted_config(**overrides))


def test_unknown_rule_lists_the_valid_ones():
  with pytest.raises(config_lib.ConfigError, match="dsprites_stratified"):
    methods.validate(helpers.parted_config(**{"parted.labelled_subset": "every_other"}))


def _spec(config):
  return methods.spec("partedvae").cls.batch_spec(config)


def test_dataset_dependent_bad_input():
  data = helpers.TinyDigits(n=64)
  # more labelled rows than the training set holds
  with pytest.raises(config_lib.ConfigError, match="parted.num_labelled"):
    input_pipeline.make_source(data, _spec(helpers.parted_config(**{"parted.num_labelled": 65})),
                               global_batch=8, seed=0)
  # a label name the dataset lacks, listing the valid names; a dataset without labels (Chairs)
  with pytest.raises(config_lib.ConfigError, match=r"parted\.targets.*\['label'\]"):
    input_pipeline.make_source(data, _spec(helpers.parted_config(**{"parted.targets": ("digit",)})),
                               global_batch=8, seed=0)
  with pytest.raises(config_lib.ConfigError, match=r"parted\.targets.*no targets"):
    input_pipeline.make_source(helpers.TinyImages(), _spec(helpers.parted_config()), global_batch=8,
                               seed=0)
  # a label class >= its variable's size (4 classes into a variable of 3)
  with pytest.raises(config_lib.ConfigError, match=r"parted\.targets.*4 classes"):
    partedvae_config.check_data(helpers.parted_config(**{"parted.discrete_sizes": (3,)}), data)
  partedvae_config.check_data(helpers.parted_config(), data)  # 4 classes into 4: fine


def test_labelled_batch_must_divide_the_devices():
  config = helpers.parted_config(**{"parted.labelled_batch_size": 12, "parted.num_labelled": 16})
  methods.validate(config)
  with pytest.raises(config_lib.ConfigError, match="parted.labelled_batch_size"):
    methods.build(config, (32, 32, 1), mesh=mesh_lib.make_mesh(8))
  methods.build(config, (32, 32, 1), mesh=mesh_lib.make_mesh(4))


def test_missing_celeba_labels_file_names_the_path(tmp_path):
  config = _module("celeba_parted").get_config(
      f"dataset.data_dir={tmp_path},parted.require_labels_file=true")
  methods.validate(config)
  with pytest.raises(files.MissingDataError, match=str(tmp_path / "celeba" / "parted_labels.csv")):
    methods.build(config, (64, 64, 3))


# -- CelebA variables ---------------------------------------------------------------------------
def test_celeba_parted_variables_from_the_attributes_and_the_labels_file(tmp_path):
  synthetic.write_celeba(tmp_path, num_images=48)
  ds = celeba.load_celeba(tmp_path, "all")
  names = [n for n, _ in celeba.PARTED_VARIABLES]
  assert ds.target_sizes == dict(celeba.PARTED_VARIABLES)
  rows = np.arange(48)
  y = ds.targets_of(rows, names)
  a = lambda n: ds.attributes_of(rows, [n])[:, 0]  # noqa: E731
  for i in rows:
    hair = [a(h)[i] for h in ("Black_Hair", "Brown_Hair", "Blond_Hair", "Gray_Hair")]
    assert y[i, 0] == (hair.index(1) if sum(hair) == 1 else -1)
    beard = 1 if a("5_o_Clock_Shadow")[i] else (0 if a("No_Beard")[i] else 2)
    assert y[i, 3] == beard
  np.testing.assert_array_equal(y[:, 1], -1)  # skin tone: no labels file
  for k, attr in ((2, "Bangs"), (4, "Receding_Hairline"), (5, "Smiling"), (6, "Eyeglasses"),
                  (7, "Male")):
    np.testing.assert_array_equal(y[:, k], a(attr))
  # the authors' format: one-hot blocks of 20 columns, rows = the first training images
  hand = np.zeros((3, 20), int)
  hand[0, 4 + 2] = 1       # image 0: skin tone class 2
  hand[1, 4 + 0] = 1       # image 1: skin tone class 0
  hand[1, 0 + 3] = 1       # image 1: hair colour gray
  np.savetxt(celeba.parted_labels_path(tmp_path), hand, fmt="%d", delimiter=",")
  with_file = celeba.load_celeba(tmp_path, "all").targets_of(rows, names)
  assert with_file[0, 1] == 2 and with_file[1, 1] == 0 and with_file[1, 0] == 3
  np.testing.assert_array_equal(with_file[2:, 1], -1)
  np.testing.assert_array_equal(with_file[2:], y[2:])
  np.testing.assert_array_equal(with_file[0, [0, 2, 3, 4, 5, 6, 7]], y[0, [0, 2, 3, 4, 5, 6, 7]])
  bad = tmp_path / "celeba" / "parted_labels.csv"
  np.savetxt(bad, np.ones((2, 5)), fmt="%d", delimiter=",")
  with pytest.raises(files.DataFileError, match="20"):
    celeba.load_celeba(tmp_path, "all")


def test_trainer_rejects_a_label_class_beyond_its_variable_before_creating_anything(tmp_path):
  config = helpers.parted_config(**{"parted.discrete_sizes": (3,), "mesh.num_devices": 1})
  with pytest.raises(config_lib.ConfigError, match=r"parted\.targets.*4 classes"):
    trainer.train(config, tmp_path / "run", dataset=helpers.TinyDigits(n=64))
  assert not (tmp_path / "run").exists()
