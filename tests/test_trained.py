"""The trained-model API (`disentangle.trained`): encode, decode, reconstruct and traverse against
the method's own functions (CascadeVAE's and PartedVAE's); export and load round trips; a run of
several chosen by its seed; damaged or mismatched inputs refused in one line; the shipped models
against the MNIST test labels."""
import json

import jax
import numpy as np
import pytest

import disentangle
from disentangle import config as config_lib
from disentangle import data
from disentangle import methods
from disentangle import trained
from disentangle.data import loading
from disentangle.metrics import accuracy
from disentangle.metrics import clustering
from disentangle.train import checkpoint
from experiments.configs import mnist_cascade
from experiments.configs import mnist_parted

SHAPE = (32, 32, 1)
SEEDS = (3, 4)


@pytest.fixture(scope="module")
def model():
  config = mnist_cascade.get_config("smoke")
  method = methods.build(config, SHAPE)
  params = jax.device_get(method.init(jax.random.key(3)).params)
  return trained.TrainedModel(config, params, 7, SHAPE, "hand-made")


@pytest.fixture(scope="module")
def parted_runs(tmp_path_factory):
  """A workdir of two MNIST PartedVAE runs (seeds 3 and 4) as the trainer lays one out: each
  run's ``config.json`` in ``seed_<s>/``, their stacked initial states as the checkpoint of step
  1 in ``checkpoints/``."""
  config, workdir = mnist_parted.get_config("smoke"), tmp_path_factory.mktemp("runs")
  for seed in SEEDS:
    run = config_lib.copy(config)
    run.seed, run.num_seeds = seed, 1
    (workdir / f"seed_{seed}").mkdir()
    (workdir / f"seed_{seed}" / "config.json").write_text(config_lib.to_json(run))
  ckpt = checkpoint.Checkpointer(workdir)
  ckpt.save(1, methods.init_states_of(methods.build(config, SHAPE), SEEDS))
  ckpt.close()
  return workdir


@pytest.fixture(scope="module")
def parted(parted_runs):
  return disentangle.load(parted_runs, seed=4)


@pytest.fixture(scope="module")
def images():
  rng = np.random.default_rng(0)
  return (rng.random((6,) + SHAPE) < 0.3).astype(np.float32)


def test_load_is_the_function_itself():
  assert disentangle.load is trained.load


@pytest.mark.parametrize("kwargs, expected", [
    ({"seed": 4}, "seed_4"), ({"run": "seed_3"}, "seed_3"), ({"seed": 3, "run": "seed_3"}, "seed_3"),
    ({}, " holds seed_3 (seed 3), seed_4 (seed 4): choose one by seed= or run="),
    ({"seed": 1}, ": none has seed=1"), ({"seed": 3, "run": "seed_4"},
                                        ": none has seed=3 and run='seed_4'")])
def test_a_run_of_several_is_chosen_by_its_seed_or_its_directory(parted_runs, kwargs, expected):
  if expected.startswith("seed_"):
    assert trained.load(parted_runs, **kwargs).source == str(parted_runs / expected)
    return
  with pytest.raises(trained.ModelError) as e:
    trained.load(parted_runs, **kwargs)
  assert str(e.value) == str(parted_runs) + (expected if expected.startswith(" ") else
                                             " holds seed_3 (seed 3), seed_4 (seed 4)" + expected)


def test_a_load_builds_its_method_once_without_the_data(parted_runs, monkeypatch):
  built, build = [], methods.build
  monkeypatch.setattr(methods, "build", lambda *a, **k: built.append(a) or build(*a, **k))
  for module in (data, loading):  # reading the data set would fail
    monkeypatch.setattr(module, "load_dataset", None)
  model = trained.load(parted_runs, seed=3)
  assert len(built) == 1 and model.image_shape == SHAPE and model.method is not None


