"""What the tests share: small in-memory datasets and configs (no files, no network), a tiny
MNIST-layout TFDS builder, two-process runs, metrics-line comparison and the config-rule check."""
import contextlib
import functools
import io
import json
import logging
import os
import pathlib
import re
import runpy
import socket
import subprocess
import sys
import traceback
import types

from absl import flags
from absl import logging as absl_logging
import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disentangle import config as config_lib
from disentangle import data
from disentangle import losses
from disentangle import methods
from disentangle import paths
from disentangle.data.labels import supervision
from disentangle.data.tfds import builders
from disentangle.train import writers

REPO = pathlib.Path(__file__).resolve().parents[1]
# The offline data folder beside the checkout (real MNIST, 12 real dSprites images).
SHARED = pathlib.Path(os.environ.get("DISENTANGLE_SHARED_DIR", REPO.parent / "shared"))


class TinyImages:
  """A structured 32x32 dataset: bright squares at class-dependent places, in [0, 1]."""

  def __init__(self, n=256, size=32, seed=0, nan_after_calls=None):
    rng = np.random.default_rng(seed)
    self.labels = rng.integers(0, 4, n)
    imgs = np.zeros((n, size, size, 1), np.float32)
    for i, c in enumerate(self.labels):
      r, col = 4 + 12 * (c // 2) + rng.integers(0, 4), 4 + 12 * (c % 2) + rng.integers(0, 4)
      imgs[i, r:r + 8, col:col + 8] = 1.0
    self.images = imgs
    self.nan_after_calls = nan_after_calls
    self.calls = 0
    self.num_examples = n
    self.image_shape = (size, size, 1)

  def get_images(self, idx):
    out = self.images[idx].copy()
    self.calls += 1
    if self.nan_after_calls is not None and self.calls > self.nan_after_calls:
      out[:] = np.nan  # every batch after the first `nan_after_calls` ones
    return out


class TinyAttributeImages(TinyImages):
  """TinyImages with two binary attributes: "right" (class column) and "low" (class row)."""

  attribute_names = ("right", "low")

  def attributes_of(self, indices, names):
    c = self.labels[np.asarray(indices)]
    cols = {"right": c % 2, "low": c // 2}
    return np.stack([cols[n] for n in names], axis=1).astype(np.int32)



def tiny_uint8(n=256, **kw):
  """TinyImages as uint8 MNIST-like images (`data.ArrayImages`: placeable on the devices), with
  a target and attributes."""
  tiny = TinyImages(n=n)
  c = tiny.labels
  return data.ArrayImages((tiny.images * 255).astype(np.uint8), c, name="tiny",
                          label_name=kw.get("label_name", "digit"), num_classes=4,
                          attributes={"right": c % 2, "low": c // 2,
                                      "big": (np.arange(n) >= n // 2).astype(int)})

def tiny_config(method="betavae", **overrides):
  c = methods.schema(method)
  c.dataset.name = "mnist"
  c.num_steps = 6
  c.batch_size = 8
  c.model.latent_dim = 3
  c.log_every = 2
  c.eval_every = 1000
  c.checkpoint_every = 3
  c.progress_bar = False
  # Flax's convolutions: XLA:CPU compiles a step in two thirds of the time
  # of its default rewrite ('fast', the same numbers), which the layers' tests and the golden
  # steps keep testing.
  c.model.conv_impl = "flax"
  c.optimizer.learning_rate = 1e-3
  c.eval.suite_points = 200  # disentanglement_lib's suite on 200 / 100 points, not 10,000 / 5,000
  if method == "cascadevae":
    c.cascade.num_discrete = 3
    c.cascade.relieve_every = 2
    c.cascade.discrete_start = 2
    c.cascade.penalty = 0.5
  if method == "factorvae":
    c.factorvae.disc_hidden = 32
    c.factorvae.disc_layers = 2
    c.factorvae.gamma = 5.0
  if method == "ffvae":
    c.ffvae.disc_hidden = 32
    c.ffvae.disc_layers = 2
    c.ffvae.sensitive = ("right", "low")
    c.ffvae.alpha = 10.0
    c.ffvae.gamma = 5.0
    c.ffvae.fair.subgroup = ("right",)
    c.ffvae.fair.target = "low"
  for k, v in overrides.items():
    config_lib.set_field(c, k, v)
  return c


def compiled_network(method, seed: int = 0) -> types.SimpleNamespace:
  """``method``'s initial parameters (``init(PRNGKey(seed))``) and its encoder and decoder, each
  one compiled program: tests that check one network from several configs share them, instead
  of tracing and loading the network's operations one by one in each."""
  return types.SimpleNamespace(params=jax.jit(method.init)(jax.random.PRNGKey(seed)).params,
                               encode=jax.jit(method.encode),
                               decode=jax.jit(method.decode_logits))


def step_traced_once(method):
  """``method.train_step`` under ``jax.jit``; fails (chex) if it is traced more than once.

  chex keys its trace counter by the definition's call stack (function names) and source, so two
  test functions of the same name in different files would share one counter: it is cleared here,
  each caller counting its own step's traces from zero.
  """
  chex.clear_trace_counter()

  @jax.jit
  @chex.assert_max_traces(n=1)
  def step(state, batch):
    return method.train_step(state, batch)

  return step


def assert_field_rule_refuses(config, field: str, value, what: str) -> None:
  """``config`` with ``field`` (``section.leaf``) set to ``value`` is refused by
  `methods.validate` in exactly one line: ``config field '<field>' must be <what>, got ...``."""
  section, leaf = field.split(".")
  with config.unlocked():
    config[section][leaf] = value
  with pytest.raises(config_lib.ConfigError) as err:
    methods.validate(config)
  assert str(err.value) == f"config field {field!r} must be {what}, got {value!r}"


# -- PartedVAE ---------------------------------------------------------------------------------
class TinyDigits(TinyImages, supervision.Supervision):
  """``TinyImages`` with its 4 classes as the target column ``label``."""

  name = "tiny"

  def __init__(self, **kw):
    super().__init__(**kw)
    self._set_supervision(self.num_examples, {"label": self.labels}, {"label": 4})


def parted_config(**overrides):
  """`tiny_config` of PartedVAE: 4 classes of target ``label``, 16 labelled examples."""
  base = {"parted.discrete_sizes": (4,), "parted.u_dim": 2, "parted.targets": ("label",),
          "parted.num_labelled": 16, "parted.labelled_batch_size": 8,
          "parted.plateau_epoch_steps": 2}
  return tiny_config("partedvae", **dict(base, **overrides))


# -- a one-program table (`disentangle.reproduce`) ------------------------------------------------
def fake_experiment(configs: dict, published: dict | None = None):
  """A stand-in for an experiment's config module: ``get_config(variant)`` returns a copy of
  ``configs[variant]``, ``PUBLISHED`` is ``published``."""
  import ml_collections  # pylint: disable=g-import-not-at-top
  module = types.SimpleNamespace(PUBLISHED=dict(published or {}))
  module.get_config = lambda variant=None: ml_collections.ConfigDict(configs[variant].to_dict())
  return module


def tiny_table(row="lo", label="3", seeds=1, **overrides):
  """A table ``tiny`` of one row ``row`` (the paper's column ``label``, ``seeds`` seeds): a tiny
  CascadeVAE config (4 steps, S = 4, lambda' = 0.25, then ``overrides``) of a stand-in experiment
  ``fake``, on 64 `TinyImages`. Returns ``(table, modules, kwargs)``: ``kwargs`` are the scaling,
  the data and the evaluation settings of ``reproduce.run.run_table`` and of the slot."""
  from disentangle.reproduce import plan  # pylint: disable=g-import-not-at-top
  from experiments.configs import common  # pylint: disable=g-import-not-at-top
  config = tiny_config("cascadevae", num_steps=4, checkpoint_every=2, log_every=2, **{
      "cascade.discrete_start": 0, "cascade.num_discrete": 4, "cascade.penalty": 0.25,
      "eval.num_points": 64, "eval.information": False, "eval.num_images": 4,
      "mesh.num_devices": 1, **overrides})
  table = plan.Table("tiny", "a tiny table", "test", ("accuracy",),
                     (plan.Row(row, label, "fake", row),), "final", seeds=seeds)
  kwargs = dict(scale=functools.partial(common.scale_schedule, round_steps=True),
                dataset=TinyImages(n=64),
                evaluate_kwargs={"mig_points": 200, "encode_batch_size": 64})
  return table, {"fake": fake_experiment({row: config})}, kwargs


def without_places(value):
  """A table's or a result's ``value`` without what names where and when it ran (run_dir,
  workdir, wall time, dates): the numbers of two places compared."""
  if isinstance(value, dict):
    return {k: without_places(v) for k, v in value.items()
            if k not in ("run_dir", "workdir", "wall_s", "created", "evaluated_at")}
  if isinstance(value, list):
    return [without_places(v) for v in value]
  return value


# -- a TFDS builder of MNIST's layout ------------------------------------------------------------
RNG = np.random.default_rng(0)
TRAIN_IMAGES = RNG.integers(0, 256, size=(40, 28, 28, 1), dtype=np.uint8)
TRAIN_LABELS = RNG.integers(0, 10, size=40)
TEST_IMAGES = RNG.integers(0, 256, size=(8, 28, 28, 1), dtype=np.uint8)


class TinyMnist(builders._ArrayBuilder, skip_registration=True):  # pylint: disable=protected-access
  """MNIST's layout (raw 28x28 uint8 image, int label) over the arrays above."""

  def _features(self):
    return {"image": builders._tensor((28, 28, 1), np.uint8),  # pylint: disable=protected-access
            "label": builders._tensor((), np.int64)}  # pylint: disable=protected-access

  def _splits(self):
    return ("train", "test")

  def _generate_examples(self, split):
    images = TRAIN_IMAGES if split == "train" else TEST_IMAGES
    labels = TRAIN_LABELS if split == "train" else np.zeros(len(images), int)
    for i, (img, label) in enumerate(zip(images, labels)):
      yield i, {"image": img, "label": int(label)}


def prepare(cls, data_dir):
  """Builds the TFDS builder ``cls`` into ``data_dir`` (array_record); returns the folder."""
  cls(data_dir=str(data_dir), file_format="array_record").download_and_prepare()
  return str(data_dir)


# -- two processes -------------------------------------------------------------------------------
def free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def run_pair(workdir, steps, *extra, env=None):
  """`tests.distributed_worker` in two processes (4 devices each) on ``workdir``; their RESULT
  lines, by process. ``env``: per-process additions to the environment (a list of two dicts)."""
  port = free_port()
  base = dict(os.environ, PYTHONPATH=str(REPO), DISENTANGLE_NO_DOWNLOAD="1")
  procs = [subprocess.Popen([sys.executable, "-m", "tests.distributed_worker", str(i), str(port),
                             str(workdir), str(steps), *map(str, extra)], cwd=REPO,
                            env=dict(base, **(env[i] if env else {})),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
           for i in range(2)]
  results = []
  for p in procs:
    out, _ = p.communicate(timeout=420)
    assert p.returncode == 0, out[-3000:]
    line = [l for l in out.splitlines() if l.startswith("RESULT ")][-1]
    results.append(json.loads(line[len("RESULT "):]))
  return sorted(results, key=lambda r: r["process"])


# -- metrics lines -------------------------------------------------------------------------------
def metrics_lines(path):
  return [json.loads(l) for l in (path / "metrics.jsonl").read_text().splitlines()]


def lines(folder):
  """The metrics lines of ``folder`` (a folder or a gs:// URL), without the wall-clock rate."""
  text = paths.as_path(folder).joinpath("metrics.jsonl").read_text()
  return [{k: v for k, v in json.loads(l).items() if k != "steps_per_sec"}
          for l in text.splitlines()]


def events(folder):
  """(step, tag, value) of every scalar in the TensorBoard event files of ``folder``."""
  return writers.read_tensorboard(folder)


def steps(folder):
  """The complete checkpoint steps under ``folder`` (orbax's finalised step folders; a folder or
  a gs:// URL); none where it does not exist."""
  folder = paths.as_path(folder)
  return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) \
      if folder.exists() else []


def assert_same_metrics(a, b, rtol=2e-4, atol=2e-5):
  """metrics.jsonl of two run directories, step by step (timings aside)."""
  la, lb = metrics_lines(a), metrics_lines(b)
  assert [l["step"] for l in la] == [l["step"] for l in lb]
  for x, y in zip(la, lb):
    for k in x:
      if k != "steps_per_sec":
        np.testing.assert_allclose(x[k], y[k], rtol=rtol, atol=atol, err_msg=f"{k} at {x['step']}")


# -- a command line in this process ---------------------------------------------------------------
@contextlib.contextmanager
def flags_of_one_command(module: str):
  """absl's flags for one run of ``module`` as a fresh interpreter has them, then as before:
  values unparsed, the flags defined so far may be defined again (two commands' ``--workdir``),
  and those the command itself defined (``module``'s, ``config_flags``' ``--config.<field>``
  overrides) are forgotten after it; flags of library modules it imported stay, as the modules."""
  registry = flags.FLAGS
  saved = dict(registry._flags())  # pylint: disable=protected-access
  overridable = {flag: flag.allow_override for flag in saved.values()}
  for flag in overridable:
    flag.allow_override = True
  registry.unparse_flags()
  try:
    yield
  finally:
    for flag, allow in overridable.items():
      flag.allow_override = allow
    for name in list(registry):
      if name in saved:
        if registry[name] is not saved[name]:
          delattr(registry, name)
          registry[name] = saved[name]
      elif name.startswith("config.") or registry.find_module_defining_flag(name) == module:
        delattr(registry, name)
    registry.unparse_flags()


# A line a library wrote: absl's log format (``I1207 13:20:36.346772 1398 file.py:849] ...``, which
# TensorFlow Datasets' and orbax's loggers use too), JAX probing for backends, TensorFlow Datasets'
# printed notices (its folder's name, ``~/tensorflow_datasets``, is in lines of the project's own).
_LIBRARY_LINE = re.compile(r"^[IWEF]\d{4} |xla_bridge|Unable to initialize backend|"
                           r"Downloading and preparing dataset|Subsequent calls will reuse")


def library_log_lines(text: str) -> list[str]:
  """The lines of a command's output that a library's logger wrote rather than the project."""
  return [line for line in text.splitlines() if _LIBRARY_LINE.search(line)]


def run_in_process(module: str, *args: str):
  """``python -m <module> *args`` run here (`runpy`, absl's flags reset before and after), for the
  bad-input paths that end before any training: what `subprocess.run` would return (returncode,
  stdout, stderr; an uncaught exception is its traceback and status 1). Each command line keeps a
  test in its own process too (a fresh interpreter's whole stderr)."""
  out, err, argv, cwd = io.StringIO(), io.StringIO(), sys.argv, os.getcwd()
  # absl's app.run sets the verbosity and puts its handler on the root logger, the command line
  # its handler's formatter (`command_line.quiet_libraries`): each put back
  verbosity, handlers = absl_logging.get_verbosity(), logging.root.handlers[:]
  formatter = absl_logging.get_absl_handler().python_handler.formatter
  sys.argv = [module, *map(str, args)]
  code = 0
  os.chdir(REPO)  # as the command lines are run: from the checkout
  try:
    with flags_of_one_command(module), contextlib.redirect_stdout(out):
      with contextlib.redirect_stderr(err):
        try:
          runpy.run_module(module, run_name="__main__", alter_sys=False)
        except SystemExit as e:
          code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:  # pylint: disable=broad-except
          traceback.print_exc()
          code = 1
  finally:
    os.chdir(cwd)
    sys.argv = argv
    absl_logging.set_verbosity(verbosity)
    logging.root.handlers[:] = handlers
    absl_logging.get_absl_handler().setFormatter(formatter)
  return types.SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def algorithm_1(method, solve):
  """CascadeVAE's loss after t_d as Algorithm 1 writes it (Eq. 6): eps sampled once, u[i, k] =
  log p(x_i | z_i, e_k) without gradient, d the exact assignment of u solved inside the loss,
  then the decoder run afresh at (z, d) with d a constant."""

  def loss(params, batch, rng, t):
    vae, x = params["vae"], batch["image"]
    mean, logvar = method.encode(vae, x)
    z = losses.reparameterize(rng, mean, logvar)
    u = method.unary(jax.lax.stop_gradient(vae), jax.lax.stop_gradient(z), x)
    d = jax.lax.stop_gradient(solve(u))
    rec = -jnp.mean(method.log_likelihood(method.decode_logits(vae, method.decoder_input(z, d)), x))
    kl = jnp.mean(losses.gaussian_kl_per_dim(mean, logvar), axis=0)
    total = rec + jnp.sum(method.betas(t) * kl) + method.regularizer(vae)
    return total, {"loss": total, "reconstruction": rec, "d": d}

  return loss
