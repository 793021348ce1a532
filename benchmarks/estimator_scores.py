"""The suite's scores with today's scikit-learn classifiers and with the 2019 study's.

  python -m benchmarks.estimator_scores [--noise=0.3] [--latents=10] [--seed=0] [--points=0]

One representation of dSprites' factor grid (3 x 6 x 40 x 32 x 32 values; the observation of a
row is its factors, as disentanglement_lib's ``IdentityObservationsData``): the factors scaled to
[0, 1], mixed by a fixed random matrix into ``--latents`` dimensions (each factor mostly in one
of them) with Gaussian noise of std ``--noise``, so that no score saturates. The β-VAE score,
SAP, modularity / explicitness and DCI are computed with ``eval.estimators='current'`` and
``'study2019'`` (`disentangle.metrics.estimators`) from the same random streams, so the points
are the same and only the classifiers differ. ``--points`` N > 0 sets ``eval.suite_points``
(default 0: the study's 10,000 / 5,000). Prints one JSON line: each score both ways, the
difference (study2019 - current), the fits that did not converge, the seconds of each metric and
the load average.
"""
from __future__ import annotations

import argparse
import json
import os

import numpy as np

from disentangle.data.ground_truth import InMemoryGroundTruth
from disentangle.metrics import estimators
from disentangle.metrics import registry

SIZES = (3, 6, 40, 32, 32)
SCORES = {"beta_vae": ("eval_accuracy",), "sap": ("score",),
          "modularity": ("modularity", "explicitness_test"),
          "dci": ("disentanglement", "informativeness_test")}


def representation(noise: float, latents: int, seed: int):
  gen = np.random.default_rng(seed)
  mixing = 0.3 * gen.normal(size=(len(SIZES), latents))
  mixing[np.arange(len(SIZES)), np.arange(len(SIZES))] += 1.0
  def represent(x):
    x = np.asarray(x, np.float64) / (np.array(SIZES) - 1)
    return x @ mixing + noise * gen.normal(size=(len(x), latents))
  return represent


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--noise", type=float, default=0.3)
  parser.add_argument("--latents", type=int, default=10)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--points", type=int, default=0)
  args = parser.parse_args(argv)
  factors = np.indices(SIZES).reshape(len(SIZES), -1).T.astype(np.int64)
  data = InMemoryGroundTruth(factors, factors.astype(np.float32), SIZES)
  record = {"benchmark": "estimators", "noise": args.noise, "latents": args.latents,
            "seed": args.seed, "suite_points": args.points,
            "load_average_1min": round(os.getloadavg()[0], 2)}
  for name in estimators.ESTIMATORS:
    inputs = registry.Inputs("run", np.random.default_rng([args.seed, 1]), ground_truth=data,
                             represent=representation(args.noise, args.latents, args.seed),
                             encode_batch_size=10_000)
    out, seconds = registry.run(inputs, {"estimators": name, "suite_points": args.points},
                                names=tuple(SCORES))
    for metric, keys in SCORES.items():
      for key in keys:
        record.setdefault(f"{metric}.{key}", {})[name] = round(float(out[metric][key]), 5)
      est = out[metric].get("estimator", {})
      record.setdefault(f"{metric}.not_converged", {})[name] = (
          f"{est.get('not_converged', 0)} of {est.get('fits', 0)}")
      record.setdefault(f"{metric}_s", {})[name] = round(seconds[f"{metric}_s"], 1)
  for metric, keys in SCORES.items():
    for key in keys:
      both = record[f"{metric}.{key}"]
      both["difference"] = round(both["study2019"] - both["current"], 5)
  record["load_average_1min_end"] = round(os.getloadavg()[0], 2)
  print(json.dumps(record))


if __name__ == "__main__":
  main()
