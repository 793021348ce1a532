"""DCI's gradient-boosted trees: scikit-learn's against the trees of a stage grown together.

  python -m benchmarks.dci_trees [--classes=32] [--features=6] [--one_hot=0] [--stages=20]
      [--points=10000] [--rounds=2] [--dci]

Fits ``GradientBoostingClassifier(n_estimators=stages)`` to one factor of ``--classes`` values on
``--points`` points of ``--features`` continuous columns (one carries the factor) and ``--one_hot``
one-hot columns, by scikit-learn (one thread) and by `disentangle.metrics.boosted_trees`,
interleaved ``--rounds`` times in one process (the first call, which compiles, is timed apart:
``compile_s``). Prints one JSON line: seconds per fit of each, their ratio, the largest difference
of their importances and of their training accuracies, and the load average. ``--dci`` instead
times `metrics.dlib.dci.importance_matrix` both ways on dSprites-shaped data (10,000 / 5,000 points,
factors of 3, 6, 40, 32, 32 values, 6 means, then with a 3-class code's one-hot block).
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
from sklearn import ensemble

from disentangle.metrics import boosted_trees
from disentangle.metrics.dlib import dci


def _one_factor(args, rng):
  y = rng.integers(0, args.classes, args.points)
  one_hot = np.eye(args.one_hot)[rng.integers(0, args.one_hot, args.points)] if args.one_hot else (
      np.zeros((args.points, 0)))
  x = np.concatenate([y[:, None] / args.classes + 0.05 * rng.normal(size=(args.points, 1)),
                      rng.normal(size=(args.points, args.features - 1)), one_hot], axis=1)
  return x, y


def _dsprites_like(n, rng):
  sizes = (3, 6, 40, 32, 32)
  y = np.stack([rng.integers(0, k, n) for k in sizes], 1)
  x = np.concatenate([y[:, 1:] / np.array(sizes[1:]) + 0.05 * rng.normal(size=(n, 4)),
                      rng.normal(size=(n, 2))], 1)
  code = (y[:, 0] + (rng.random(n) < 0.2)) % 3
  return x, np.eye(3)[code], y


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--classes", type=int, default=32)
  parser.add_argument("--features", type=int, default=6)
  parser.add_argument("--one_hot", type=int, default=0)
  parser.add_argument("--stages", type=int, default=20)
  parser.add_argument("--points", type=int, default=10_000)
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--dci", action="store_true")
  args = parser.parse_args(argv)
  rng = np.random.default_rng(0)
  record = {"benchmark": "dci_trees", "load_average_1min": round(os.getloadavg()[0], 2),
            "cpu_count": os.cpu_count()}
  if args.dci:
    (x_tr, c_tr, y_tr), (x_te, c_te, y_te) = _dsprites_like(10_000, rng), _dsprites_like(5_000, rng)
    groups = [np.array([j]) for j in range(6)] + [np.arange(6, 9)]
    for trees in ("sklearn", "together"):
      for name, a, b, g in (("means", x_tr, x_te, None),
                            ("with_code", np.c_[x_tr, c_tr], np.c_[x_te, c_te], groups)):
        t0 = time.perf_counter()
        r, train_acc, test_acc = dci.importance_matrix(a, y_tr, b, y_te, g, 0, trees=trees)
        record[f"{trees}_{name}_s"] = round(time.perf_counter() - t0, 1)
        record[f"{trees}_{name}"] = {"disentanglement": round(dci.disentanglement(r), 4),
                                     "completeness": round(dci.completeness(r), 4),
                                     "informativeness": [round(train_acc, 4), round(test_acc, 4)]}
  else:
    x, y = _one_factor(args, rng)
    record.update(vars(args))
    t0 = time.perf_counter()
    boosted_trees.fit(x, y, num_stages=1, random_state=0)
    record["compile_s"] = round(time.perf_counter() - t0, 2)
    times = {"together": [], "sklearn": []}
    for _ in range(args.rounds):
      t0 = time.perf_counter()
      ours = boosted_trees.fit(x, y, num_stages=args.stages, random_state=0)
      times["together"].append(time.perf_counter() - t0)
      t0 = time.perf_counter()
      ref = ensemble.GradientBoostingClassifier(n_estimators=args.stages, random_state=0).fit(x, y)
      times["sklearn"].append(time.perf_counter() - t0)
    record.update({f"{k}_s": round(min(v), 2) for k, v in times.items()})
    record["ratio"] = round(min(times["sklearn"]) / min(times["together"]), 2)
    record["importance_max_difference"] = float(
        np.abs(ours.feature_importances - ref.feature_importances_).max())
    record["train_accuracy"] = [float(np.mean(boosted_trees.predict(ours, x) == y)),
                                float(np.mean(ref.predict(x) == y))]
  record["load_average_1min_end"] = round(os.getloadavg()[0], 2)
  print(json.dumps(record), flush=True)


if __name__ == "__main__":
  main()
