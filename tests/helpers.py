"""Small in-memory datasets and configs for trainer tests (no files, no network)."""
import chex
import jax
import numpy as np
import pytest

from disentangle import config as config_lib
from disentangle import methods


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
    node = c
    parts = k.split(".")
    for p in parts[:-1]:
      node = node[p]
    node[parts[-1]] = v
  return c


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
