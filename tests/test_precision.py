"""The mixed-precision policy (``model.dtype``, ``model.precision``; `disentangle.nn.networks`):
the networks compute in bfloat16 while parameters, optimiser state, the likelihood, the KL terms
and the assignment's costs stay float32."""
from __future__ import annotations

import jax
from jax.extend import core as jax_core
import jax.numpy as jnp
import numpy as np
import pytest

from disentangle import config as config_lib
from disentangle import methods
from disentangle.nn import networks
from disentangle.train import codes
from disentangle.train import trainer
from tests import helpers


def _operand_dtypes(jaxpr, primitives=("conv_general_dilated", "dot_general")) -> list[str]:
  """The input dtypes of every convolution and dot in ``jaxpr`` (sub-jaxprs included)."""
  found = []
  for eqn in jaxpr.eqns:
    if eqn.primitive.name in primitives:
      found.append(str(eqn.invars[0].aval.dtype))
    for sub in jax_core.jaxprs_in_params(eqn.params):
      found += _operand_dtypes(sub, primitives)
  return found


def _operand_dtypes_by_layer(jaxpr, layers, prefix="") -> dict[str, set[str]]:
  """{layer: the operand dtypes of its convolutions and dots} in ``jaxpr`` (sub-jaxprs of
  custom_vjp, pjit, ... included), each op named by the first of ``layers`` in its name stack
  (flax's module names, under jvp / transpose)."""
  found: dict[str, set[str]] = {}
  for eqn in jaxpr.eqns:
    stack = "/".join(filter(None, [prefix, str(eqn.source_info.name_stack)]))
    if eqn.primitive.name in ("conv_general_dilated", "dot_general"):
      layer = next((n for n in stack.split("/") if n in layers), stack)  # unnamed: its stack
      found.setdefault(layer, set()).update(str(v.aval.dtype) for v in eqn.invars)
    for sub in jax_core.jaxprs_in_params(eqn.params):
      for layer, dtypes in _operand_dtypes_by_layer(sub, layers, stack).items():
        found.setdefault(layer, set()).update(dtypes)
  return found


@pytest.mark.parametrize("conv_impl", config_lib.CONV_IMPLS)
def test_bfloat16_decoder_computes_its_logits_layer_in_float32(conv_impl):
  """The dSprites decoder under ``model.dtype='bfloat16'``, its forward and its gradient: the
  logits layer's convolutions or matmuls take float32 operands, every earlier layer's bfloat16."""
  decoder = networks.Decoder(image_shape=(64, 64, 1), conv_impl=conv_impl, dtype="bfloat16")
  latent = jax.ShapeDtypeStruct((2, 10), jnp.float32)
  params = jax.eval_shape(decoder.init, jax.random.PRNGKey(0), latent)
  layers = [name for name, _, _ in networks.decoder_layers(decoder)]
  assert layers[-1] == "logits"
  jaxpr = jax.make_jaxpr(jax.value_and_grad(lambda p, z: jnp.sum(decoder.apply(p, z)),
                                            argnums=(0, 1)))(params, latent).jaxpr
  assert _operand_dtypes_by_layer(jaxpr, set(layers)) == {
      name: {"float32" if name == "logits" else "bfloat16"} for name in layers}


@pytest.mark.slow
@pytest.mark.parametrize("conv_impl", ["gemm", "flax"])
def test_bfloat16_step_keeps_float32_where_the_policy_says(conv_impl):
  config = helpers.tiny_config("cascadevae", **{"model.dtype": "bfloat16",
                                                "model.conv_impl": conv_impl})
  data = helpers.TinyImages()
  method = methods.build(config, data.image_shape)
  batch = {"image": jnp.asarray(data.get_images(np.arange(8)))}
  state = jax.jit(method.init)(jax.random.PRNGKey(0))
  assert {leaf.dtype for leaf in jax.tree.leaves((state.params, state.opt_state))
          if jnp.issubdtype(leaf.dtype, jnp.floating)} == {jnp.dtype("float32")}

  vae = state.params["vae"]
  mean, logvar = method.encode(vae, batch["image"])
  logits = method.decode_logits(vae, method.decoder_input(mean))
  u = method.unary(vae, mean, batch["image"])
  assert (mean.dtype, logvar.dtype, logits.dtype, u.dtype) == (jnp.float32,) * 4

  # The trainer's step of the discrete phase (after t_d: costs, solve, update): the convolutions
  # and the trunk's and decoder's matmuls take bfloat16 operands; the heads' matmuls (float32
  # kernels) take float32.
  composed = codes.step(method.for_phase(True))
  step = jax.jit(composed)
  jaxpr = jax.make_jaxpr(composed)(state, batch).jaxpr
  dtypes = _operand_dtypes(jaxpr)
  assert dtypes.count("bfloat16") > dtypes.count("float32") > 0
  for _ in range(3):
    state, metrics = step(state, batch)
  assert {leaf.dtype for leaf in jax.tree.leaves(state.params)} == {jnp.dtype("float32")}
  assert float(metrics["discrete_active"]) == 1.0
  assert np.isfinite(float(metrics["loss"])) and metrics["loss"].dtype == jnp.float32


def test_float32_policy_is_unchanged_and_precision_maps_to_lax():
  """``model.dtype='float32'`` traces no bfloat16 at all; the precision names map to lax's."""
  config = helpers.tiny_config("cascadevae")
  method = methods.build(config, (32, 32, 1))
  state = jax.eval_shape(method.init, jax.random.PRNGKey(0))
  batch = {"image": jax.ShapeDtypeStruct((8, 32, 32, 1), jnp.float32)}
  assert "bfloat16" not in _operand_dtypes(jax.make_jaxpr(method.train_step)(state, batch).jaxpr)
  assert networks.precision("default") is None
  assert networks.precision("highest") == jax.lax.Precision.HIGHEST
  assert networks.compute_dtype(None) == jnp.float32


@pytest.mark.slow
def test_bfloat16_run_trains_with_float32_parameters_and_finite_losses(tmp_path):
  config = helpers.tiny_config("cascadevae", **{"model.dtype": "bfloat16",
                                                "model.conv_impl": "gemm"})
  state = trainer.train(config, tmp_path, dataset=helpers.TinyImages())
  assert {leaf.dtype for leaf in jax.tree.leaves(state.params)} == {jnp.dtype("float32")}
  losses = [m["loss"] for m in helpers.metrics_lines(tmp_path)
            if "loss" in m]
  assert len(losses) >= 3 and np.all(np.isfinite(losses))
