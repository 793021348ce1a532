"""The input pipeline: image-only batches as before, side information, the labelled stream."""
import json

import numpy as np
import pytest

from disentangle import config as config_lib
from disentangle import data
from disentangle.data import BatchSpec
from disentangle.data import LabelledSpec
from disentangle.data import files
from disentangle.data.labels import labelled
from disentangle.train import input_pipeline
from tests import golden_steps
from tests import helpers

N = 96


def _dataset(n=N):
  rng = np.random.default_rng(1)
  return data.ArrayImages(rng.integers(0, 256, (n, 4, 4, 1), dtype=np.uint8), np.arange(n) % 3,
                          name="toy", label_name="digit",
                          targets={"parity": np.arange(n) % 2},
                          attributes={"big": (np.arange(n) >= n // 2).astype(int)})


SPEC = BatchSpec(targets=("digit", "parity"), attributes=("big",),
                 labelled=LabelledSpec("random", 24, 8, seed=11))


def test_image_only_source_is_the_old_batch_source():
  want = json.loads(golden_steps.PATH.read_text())["batch_indices"]
  ds = helpers.TinyImages()
  source = input_pipeline.make_source(ds, data.IMAGES_ONLY, global_batch=golden_steps.BATCH,
                                      seed=3, process_index=0, process_count=1)
  assert type(source) is input_pipeline.BatchSource
  assert [source.global_indices(s).tolist() for s in (0, 1, 2, 3, 4, 31, 32, 33)] == want
  batch = source.local_batch(31)
  assert set(batch) == {"image"}
  np.testing.assert_array_equal(batch["image"], ds.images[want[5]])


def test_targets_and_attributes_are_those_of_the_image_rows():
  ds = _dataset()
  plain = input_pipeline.BatchSource(ds, global_batch=16, seed=4)
  source = input_pipeline.make_source(ds, BatchSpec(targets=("parity", "digit"),
                                                    attributes=("big",)),
                                      global_batch=16, seed=4)
  for step in (0, 5, 6):  # 6 crosses into the second epoch
    idx = plain.global_indices(step)
    batch = source.local_batch(step)
    assert set(batch) == {"image", "targets", "attributes"}
    np.testing.assert_array_equal(batch["image"], plain.local_batch(step)["image"])
    np.testing.assert_array_equal(batch["targets"], np.stack([idx % 2, idx % 3], 1))
    np.testing.assert_array_equal(batch["attributes"][:, 0], idx >= N // 2)
    assert batch["targets"].dtype == np.int32


def test_labelled_stream_distinct_members_of_the_subset_and_pure_in_seed_and_step():
  ds = _dataset()
  subset = labelled.labelled_subset(ds, "random", 24, 11)
  a = input_pipeline.make_source(ds, SPEC, global_batch=16, seed=0)
  b = input_pipeline.make_source(ds, SPEC, global_batch=16, seed=0)
  seen = set()
  for step in (7, 0, 3, 7):  # any order: resuming at a step gives that step's batch
    rows = a.labelled_indices(step)
    assert len(rows) == 8 and len(set(rows.tolist())) == 8
    assert set(rows.tolist()) <= set(subset.tolist())
    np.testing.assert_array_equal(rows, b.labelled_indices(step))
    batch = a.local_batch(step)
    np.testing.assert_array_equal(batch["labelled_image"], ds.get_images(rows))
    np.testing.assert_array_equal(batch["labelled_targets"], np.stack([rows % 3, rows % 2], 1))
    seen |= set(rows.tolist())
  assert not np.array_equal(a.labelled_indices(0), a.labelled_indices(3))
  # Another run seed: the same subset, another order; another subset seed: another subset.
  other = input_pipeline.make_source(ds, SPEC, global_batch=16, seed=1)
  np.testing.assert_array_equal(other.subset, subset)
  assert not np.array_equal(other.labelled_indices(0), a.labelled_indices(0))
  reseeded = BatchSpec(targets=SPEC.targets, labelled=LabelledSpec("random", 24, 8, seed=12))
  assert not np.array_equal(input_pipeline.make_source(ds, reseeded, global_batch=16,
                                                       seed=0).subset, subset)


@pytest.mark.parametrize("processes", [2, 4])
def test_process_shares_concatenate_to_the_global_batch(processes):
  ds = _dataset()
  whole = input_pipeline.make_source(ds, SPEC, global_batch=16, seed=2)
  parts = [input_pipeline.make_source(ds, SPEC, global_batch=16, seed=2, process_index=p,
                                      process_count=processes) for p in range(processes)]
  for step in (0, 9):
    want = whole.local_batch(step)
    got = [p.local_batch(step) for p in parts]
    assert len(got[0]["labelled_image"]) == 8 // processes
    for key in want:
      np.testing.assert_array_equal(np.concatenate([g[key] for g in got]), want[key], key)


def test_multi_seed_source_stacks_every_key():
  ds = _dataset()
  sources = [input_pipeline.make_source(ds, SPEC, global_batch=16, seed=s) for s in (5, 6)]
  stacked = input_pipeline.MultiSeedSource(sources).local_batch(3)
  assert set(stacked) == {"image", "targets", "attributes", "labelled_image", "labelled_targets"}
  for i, s in enumerate(sources):
    for key, value in s.local_batch(3).items():
      np.testing.assert_array_equal(stacked[key][i], value)


def test_make_source_checks_names_and_shares():
  ds = _dataset()
  with pytest.raises(config_lib.ConfigError, match=r"'targets'.*'colour'.*\['parity', 'digit'\]"):
    input_pipeline.make_source(ds, BatchSpec(targets=("colour",)), global_batch=16, seed=0)
  with pytest.raises(config_lib.ConfigError, match="'labelled.batch_size' \\(8\\).*3 processes"):
    input_pipeline.make_source(ds, BatchSpec(targets=("digit",), labelled=LabelledSpec(
        "first", 24, 8)), global_batch=12, seed=0, process_count=3)


def test_trainer_checks_the_methods_batch_spec_before_compiling(monkeypatch, tmp_path):
  from disentangle import methods  # pylint: disable=g-import-not-at-top
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  entry = methods.REGISTRY["betavae"]
  cls = getattr(entry, "cls", None) or entry[0]
  monkeypatch.setattr(cls, "batch_spec", classmethod(
      lambda c, config: BatchSpec(targets=("shoe_size",), fields=(("targets", "x.targets"),))),
      raising=False)
  config = helpers.tiny_config("betavae")
  with pytest.raises(config_lib.ConfigError, match=r"'x.targets'.*shoe_size.*\['parity', 'digit'"):
    trainer.train(config, tmp_path / "run", dataset=_dataset(32))


def _mnist_config(data_dir, split="test"):
  c = config_lib.base_config()
  c.dataset.name = "mnist"
  c.dataset.data_dir = str(data_dir)
  c.dataset.train_split = split
  return c


def test_explicit_data_dir_wins_and_the_run_says_which(monkeypatch, capsys, shared_data_dir,
                                                       tmp_path):
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv(files.DATA_DIR_ENV, str(tmp_path / "empty"))
  ds = trainer.load_training_data(_mnist_config(shared_data_dir))
  assert ds.num_examples == 10000
  line = capsys.readouterr().out
  assert f"from {shared_data_dir} (dataset.data_dir)" in line and "split='test'" in line
  with pytest.raises(files.MissingDataError):  # '' falls back to the environment variable
    trainer.load_training_data(_mnist_config(""))
  assert f"from {tmp_path / 'empty'} ($DISENTANGLE_DATA_DIR)" in capsys.readouterr().out
  with pytest.raises(config_lib.ConfigError, match="'dataset.train_split'.*'train', 'test'"):
    trainer.load_training_data(_mnist_config(shared_data_dir, "official_test"))


def test_prefetch_with_transfer_yields_the_transferred_plain_batches():
  """The trainer's fast path (device transfer on the prefetch thread) gives, step by step, the
  transfer of exactly the batches the plain prefetch yields; errors in it reach the consumer."""
  import jax  # pylint: disable=g-import-not-at-top
  source = input_pipeline.make_source(_dataset(), SPEC, global_batch=16, seed=5)
  plain = list(input_pipeline.prefetch(source, 3, 11))
  to_device = lambda b: jax.block_until_ready(jax.device_put(b))
  fast = list(input_pipeline.prefetch(source, 3, 11, transfer=to_device))
  assert [s for s, _ in plain] == [s for s, _ in fast] == list(range(3, 11))
  for (_, p), (_, f) in zip(plain, fast):
    assert set(p) == set(f)
    for k in p:
      assert isinstance(f[k], jax.Array)
      np.testing.assert_array_equal(np.asarray(f[k]), p[k])

  def broken(b):
    raise ValueError("transfer failed")
  with pytest.raises(ValueError, match="transfer failed"):
    list(input_pipeline.prefetch(source, 0, 4, transfer=broken))


def test_without_a_configured_folder_a_run_reads_the_user_folder(monkeypatch, capsys, tmp_path):
  """No dataset.data_dir and no $DISENTANGLE_DATA_DIR: the run's data: line names
  ~/disentangle_data; MNIST missing there is one error naming the folder, and so is dSprites on
  'auto' (the official file's path, one line); dSprites falls back to the renderer with its
  warning where the config asks for it ('render') or takes stand-ins (the smoke variants of the
  sets drawn from dSprites: ``synthetic_if_missing``)."""
  from disentangle import data as data_lib  # pylint: disable=g-import-not-at-top
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  monkeypatch.delenv(files.DATA_DIR_ENV, raising=False)
  monkeypatch.setenv("HOME", str(tmp_path))
  user_folder = tmp_path / "disentangle_data"
  with pytest.raises(files.MissingDataError, match=str(user_folder)):
    trainer.load_training_data(_mnist_config(""))
  line = capsys.readouterr().out
  assert f"from {user_folder} (default" in line and "$DISENTANGLE_DATA_DIR" in line
  config = _mnist_config("", split="train")
  config.dataset.name = "dsprites"
  with pytest.raises(files.MissingDataError) as refused:
    trainer.load_training_data(config)
  assert f"looked for {user_folder / files.DSPRITES_FILE} " in str(refused.value)
  assert "\n" not in str(refused.value) and "--config.dataset.source=render" in str(refused.value)
  for field, value in (("source", "render"), ("synthetic_if_missing", True)):
    stand_in = config_lib.copy(config)
    stand_in.dataset[field] = value
    with pytest.warns(data_lib.ProceduralDataWarning):
      ds = trainer.load_training_data(stand_in)
    assert ds.num_examples == 737_280 and ds.source == "render"
    assert f"from {user_folder} (default" in capsys.readouterr().out
  assert not user_folder.exists()  # nothing was written into the user's folder