def test_the_image_shape_a_run_loads_with_is_its_loaders():
  """`loading.IMAGE_SHAPES` against the shapes the loaders declare (TFDS layouts, the dSprites
  variants' classes); Chairs, Cars3D and MPI3D write theirs in their loading code."""
  from disentangle.data.datasets import dsprites_variants  # pylint: disable=g-import-not-at-top
  from disentangle.data.tfds import layouts  # pylint: disable=g-import-not-at-top
  declared = {n: layout.image_shape for n, layout in layouts.LAYOUTS.items()}
  v = dsprites_variants
  declared.update({cls.name: cls.image_shape for cls in (v.ColorDSprites, v.NoisyDSprites,
                                                         v.ScreamDSprites, v.DSpritesNoShape)})
  declared["dsprites_unfair"] = declared["dsprites"]
  assert set(loading.IMAGE_SHAPES) == set(loading.DATASETS + loading.TFDS_ONLY)
  assert {n: loading.IMAGE_SHAPES[n] for n in declared} == declared


def test_partedvae_encodes_its_latents_and_its_class_code(parted, images):
  """mean and logvar: concat(z, u) of the method's evaluation; d: argmax q(c|x) of its class
  variable; decoding them is the method's reconstruction."""
  codes = parted.encode(images, batch_size=4)
  p = parted.config.parted
  assert parted.latent_dim == parted.config.model.latent_dim + p.u_dim == codes.mean.shape[1]
  mean_z, logvar_z, mean_u, logvar_u, blocks = parted.method.eval_latents(
      parted.params["vae"], images)
  np.testing.assert_allclose(codes.mean, np.concatenate([mean_z, mean_u], 1), atol=1e-5)
  np.testing.assert_allclose(codes.logvar, np.concatenate([logvar_z, logvar_u], 1), atol=1e-5)
  np.testing.assert_array_equal(codes.discrete, np.argmax(blocks[0], -1))
  assert parted.num_discrete == p.discrete_sizes[0] == 10 and codes.discrete.dtype == np.int32
  np.testing.assert_allclose(parted.reconstruct(images),
                             parted.method.reconstruct(parted.params, images), atol=1e-5)
  assert parted.traverse(images[0], dims=[0, 7]).shape == (2, 10) + SHAPE
  assert parted.traverse_discrete(images[:2]).shape == (10, 2) + SHAPE


