"""Training sets on the device (`disentangle.train.device_data`): the batches gathered in the
step equal the host pipeline's bit for bit, for every in-memory set, and so do whole runs."""
import types

import jax
import numpy as np
import pytest

from disentangle import config as config_lib
from disentangle import data
from disentangle.data import BatchSpec
from disentangle.data import LabelledSpec
from disentangle.data.datasets import chairs
from disentangle.data.datasets import dsprites
from disentangle.data.datasets import dsprites_draws
from disentangle.data.datasets import dsprites_variants
from disentangle.data.datasets import mnist
from disentangle.data.datasets import synthetic
from disentangle.train import device_data
from disentangle.train import input_pipeline
from disentangle.train import mesh as mesh_lib
from disentangle.train import trainer
from tests import helpers

SIDE = BatchSpec(targets=("digit",), attributes=("big",),
                 labelled=LabelledSpec("random", 40, 8, seed=3))


_tiny_uint8 = helpers.tiny_uint8


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
  """Every kind of in-memory training set, small (MNIST's real test split where ../shared/data
  has it, else the synthetic stand-in's)."""
  tmp = tmp_path_factory.mktemp("sets")
  mnist_dir, verify = helpers.SHARED / "data", True
  if not (mnist_dir / "mnist").is_dir():
    mnist_dir, verify = synthetic.ensure_synthetic("mnist", tmp / "synthetic"), False
  rng = np.random.default_rng(0)
  subset = dsprites.DSprites(path=synthetic.write_dsprites_subset(tmp, num_images=2048))
  synthetic.write_chairs(tmp, num_models=2, num_views=5)
  factors = rng.integers(0, 3, (120, 2))
  return {
      "mnist": mnist.load_mnist(mnist_dir, "test", allow_download=False, verify=verify),
      "dsprites_file": subset,
      "dsprites_unfair": data.DSpritesUnfair(subset, num_examples=500, seed=1),
      "ground_truth_uint8": data.InMemoryGroundTruth(
          factors, rng.integers(0, 256, (120, 6, 6), dtype=np.uint8), name="gt8"),
      "ground_truth_float": data.InMemoryGroundTruth(
          factors, rng.random((120, 5, 5, 3)), name="gtf"),
      "array_float": data.ArrayImages(rng.random((90, 4, 4, 2)).astype(np.float32)),
      "chairs": chairs.load_chairs(tmp),
      "tiny": _tiny_uint8(),
  }


def _spec(name):
  if name == "mnist":
    return BatchSpec(targets=("digit",), labelled=LabelledSpec("balanced", 100, 16, seed=2))
  if name == "dsprites_unfair":
    return BatchSpec(targets=("shape", "pos_x"), attributes=("shape", "scale"))
  if name == "dsprites_file":
    return BatchSpec(targets=("orientation",), labelled=LabelledSpec("random", 64, 8, seed=1))
  if name == "ground_truth_uint8":
    return BatchSpec(targets=("factor_1",))
  if name == "tiny":
    return SIDE
  return data.IMAGES_ONLY


def _sources(dataset, spec, seeds, batch):
  one = [input_pipeline.make_source(dataset, spec, global_batch=batch, seed=s) for s in seeds]
  return one[0] if len(seeds) == 1 else input_pipeline.MultiSeedSource(one)


def _assert_gathered_equal_host(dataset, spec, seeds, num_devices, steps, batch=16):
  source = _sources(dataset, spec, seeds, batch)
  mesh = mesh_lib.make_mesh(num_devices)
  placed = device_data.place(dataset, dataset.compact_images(), spec, mesh)
  gather = jax.jit(lambda p, rows: device_data.gather(p, rows, placed.layout))
  axis = 0 if len(seeds) == 1 else 1
  for step in steps:
    rows = mesh_lib.global_batch(mesh, source.local_rows(step), axis)
    got, want = gather(placed.placed, rows), source.local_batch(step)
    assert set(got) == set(want)
    for key, value in want.items():
      assert got[key].dtype == value.dtype and got[key].shape == value.shape, key
      np.testing.assert_array_equal(np.asarray(got[key]), value, err_msg=key)


