"""`disentangle.train.host`: the XLA:CPU compiler options and the malloc settings."""
from __future__ import annotations

import platform

import jax
from jax import lax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from disentangle import config as config_lib
from disentangle.train import host


def _config(cpu_ynn_dot: bool) -> ml_collections.ConfigDict:
  c = config_lib.base_config()
  c.xla.cpu_ynn_dot = cpu_ynn_dot
  return c


def test_compiler_options_follow_the_config():
  assert jax.default_backend() == "cpu"
  assert host.compiler_options() == host.YNN_DOT_OPTIONS
  assert host.compiler_options(_config(True)) == host.YNN_DOT_OPTIONS
  assert host.compiler_options(_config(False)) is None
  # A config without the section (an older run's, filled as runs are read back) gets the default.
  older = config_lib.fill_missing(ml_collections.ConfigDict({"seed": 0}), config_lib.base_config())
  assert host.compiler_options(older) == host.YNN_DOT_OPTIONS


def _ynn_fusions(compiled) -> int:
  return compiled.as_text().count('"kind":"__ynn_fusion"')


def test_jit_keeps_convolutions_out_of_ynnpack():
  """The option leaves YNNPACK the dot only; jaxlib's default also takes the convolution."""
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.standard_normal((64, 8, 8, 64)), jnp.float32)
  k = jnp.asarray(rng.standard_normal((2, 2, 64, 32)) / 16, jnp.float32)
  w = jnp.asarray(rng.standard_normal((8 * 8 * 32, 10)) / 40, jnp.float32)

  def fn(x, k, w):  # a decoder-like 2x2 convolution, then a dense layer
    y = lax.conv_general_dilated(x, k, (1, 1), ((1, 0), (1, 0)),
                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return jnp.tanh(y).reshape(64, -1) @ w

  default = jax.jit(fn).lower(x, k, w).compile()
  with_option = host.jit(fn, _config(True)).lower(x, k, w).compile()
  assert _ynn_fusions(default) == 2, "jaxlib's default changed: re-measure host.compiler_options"
  assert _ynn_fusions(with_option) == 1
  assert _ynn_fusions(host.jit(fn, _config(False)).lower(x, k, w).compile()) == 2
  np.testing.assert_allclose(with_option(x, k, w), default(x, k, w), rtol=2e-5, atol=2e-5)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_configure_malloc_applies_both_thresholds():
  applied = host.configure_malloc()
  assert applied == {"M_MMAP_THRESHOLD": host.DEFAULT_MMAP_THRESHOLD,
                     "M_TRIM_THRESHOLD": host.DEFAULT_TRIM_THRESHOLD}