def test_encode_is_the_methods_representation(model, images):
  codes = model.encode(images, batch_size=4)  # two batches, one of them short
  rep = model.method.represent(model.params, images)
  np.testing.assert_allclose(codes.mean, rep["mean"], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(codes.logvar, rep["logvar"], rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(codes.discrete, rep["discrete"])
  assert codes.mean.shape == (6, model.latent_dim) and codes.discrete.dtype == np.int32


def test_uint8_and_channel_less_images_are_the_same_images(model, images):
  as_uint8 = (images * 255).astype(np.uint8)[..., 0]
  np.testing.assert_allclose(model.encode(as_uint8).mean, model.encode(images).mean, atol=1e-5)


def test_traversals_decode_the_changed_code(model, images):
  np.testing.assert_allclose(model.traverse(images[2]),  # the values of its data set's figures
                             model.traverse(images[2], values=np.linspace(-2, 2, 10)), atol=1e-6)
  values = np.array([-2.0, 0.5, 2.0], np.float32)
  out = model.traverse(images[2], dims=[4, 1], values=values)
  assert out.shape == (2, 3) + SHAPE
  codes = model.encode(images[2:3])
  z = np.repeat(codes.mean, 3, axis=0)
  z[:, 1] = values
  expected = model.decode(z, np.repeat(codes.discrete, 3))
  np.testing.assert_allclose(out[1], expected, atol=1e-5)
  grid = model.traverse_discrete(images[:3])
  assert grid.shape == (model.num_discrete, 3) + SHAPE
  np.testing.assert_allclose(grid[5], model.decode(model.encode(images[:3]).mean, [5, 5, 5]),
                             atol=1e-5)
  # Different codes decode to different images: the traversal moves something.
  assert np.abs(grid[0] - grid[1]).max() > 1e-4


def test_reconstruct_decodes_the_encoding(model, images):
  codes = model.encode(images)
  np.testing.assert_allclose(model.reconstruct(images), model.decode(codes.mean, codes.discrete),
                             atol=1e-6)


def test_latent_order_is_by_information(model, images):
  order = model.latent_order(images)
  assert sorted(order.tolist()) == list(range(model.latent_dim))


@pytest.mark.parametrize("bad, field", [
    (np.zeros((2, 28, 28, 1), np.float32), "images: expected shape [n, 32, 32, 1]"),
])
def test_bad_images_are_refused_in_one_line(model, bad, field):
  with pytest.raises(trained.ModelError) as e:
    model.encode(bad)
  assert str(e.value).startswith(field) and "\n" not in str(e.value)


def test_bad_codes_are_refused_in_one_line(model):
  z = np.zeros((2, model.latent_dim), np.float32)
  with pytest.raises(trained.ModelError, match=r"^d: expected 2 integers in \[0, 10\)"):
    model.decode(z, [0, 10])
  with pytest.raises(trained.ModelError, match=r"^z: expected shape \[n, 10\]"):
    model.decode(z[:, :3])


@pytest.mark.parametrize("which", ["model", "parted"])
def test_export_and_load_round_trip(which, images, tmp_path, request):
  model = request.getfixturevalue(which)
  info = trained.export(model, tmp_path / "mine", command="hand-made", seed=0)
  assert info["step"] == model.step and info["image_shape"] == list(SHAPE)
  loaded = trained.load(tmp_path / "mine")
  assert loaded.step == model.step and loaded.image_shape == SHAPE and loaded.info["seed"] == 0
  for a, b in zip(jax.tree_util.tree_leaves(model.params),
                  jax.tree_util.tree_leaves(loaded.params)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  np.testing.assert_array_equal(loaded.encode(images).discrete, model.encode(images).discrete)
  np.testing.assert_allclose(loaded.encode(images).mean, model.encode(images).mean, atol=1e-6)


def test_a_damaged_parameter_file_is_refused(model, tmp_path):
  trained.export(model, tmp_path / "mine")
  path = tmp_path / "mine" / trained.PARAMS
  data = bytearray(path.read_bytes())
  data[len(data) // 2] ^= 0xFF
  path.write_bytes(bytes(data))
  with pytest.raises(trained.ModelError, match="params.msgpack: sha256 .* does not match"):
    trained.load(tmp_path / "mine")


def test_an_unknown_name_is_refused_in_one_line(tmp_path):
  with pytest.raises(trained.ModelError, match="neither a shipped model .* nor a run directory"):
    trained.load(str(tmp_path / "nothing"))


def test_shipped_models_say_what_they_are():
  for name in trained.shipped():
    info = json.loads((trained.PRETRAINED / name / trained.MODEL).read_text())
    for field in ("command", "seed", "step", "image_shape", "params_sha256", "results"):
      assert field in info, (name, field)


# A shipped model's recorded accuracy of its discrete code, as its paper maps codes to labels.
MAPPINGS = {
    "accuracy": lambda y, d: clustering.cluster_accuracy(y, d)["one_to_one"],  # CascadeVAE Table 3
    "accuracy_direct": lambda y, d: accuracy.classification_accuracy(y, d)["accuracy"],  # PartedVAE
}


@pytest.mark.slow
@pytest.mark.parametrize("name, recorded", [("cascadevae_mnist_m10", "accuracy"),
                                            ("partedvae_mnist_labels256", "accuracy_direct")])
def test_the_shipped_mnist_models_match_the_test_labels(shared_data_dir, name, recorded):
  """Each shipped model's discrete code against the 10,000 MNIST test labels: the accuracy its
  run recorded at its last step, one-to-one (Hungarian) for CascadeVAE's clusters, identity for
  PartedVAE's semi-supervised c (the same parameters and the same inference)."""
  from disentangle.data.datasets import mnist
  model = trained.load(name)
  test = mnist.load_mnist(shared_data_dir, "test", allow_download=False)
  codes = model.encode(test.get_images(np.arange(test.num_examples)))
  assert codes.mean.shape == (test.num_examples, model.latent_dim)
  assert MAPPINGS[recorded](test.labels, codes.discrete) == pytest.approx(
      model.info["results"][recorded], abs=0.002)