@pytest.mark.parametrize("name", ["mnist", "dsprites_file", "dsprites_unfair",
                                  "ground_truth_uint8", "ground_truth_float", "array_float",
                                  "chairs", "tiny"])
@pytest.mark.parametrize("seeds, num_devices", [((0,), 1), ((0,), 8), ((4, 5, 4), 8)])
def test_gathered_batches_equal_the_host_batches(sets, name, seeds, num_devices):
  dataset = sets[name]
  steps = (0, 1, dataset.num_examples // 16, dataset.num_examples // 16 + 1)  # across an epoch
  _assert_gathered_equal_host(dataset, _spec(name), seeds, num_devices, steps)


def _drawn(base, name):
  painting = np.random.default_rng(7).random((90, 100, 3))
  return dsprites_variants.make(name, base, painting=painting, seed=1, draw="per_sample")


@pytest.mark.parametrize("name", dsprites_draws.NAMES)
@pytest.mark.parametrize("spec", [data.IMAGES_ONLY,
                                  BatchSpec(targets=("shape",),
                                            labelled=LabelledSpec("random", 64, 8, seed=1))],
                         ids=["images", "labelled"])
@pytest.mark.parametrize("seeds, num_devices", [((0,), 1), ((4, 5, 4), 8)])
def test_sets_drawn_per_sample_are_painted_on_the_device_as_on_the_host(sets, name, spec, seeds,
                                                                         num_devices):
  """The colour, noisy and scream dSprites drawn per sample: the device paints the placed
  sprites with the rows' keys, bit for bit the host's numpy draw, in every stream."""
  dataset = _drawn(sets["dsprites_file"], name)
  assert dataset.compact_images().encoding == "bits"  # the sprites, not painted images
  steps = (0, 1, dataset.num_examples // 16 + 1)
  _assert_gathered_equal_host(dataset, spec, seeds, num_devices, steps)


def test_rendered_dsprites_are_rendered_once_and_equal_the_renderer(monkeypatch):
  """A rendered set of the grid's first 5000 rows (the whole grid takes minutes)."""
  monkeypatch.setattr(dsprites, "NUM_EXAMPLES", 5000)
  monkeypatch.setattr(dsprites, "render_packed", lambda idx, chunk=1024, f=dsprites.render_packed:
                      f(idx, chunk))  # chunk seams inside the tested rows
  with pytest.warns(data.ProceduralDataWarning):
    rendered = dsprites.DSprites(source="render")
  compact = rendered.compact_images()
  assert (compact.encoding, compact.shape, compact.in_memory) == ("bits", (5000, 64, 8), False)
  assert rendered.compact_images().nbytes == 5000 * 64 * 8
  _assert_gathered_equal_host(rendered, BatchSpec(targets=("shape", "scale")), (0, 1), 8,
                              (0, 1, 312, 313))
  assert rendered.compact_images().in_memory  # rendered once, kept


def test_compact_sizes_and_encodings(sets):
  assert sets["mnist"].compact_images().encoding == "uint8"
  assert sets["mnist"].compact_images().nbytes == sets["mnist"].num_examples * 32 * 32
  full = data.arrays.CompactImages("bits", (dsprites.NUM_EXAMPLES, 64, 8), lambda: None)
  assert full.nbytes == 377_487_360  # 737,280 images of 64 x 64 bits
  unfair = sets["dsprites_unfair"].compact_images()
  assert unfair.encoding == "bits" and len(unfair.rows) == 500
  assert sets["ground_truth_uint8"].compact_images().encoding == "uint8"
  assert sets["ground_truth_float"].compact_images().encoding == "float32"
  assert not chairs.load_chairs(sets["chairs"].paths[0].parents[4]).compact_images().in_memory
  features = data.InMemoryGroundTruth(np.zeros((4, 2), int), np.zeros((4, 3)))
  assert features.compact_images() is None


# -- where the set goes ------------------------------------------------------------------------
class _Device:
  def __init__(self, platform, stats=None):
    self.platform, self._stats, self.device_kind = platform, stats, f"fake {platform}"

  def memory_stats(self):
    return self._stats


def _compact(nbytes, in_memory=True):
  return data.arrays.CompactImages("uint8", (nbytes, 1, 1, 1), lambda: None, in_memory)


def test_auto_places_what_fits_a_share_of_the_device_and_host_otherwise():
  gpu = [_Device("gpu", {"bytes_limit": 1000, "bytes_in_use": 100})]
  ds = types.SimpleNamespace(num_examples=10, name="toy")
  on = lambda placement, c, devices=gpu: device_data.on_device(  # noqa: E731
      placement, ds, c, data.IMAGES_ONLY, devices)
  assert on("auto", _compact(250)) and not on("auto", _compact(251))
  assert on("auto", _compact(250, in_memory=False))  # rendered / decoded once on accelerators
  assert not on("host", _compact(1))
  assert on("device", _compact(900))  # 'device' takes what is free
  with pytest.raises(config_lib.ConfigError, match="'dataset.placement' is 'device'"):
    on("device", _compact(901))
  assert not on("auto", None)  # TFDS, a dataset object without compact_images
  with pytest.raises(config_lib.ConfigError, match="'dataset.placement' is 'device'.*no compact"):
    on("device", None)
  cpu = [_Device("cpu")] * 2
  limit, _ = device_data.memory_per_device(cpu)
  assert on("auto", _compact(1000), cpu)
  assert not on("auto", _compact(1000, in_memory=False), cpu)  # CPU: no render / decode up front
  assert not on("auto", _compact(int(config_lib.DEVICE_SHARE * limit) + 1), cpu)


def test_device_for_a_set_that_does_not_fit_is_one_config_error_and_creates_nothing(
    tmp_path, monkeypatch):
  monkeypatch.setattr(device_data, "memory_per_device", lambda devices: (1 << 20, 1 << 17))
  config = helpers.tiny_config("betavae", **{"dataset.placement": "device"})
  with pytest.raises(config_lib.ConfigError) as e:
    trainer.train(config, tmp_path / "run", dataset=_tiny_uint8())
  message = str(e.value)
  assert "\n" not in message and "'dataset.placement'" in message
  assert "0.2 MB" in message and "0.1 MB free" in message  # 256 images of 32 x 32 bytes
  assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_the_entry_point_says_in_one_line_that_tfds_stays_on_the_host(tmp_path):
  """``placement='device'`` for a set read from TFDS: exit status 2, one line naming the field,
  no run directory (the entry point in this process)."""
  tfds_dir = helpers.prepare(helpers.TinyMnist, tmp_path / "tfds")
  proc = helpers.run_in_process(
      "experiments.mnist_cascade",
      "--config=experiments/configs/mnist_cascade.py:smoke", "--config.dataset.source=tfds",
      f"--config.dataset.tfds_data_dir={tfds_dir}", "--config.dataset.tfds_name=tiny_mnist",
      "--config.dataset.placement=device", f"--workdir={tmp_path / 'run'}")
  errors = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert len(errors) == 1 and "'dataset.placement' is 'device'" in errors[0], errors
  assert "Traceback" not in proc.stderr and not (tmp_path / "run").exists()


def test_placement_is_a_validated_resumable_field():
  from disentangle import methods  # pylint: disable=g-import-not-at-top
  config = helpers.tiny_config("betavae", **{"dataset.placement": "gpu"})
  with pytest.raises(config_lib.ConfigError, match="dataset.placement"):
    methods.validate(config)
  assert "dataset.placement" in trainer.RESUMABLE_FIELDS


# -- whole runs --------------------------------------------------------------------------------
def _params(state):
  return [np.asarray(x) for x in jax.tree_util.tree_leaves(state.params)]


def _host_and_device(tmp_path, config, dataset, hooks=None):
  out = {}
  for placement in ("host", "device"):
    c = config.copy_and_resolve_references()
    c.dataset.placement = placement
    out[placement] = trainer.train(c, tmp_path / placement, dataset=dataset, hooks=hooks)
  for a, b in zip(_params(out["host"]), _params(out["device"])):
    np.testing.assert_array_equal(a, b)
  return out


@pytest.mark.slow
@pytest.mark.parametrize("method, num_seeds, layout, num_devices", [
    ("betavae", 1, "auto", 8),
    ("betavae", 2, "unroll", 2),   # mesh runs 2 x data 1: each device steps its own run
    ("ffvae", 2, "vmap", 8),       # attributes; mesh runs 2 x data 4
    ("partedvae", 1, "auto", 8),   # targets and the labelled stream
])
def test_runs_on_device_data_end_bitwise_equal_to_host_runs(tmp_path, method, num_seeds, layout,
                                                            num_devices):
  kw = {"num_steps": 4, "mesh.num_devices": num_devices, "num_seeds": num_seeds,
        "seed_layout": layout}
  if method == "partedvae":
    config = helpers.parted_config(**kw)
    dataset = _tiny_uint8(label_name="label")
  else:
    config = helpers.tiny_config(method, **kw)
    dataset = _tiny_uint8()
  _host_and_device(tmp_path, config, dataset)


@pytest.mark.slow
def test_a_run_on_a_set_drawn_per_sample_on_device_equals_the_host_run(tmp_path, monkeypatch):
  """The scream dSprites drawn per sample over a rendered dSprites (its bits placed, not in
  memory up front): the device renders, unpacks and paints what the host draws, for a whole run.
  The other draws and sets, batch by batch: the gather tests above."""
  monkeypatch.setattr(dsprites, "NUM_EXAMPLES", 640)
  with pytest.warns(data.ProceduralDataWarning):
    rendered = dsprites.DSprites(source="render")
  name = "scream_dsprites"
  config = helpers.tiny_config("betavae", **{"num_steps": 3, "mesh.num_devices": 2,
                                             "dataset.name": name,
                                             "dataset.variant_draw": "per_sample"})
  _host_and_device(tmp_path, config, _drawn(rendered, name))


@pytest.mark.slow
def test_the_steady_loop_moves_only_the_row_indices_to_the_device(tmp_path, monkeypatch):
  """From the second step on, implicit host-to-device copies fail in every thread, and the
  loop's own thread may not copy anything to the device at all; the copies of the prefetch
  thread are recorded: only the int32 rows of each batch."""
  copied = []
  assemble = jax.make_array_from_process_local_data

  def recording(sharding, local, *args, **kwargs):
    copied.append((np.asarray(local).dtype, np.shape(local)))
    return assemble(sharding, local, *args, **kwargs)

  monkeypatch.setattr(jax, "make_array_from_process_local_data", recording)
  guards = []

  def steady(state, step):
    if step == 1:
      copied.clear()
      jax.config.update("jax_transfer_guard_host_to_device", "disallow")  # every thread
      guards.append(jax.transfer_guard_host_to_device("disallow_explicit"))  # this thread
      guards[0].__enter__()

  config = helpers.tiny_config("betavae", **{"num_steps": 6, "mesh.num_devices": 8,
                                             "dataset.placement": "device"})
  try:
    trainer.train(config, tmp_path / "run", dataset=_tiny_uint8(), hooks=[steady])
  finally:
    jax.config.update("jax_transfer_guard_host_to_device", "allow")
    for guard in guards:
      guard.__exit__(None, None, None)
  assert guards and copied and set(copied) == {(np.dtype(np.int32), (8,))}
