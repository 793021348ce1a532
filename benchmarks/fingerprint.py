"""Fingerprints of short CascadeVAE trainings: do two versions of the code train the same numbers?

  cd CHECKOUT && python /path/to/benchmarks/fingerprint.py --out=FILE.json [--cases=a,b]

Run it in each checkout (the one holding the script imports nothing of it: the ``disentangle`` of
the current folder trains), then compare the two files: a case whose three hashes agree trained
bit for bit alike. Each case trains the entry point's own config (dSprites ``m6,smoke`` with
t_d moved to step 5, 10 steps; MNIST ``m10,smoke``, t_d = 0, 5 steps) in a temporary folder, on
its data (``DISENTANGLE_DATA_DIR``), logging every step. ONE JSON object per case on stdout and
in ``--out`` (a case already in the file is skipped, so a stopped run continues):

- ``params``: SHA-256 of the final parameters' bytes, every run's;
- ``metrics``: of each step's loss, reconstruction, KL per dimension and betas, every run's;
- ``codes``: of each step's share of each discrete class (the assignment's codes as counts);
- ``last_loss`` and the number of metric lines.

Cases: every convolution form (``flax``, ``fast``, ``gemm``) in float32 and bfloat16 for one
dSprites run, four unrolled dSprites runs and one MNIST run; four vmapped runs; the overlapped
placement unrolled and vmapped (also with a GPU's convolutions in bfloat16, dSprites and MNIST);
a vmapped sweep of lambda'; two vmapped MNIST runs; one dSprites run to step 104 of the smoke
schedule (t_d = 100). A checkout whose config names the overlap
``assignment_overlap`` (True / False) gets it under that name.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import sys
import tempfile

DSPRITES = "experiments/configs/dsprites_cascade.py:m6,smoke"
MNIST = "experiments/configs/mnist_cascade.py:m10,smoke"
SHORT = {"cascade.discrete_start": 5, "num_steps": 10}
KEYS = ("loss", "reconstruction", "discrete_fraction", "kl_per_dim", "betas")


def cases() -> dict[str, tuple[str, dict]]:
  """{name: (config argument, overrides)}."""
  out = {}
  for impl in ("flax", "fast", "gemm"):
    for dtype in ("float32", "bfloat16"):
      form = {"model.conv_impl": impl, "model.dtype": dtype}
      out[f"ds1_{impl}_{dtype}"] = (DSPRITES, {**SHORT, **form})
      out[f"ds4_{impl}_{dtype}"] = (DSPRITES, {**SHORT, "num_seeds": 4, **form})
      out[f"mn1_{impl}_{dtype}"] = (MNIST, {"num_steps": 5, **form})
  vmap = {"num_seeds": 4, "seed_layout": "vmap"}
  out["ds1_full_fast"] = (DSPRITES, {"num_steps": 104, "model.conv_impl": "fast"})
  out["ds4_vmap"] = (DSPRITES, {**SHORT, **vmap})
  out["ds4_unroll_overlap"] = (DSPRITES, {**SHORT, "num_seeds": 4, "overlapped": True})
  out["ds4_vmap_overlap"] = (DSPRITES, {**SHORT, **vmap, "overlapped": True})
  out["ds3_sweep_vmap"] = (DSPRITES, {**SHORT, "seed_layout": "vmap",
                                      "sweep": "cascade.penalty=0.001|0.01|0.1"})
  out["mn2_vmap"] = (MNIST, {"num_steps": 5, "num_seeds": 2, "seed_layout": "vmap"})
  gpu_like = {"model.conv_impl": "gemm", "model.dtype": "bfloat16", "overlapped": True}
  out["ds4_vmap_overlap_gemm_bf16"] = (DSPRITES, {**SHORT, **vmap, **gpu_like})
  out["mn4_vmap_overlap_gemm_bf16"] = (MNIST, {"num_steps": 5, **vmap, **gpu_like})
  out["ds4_unroll_overlap_gemm_bf16"] = (DSPRITES, {**SHORT, "num_seeds": 4, **gpu_like})
  return out


def _configured(arg: str, overrides: dict):
  from disentangle import launch  # pylint: disable=g-import-not-at-top
  config = launch.load_config(arg)
  config.progress_bar, config.log_every = False, 1
  overrides = dict(overrides)
  if "overlapped" in overrides:  # the placement under this checkout's name
    on = overrides.pop("overlapped")
    if "assignment_placement" in config:
      overrides["assignment_placement"] = "overlapped" if on else "step"
    else:
      overrides["assignment_overlap"] = on
  for field, value in overrides.items():
    node = config
    *parents, leaf = field.split(".")
    for name in parents:
      node = node[name]
    node[leaf] = value
  return config


def fingerprint(arg: str, overrides: dict) -> dict:
  """The hashes of one case (module docstring)."""
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top

  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory() as workdir:
    state = trainer.train(_configured(arg, overrides), workdir)
    params = hashlib.sha256()
    for leaf in jax.tree_util.tree_leaves(jax.device_get(state.params)):
      params.update(np.ascontiguousarray(leaf).tobytes())
    rows = []
    for path in sorted(pathlib.Path(workdir).rglob("metrics.jsonl")):
      for line in path.read_text().splitlines():
        record = json.loads(line)
        if "loss" in record:
          rows.append({k: record.get(k) for k in KEYS})
  digest = lambda x: hashlib.sha256(json.dumps(x).encode()).hexdigest()[:16]
  return {"params": params.hexdigest()[:16], "metrics": digest(rows),
          "codes": digest([r["discrete_fraction"] for r in rows]),
          "last_loss": rows[-1]["loss"] if rows else None, "lines": len(rows)}


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--out", required=True, help="JSON file of the fingerprints.")
  parser.add_argument("--cases", default="", help="Comma-separated names (default: all).")
  args = parser.parse_args(argv)
  sys.path.insert(0, os.getcwd())  # the checkout being fingerprinted
  table = cases()
  names = [n for n in args.cases.split(",") if n] or list(table)
  unknown = [n for n in names if n not in table]
  if unknown:
    parser.error(f"--cases: unknown {unknown}; known: {sorted(table)}")
  out = pathlib.Path(args.out)
  done = json.loads(out.read_text()) if out.exists() else {}
  for name in names:
    if name in done:
      continue
    done[name] = fingerprint(*table[name])
    print(json.dumps({"case": name, **done[name]}), flush=True)
    partial = out.with_name(out.name + ".partial")
    partial.write_text(json.dumps(done, indent=1))
    os.replace(partial, out)  # a stopped run leaves the cases it finished


if __name__ == "__main__":
  main()
