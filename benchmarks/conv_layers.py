"""Forward + backward time of each conv layer of the conv VAE, ``conv_impl='flax'`` vs ``'fast'``.

  python -m benchmarks.conv_layers [--batch=64] [--image_size=64] [--reps=15] [--only=decoder]
  python -m benchmarks.conv_layers --step [--steps=20] [--rounds=2]

Default: ONE JSON line per layer and implementation: median / p10 / p90 / min ms of one jitted
forward + backward (gradients w.r.t. the layer's input, kernel and bias of
``sum(layer(x) * w)``) at the given batch, for the encoder's 4x4 stride-2 convolutions and the
decoder's 4x4 stride-2 transposed convolutions of :mod:`disentangle.nn.networks` (64x64:
64->32 1->32ch, 32->16 32->32ch, 16->8 32->64ch, 8->4 64->64ch; 4->8 64->64ch, 8->16 64->32ch,
16->32 32->32ch, 32->64 32->1ch). The two implementations of a layer are timed round-robin, so
load from other processes hits both alike; ``speedup`` is flax median / this median. Encoder
layers also get ``impl='space_to_depth'``: the exact rewrite that `disentangle.nn.layers` measured
and rejected (pad by 1, space-to-depth by 2, stride-1 2x2 VALID convolution with the kernel
reshaped to [2, 2, 4 in, out]), defined here only, to keep that decision reproducible.

``--step``: a jitted encoder + decoder forward/backward + Adam step (:mod:`disentangle.nn.networks`,
Bernoulli cross-entropy + KL, CascadeVAE-shaped: m=6 continuous dims plus a 3-way one-hot into
the decoder) for each conv_impl, with glibc's default malloc and with
:func:`disentangle.train.host.configure_malloc`, each in a fresh subprocess (malloc settings
cannot be undone in a process); ONE JSON line per run with ms per step and minor page faults,
system and user CPU ms per step (``resource.getrusage``).
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from typing import Any, Callable

from absl import app
from absl import flags

_BATCH = flags.DEFINE_integer("batch", 64, "Batch size.")
_IMAGE_SIZE = flags.DEFINE_enum("image_size", "64", ["64", "32"], "Network variant.")
_REPS = flags.DEFINE_integer("reps", 15, "Timed repetitions per layer and implementation.")
_ONLY = flags.DEFINE_enum("only", None, ["encoder", "decoder"], "Time only these layers.")
_STEP = flags.DEFINE_bool("step", False, "Time the whole encoder + decoder step instead.")
_STEPS = flags.DEFINE_integer("steps", 20, "--step: timed steps per run.")
_ROUNDS = flags.DEFINE_integer("rounds", 2, "--step: runs of each configuration, interleaved.")
_WORKER = flags.DEFINE_string("step_worker", None, "Internal: 'impl,malloc' of one --step run.")

IMPLS = ("flax", "fast")
LATENT, CLASSES = 6, 3


def _summary(times_s: list[float]) -> dict[str, float]:
  import numpy as np  # pylint: disable=g-import-not-at-top
  ms = np.asarray(times_s) * 1e3
  return {"median_ms": round(float(np.median(ms)), 2),
          "p10_ms": round(float(np.percentile(ms, 10)), 2),
          "p90_ms": round(float(np.percentile(ms, 90)), 2),
          "min_ms": round(float(ms.min()), 2)}


def layer_specs(image_size: int) -> list[dict[str, Any]]:
  """(name, kind, input size, in channels, out channels) of the conv layers of `networks`."""
  from disentangle.nn import networks  # pylint: disable=g-import-not-at-top
  enc_widths = networks.ENCODER_WIDTHS["cascade"][image_size]  # the default encoder_widths
  dec_widths = networks.DECODER_WIDTHS[image_size] + (1,)
  bottleneck = networks.BOTTLENECK
  specs, size, cin = [], image_size, 1
  for i, cout in enumerate(enc_widths):
    specs.append(dict(layer=f"encoder/conv{i}", kind="conv", size=size, cin=cin, cout=cout))
    size, cin = size // 2, cout
  size, cin = bottleneck[0], bottleneck[2]
  for i, cout in enumerate(dec_widths):
    name = "decoder/logits" if i == len(dec_widths) - 1 else f"decoder/deconv{i}"
    specs.append(dict(layer=name, kind="conv_transpose", size=size, cin=cin, cout=cout))
    size, cin = size * 2, cout
  return specs


def _space_to_depth_conv(features: int):
  """``nn.Conv(features, (4, 4), (2, 2), 'SAME')`` on even sizes, as a stride-1 2x2 conv."""
  import flax.linen as nn  # pylint: disable=g-import-not-at-top
  from jax import lax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  class SpaceToDepthConv(nn.Module):

    @nn.compact
    def __call__(self, x):
      n, h, w, c = x.shape
      kernel = self.param("kernel", nn.linear.default_kernel_init, (4, 4, c, features))
      bias = self.param("bias", nn.initializers.zeros_init(), (features,))
      # SAME pads (1, 1); padded pixel 2p + r of block p meets kernel tap 2 * (block offset) + r.
      xp = jnp.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
      hb, wb = (h + 2) // 2, (w + 2) // 2
      xs = xp.reshape(n, hb, 2, wb, 2, c).transpose(0, 1, 3, 2, 4, 5).reshape(n, hb, wb, 4 * c)
      k = kernel.reshape(2, 2, 2, 2, c, features).transpose(0, 2, 1, 3, 4, 5)
      y = lax.conv_general_dilated(xs, k.reshape(2, 2, 4 * c, features), (1, 1), "VALID",
                                   dimension_numbers=("NHWC", "HWIO", "NHWC"))
      return y + bias

  return SpaceToDepthConv()


def _layer_grad_fn(kind: str, impl: str, cout: int) -> Callable:
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  from disentangle.nn import layers  # pylint: disable=g-import-not-at-top
  if impl == "space_to_depth":
    module = _space_to_depth_conv(cout)
  else:
    module = (layers.conv if kind == "conv" else layers.conv_transpose)(impl, cout)

  def loss(params, x, w):
    return jnp.sum(module.apply(params, x) * w)

  return module, jax.jit(jax.grad(loss, argnums=(0, 1)))


def bench_layers(batch: int, image_size: int, reps: int, only: str | None) -> None:
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  for spec in layer_specs(image_size):
    if only and not spec["layer"].startswith(only):
      continue
    size, cin, cout = spec["size"], spec["cin"], spec["cout"]
    out_size = size // 2 if spec["kind"] == "conv" else size * 2
    x = rng.standard_normal((batch, size, size, cin)).astype(np.float32)
    w = rng.standard_normal((batch, out_size, out_size, cout)).astype(np.float32)
    impls = IMPLS + (("space_to_depth",) if spec["kind"] == "conv" else ())
    fns, params, outputs = {}, None, {}
    for impl in impls:
      module, fns[impl] = _layer_grad_fn(spec["kind"], impl, cout)
      if params is None:
        params = jax.jit(module.init)(jax.random.key(0), x)
      for _ in range(2):  # compile + one warm-up
        outputs[impl] = jax.block_until_ready(fns[impl](params, x, w))
    for impl in impls:  # every variant must give flax's gradients
      for got, want in zip(jax.tree.leaves(outputs[impl]), jax.tree.leaves(outputs["flax"])):
        err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
        assert err < 1e-5, (spec["layer"], impl, err)
    times = {impl: [] for impl in impls}
    for _ in range(reps):
      for impl in impls:
        t0 = time.perf_counter()
        jax.block_until_ready(fns[impl](params, x, w))
        times[impl].append(time.perf_counter() - t0)
    summaries = {impl: _summary(times[impl]) for impl in impls}
    for impl in impls:
      print(json.dumps({
          **spec, "out_size": out_size, "batch": batch, "impl": impl, **summaries[impl],
          "speedup": round(summaries["flax"]["median_ms"] / summaries[impl]["median_ms"], 2),
          "reps": reps, "what": "forward+backward (grads w.r.t. input, kernel, bias)",
          "load_average": [round(v, 2) for v in os.getloadavg()]}), flush=True)


def step_worker(impl: str, malloc: bool, batch: int, image_size: int, steps: int) -> None:
  """One --step run (in its own process): prints one JSON line."""
  from disentangle.train import host  # pylint: disable=g-import-not-at-top
  applied = host.configure_malloc() if malloc else {}
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import optax  # pylint: disable=g-import-not-at-top

  from disentangle.nn import networks  # pylint: disable=g-import-not-at-top
  shape = (image_size, image_size, 1)
  encoder = networks.Encoder(LATENT, posterior_head="softplus_sigma", conv_impl=impl)
  decoder = networks.Decoder(shape, conv_impl=impl)
  x = (np.random.default_rng(0).random((batch,) + shape) > 0.5).astype(np.float32)
  onehot = jax.nn.one_hot(np.arange(batch) % CLASSES, CLASSES)
  key = jax.random.key(0)
  params = {"encoder": encoder.init(key, x),
            "decoder": decoder.init(key, jnp.zeros((batch, LATENT + CLASSES)))}
  optimizer = optax.adam(1e-4)

  def loss_fn(p, images, rng):
    mean, logvar = encoder.apply(p["encoder"], images)
    z = mean + jnp.exp(0.5 * logvar) * jax.random.normal(rng, mean.shape)
    logits = decoder.apply(p["decoder"], jnp.concatenate([z, onehot], axis=-1))
    rec = jnp.mean(jnp.sum(optax.sigmoid_binary_cross_entropy(logits, images), axis=(1, 2, 3)))
    kl = 0.5 * jnp.sum(jnp.mean(jnp.exp(logvar) + mean**2 - 1.0 - logvar, axis=0))
    return rec + kl

  @jax.jit
  def step(p, opt_state, images, rng):
    loss, grads = jax.value_and_grad(loss_fn)(p, images, rng)
    updates, opt_state = optimizer.update(grads, opt_state, p)
    return optax.apply_updates(p, updates), opt_state, loss

  opt_state = optimizer.init(params)
  for i in range(3):  # compile + warm-up
    params, opt_state, loss = step(params, opt_state, x, jax.random.fold_in(key, i))
    jax.block_until_ready(loss)
  times = []
  r0 = resource.getrusage(resource.RUSAGE_SELF)
  for i in range(steps):
    t0 = time.perf_counter()
    params, opt_state, loss = step(params, opt_state, x, jax.random.fold_in(key, 100 + i))
    jax.block_until_ready(loss)
    times.append(time.perf_counter() - t0)
  r1 = resource.getrusage(resource.RUSAGE_SELF)
  print(json.dumps({
      "what": "encoder+decoder fwd/bwd + adam step", "conv_impl": impl, "malloc": applied,
      "batch": batch, "image_size": image_size, "steps": steps, **_summary(times),
      "minor_faults_per_step": round((r1.ru_minflt - r0.ru_minflt) / steps),
      "sys_ms_per_step": round((r1.ru_stime - r0.ru_stime) / steps * 1e3, 1),
      "user_ms_per_step": round((r1.ru_utime - r0.ru_utime) / steps * 1e3, 1),
      "load_average": [round(v, 2) for v in os.getloadavg()]}), flush=True)


def bench_step(batch: int, image_size: int, steps: int, rounds: int) -> None:
  for _ in range(rounds):
    for impl in IMPLS:
      for malloc in (False, True):
        subprocess.run([sys.executable, "-m", "benchmarks.conv_layers",
                        f"--step_worker={impl},{int(malloc)}", f"--batch={batch}",
                        f"--image_size={image_size}", f"--steps={steps}"], check=True)


def main(argv):
  del argv
  batch, image_size = _BATCH.value, int(_IMAGE_SIZE.value)
  if _WORKER.value:
    impl, malloc = _WORKER.value.split(",")
    step_worker(impl, bool(int(malloc)), batch, image_size, _STEPS.value)
  elif _STEP.value:
    bench_step(batch, image_size, _STEPS.value, _ROUNDS.value)
  else:
    bench_layers(batch, image_size, _REPS.value, _ONLY.value)


if __name__ == "__main__":
  app.run(main)
