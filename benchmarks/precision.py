"""Fidelity of the bfloat16 compute policy (``model.dtype``) against float32, at a small budget.

  python -m benchmarks.precision [--config=dsprites_cascade:m6,smoke] [--seeds=0,1]
      [--steps=200] [--workdir=DIR] [--code_batches=8]

For each seed and each dtype (float32, bfloat16) the trainer runs the config in ``--workdir``
(a temporary folder by default); then, at the float32 run of the first seed's final parameters,
CascadeVAE's discrete codes of ``--code_batches`` batches of training images are solved under each
policy (same parameters, same eps): all float32, all bfloat16, and bfloat16 with the decoder in
float32, i.e. which part must stay float32 for the assignment to agree. ONE JSON line per run
(the mean loss and reconstruction over the last 5 logged steps and the final evaluation), ONE
with the code agreement, and a verdict: |bfloat16 - float32| of the same seed beside |seed a -
seed b| in float32 (the seed-to-seed spread), for the loss and each final metric.
"""
from __future__ import annotations

import importlib
import json
import pathlib
import tempfile

from absl import app
from absl import flags

_CONFIG = flags.DEFINE_string("config", "dsprites_cascade:m6,smoke",
                              "experiments.configs module:variant.")
_SEEDS = flags.DEFINE_list("seeds", ["0", "1"], "Seeds (the first: the code comparison).")
_STEPS = flags.DEFINE_integer("steps", 200, "Training steps of each run.")
_WORKDIR = flags.DEFINE_string("workdir", None, "Folder of the runs; default: a temporary one.")
_CODE_BATCHES = flags.DEFINE_integer("code_batches", 8, "Batches of the code comparison.")

DTYPES = ("float32", "bfloat16")


def _config(seed: int, dtype: str, steps: int):
  name, variant = _CONFIG.value.split(":")
  c = importlib.import_module(f"experiments.configs.{name}").get_config(variant)
  with c.unlocked():
    c.seed, c.model.dtype, c.num_steps = seed, dtype, steps
    c.eval_every = c.checkpoint_every = steps
    c.progress_bar = False
  return c


def _summary(run_dir: pathlib.Path) -> dict:
  lines = [json.loads(l) for l in (run_dir / "metrics.jsonl").read_text().splitlines()]
  train = [l for l in lines if "loss" in l][-5:]
  final = {k.split("/", 1)[1]: v for l in lines for k, v in l.items()
           if k.startswith("eval/") and isinstance(v, (int, float))}
  return {"loss": sum(l["loss"] for l in train) / len(train),
          "reconstruction": sum(l["reconstruction"] for l in train) / len(train), **final}


def sampled_unary(method, params, images, key):
  """CascadeVAE's assignment costs u [B, S] of ``images`` at ``params``, at one sample z of the
  posterior drawn with ``key`` (the step's costs, Algorithm 1), on the host."""
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top

  from disentangle import losses  # pylint: disable=g-import-not-at-top

  def unary(p, x, k):
    mean, logvar = method.encode(p["vae"], x)
    return method.unary(p["vae"], losses.reparameterize(k, mean, logvar), x)
  return np.asarray(jax.jit(unary)(params, images, key))


def code_agreement(config, params, images, rng) -> dict:
  """Share of CascadeVAE codes that differ from the float32 policy's, per policy (module
  docstring), over batches ``images`` [K, B, H, W, C] at ``params``, with one eps per batch."""
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top

  from disentangle import assignment  # pylint: disable=g-import-not-at-top
  from disentangle import methods  # pylint: disable=g-import-not-at-top

  def build(encoder_dtype, decoder_dtype):
    c = config.copy_and_resolve_references()
    with c.unlocked():
      c.model.dtype = encoder_dtype
    method = methods.build(c, images.shape[-3:])
    method.decoder = method.decoder.clone(dtype=decoder_dtype)
    return method

  policies = {"float32": build("float32", "float32"), "bfloat16": build("bfloat16", "bfloat16"),
              "bfloat16_decoder_float32": build("bfloat16", "float32")}

  keys = jax.random.split(rng, images.shape[0])
  u = {name: np.stack([sampled_unary(m, params, x, k) for x, k in zip(images, keys)])
       for name, m in policies.items()}
  penalty = config.cascade.penalty
  codes = {name: np.stack([assignment.assign(b, penalty) for b in v]) for name, v in u.items()}
  gap = np.abs(np.diff(np.sort(u["float32"], axis=-1)[..., -2:], axis=-1))
  return {name: {"codes_changed": float(np.mean(codes[name] != codes["float32"])),
                 "unary_max_abs_diff": float(np.max(np.abs(u[name] - u["float32"]))),
                 "unary_median_top2_gap": float(np.median(gap))}
          for name in policies if name != "float32"}


def main(argv):
  del argv
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top

  from disentangle.evaluation import evaluator  # pylint: disable=g-import-not-at-top
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  root = pathlib.Path(_WORKDIR.value or tempfile.mkdtemp(prefix="precision_"))
  seeds = [int(s) for s in _SEEDS.value]
  summaries, first_params = {}, None
  for seed in seeds:
    for dtype in DTYPES:
      run_dir = root / f"{dtype}_seed{seed}"
      config = _config(seed, dtype, _STEPS.value)
      state = trainer.train(config, run_dir, evaluator_factory=evaluator.factory(config))
      summaries[dtype, seed] = _summary(run_dir)
      print(json.dumps({"config": _CONFIG.value, "seed": seed, "dtype": dtype,
                        "steps": _STEPS.value, **summaries[dtype, seed]}), flush=True)
      if dtype == "float32" and seed == seeds[0]:
        first_params = jax.device_get(state.params)
  config = _config(seeds[0], "float32", _STEPS.value)
  data = trainer.load_training_data(config)
  rows = np.random.default_rng(seeds[0]).choice(
      data.num_examples, (_CODE_BATCHES.value, config.batch_size), replace=False)
  images = np.stack([data.get_images(r) for r in rows])
  print(json.dumps({"code_agreement_at": f"float32 seed {seeds[0]}, step {_STEPS.value}",
                    "rows": int(rows.size),
                    **code_agreement(config, first_params, images, jax.random.PRNGKey(7))}))
  verdict = {}
  for key in summaries[DTYPES[0], seeds[0]]:
    same_seed = [abs(summaries["bfloat16", s][key] - summaries["float32", s][key]) for s in seeds
                 if key in summaries["bfloat16", s]]
    spread = ([abs(summaries["float32", seeds[0]][key] - summaries["float32", seeds[1]][key])]
              if len(seeds) > 1 and key in summaries["float32", seeds[1]] else [])
    verdict[key] = {"bf16_vs_f32_same_seed": [round(v, 4) for v in same_seed],
                    "f32_seed_spread": [round(v, 4) for v in spread],
                    "within_spread": bool(spread) and max(same_seed) <= spread[0]}
  print(json.dumps({"verdict": verdict, "workdir": str(root)}))


if __name__ == "__main__":
  app.run(main)
