"""Unfairness of classifiers trained on a representation (Locatello et al. 2019b, Sec. 4).

"On the Fairness of Disentangled Representations" (NeurIPS 2019), as disentanglement_lib
computes it (`evaluation/metrics/fairness.py::compute_fairness`, study settings
`config/fairness_study_v1/metric_configs/fairness.gin`: ``num_train`` = 10,000,
``num_test_points_per_class`` = 100, ``GradientBoostingClassifier()``). With every ground-truth
factor both a target y and a sensitive variable s: one classifier per target, trained on
``num_train`` points; for each other factor s, ``num_test_points_per_class`` factor rows are
drawn once and s is set to each of its values c in turn (an intervention: the observations are
drawn from the intervened rows); the predictions give counts [values of y, values of s] and

  unfairness(y, s) = sum_c P(s = c) TV(P(y_hat | do(s = c)), P(y_hat))     ("mean_fairness")
               or    max_c TV(P(y_hat | do(s = c)), P(y_hat))              ("max_fairness")

with TV the total variation distance (half the L1 distance) and P(y_hat) the predictions pooled
over the interventions (`inter_group_fairness`). The matrices [targets, sensitive factors] are
summarised by `summarize` (`compute_scores_dict`): per target the mean and max over sensitive
factors, per sensitive factor over targets, and the mean / max of those; the paper's score
(Sec. 4) is ``mean_fairness:mean_pred:mean_sens``.

This is another audit than `disentangle.metrics.fairness` (FFVAE's demographic-parity and
equalised-odds gaps of binary predictions against binary attributes of the data), hence its own
module. Only factors with more than one value take part (as the rest of the suite); counts are
normalised in float64 (disentanglement_lib: float32, differences ~1e-7).

Registered in `registry` as ``fairness_dlib``, switched on by ``eval.fairness_dlib``.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

from disentangle.metrics import estimators as estimators_lib
from disentangle.metrics import registry
from disentangle.metrics import sampling
from disentangle.metrics.dlib import common
from disentangle.metrics.dlib import downstream
from disentangle.metrics.representation import MetricInputError
from disentangle.metrics.representation import encode_factors

NUM_TRAIN = 10_000
NUM_TEST_POINTS_PER_CLASS = 100
PREDICTOR = "gradient_boosting_classifier"


def inter_group_fairness(counts: np.ndarray) -> tuple[float, float]:
  """(mean, max) total variation between P(y_hat | s = c) and P(y_hat) of ``counts``
  [predicted classes, sensitive classes], the mean weighted by the count of each c."""
  counts = np.asarray(counts, np.float64)
  per_class = counts.sum(axis=0)
  overall = counts.sum(axis=1) / counts.sum()
  tv = np.abs(counts / per_class[None, :] - overall[:, None]).sum(axis=0) / 2.0
  return float(np.sum(tv * per_class) / per_class.sum()), float(np.max(tv))


def summarize(matrix: np.ndarray) -> dict:
  """disentanglement_lib's `compute_scores_dict` of an unfairness matrix [targets, sensitive]
  (the diagonal unused), without the prefix: ``pred{i}:sens{j}``, ``pred{i}:mean_sens``, ...,
  ``mean_pred:mean_sens`` (mean over targets of the mean over sensitive factors)."""
  k = matrix.shape[0]
  off = ~np.eye(k, dtype=bool)
  rows = [matrix[i, off[i]] for i in range(k)]
  cols = [matrix[off[:, j], j] for j in range(k)]
  out = {f"pred{i}:sens{j}": float(matrix[i, j]) for i in range(k) for j in range(k) if i != j}
  for i, r in enumerate(rows):
    out[f"pred{i}:mean_sens"], out[f"pred{i}:max_sens"] = float(np.mean(r)), float(np.max(r))
  for j, c in enumerate(cols):
    out[f"sens{j}:mean_pred"], out[f"sens{j}:max_pred"] = float(np.mean(c)), float(np.max(c))
  for outer, inner, groups in (("sens", "pred", cols), ("pred", "sens", rows)):
    means = [np.mean(g) for g in groups]
    maxs = [np.max(g) for g in groups]
    out[f"mean_{outer}:mean_{inner}"] = float(np.mean(means))
    out[f"mean_{outer}:max_{inner}"] = float(np.mean(maxs))
    out[f"max_{outer}:mean_{inner}"] = float(np.max(means))
    out[f"max_{outer}:max_{inner}"] = float(np.max(maxs))
  return out


def unfairness(dataset, represent: Callable, rng: np.random.Generator, used: Sequence[int],
               num_train: int = NUM_TRAIN,
               num_test_points_per_class: int = NUM_TEST_POINTS_PER_CLASS,
               predictor: str = PREDICTOR, random_state: int = 0,
               encode_batch_size: int = 1000, **kwargs) -> dict:
  """``mean_fairness`` and ``max_fairness`` [targets, sensitive] over the factors ``used`` of
  ``dataset`` (indices into its factors), the counts behind them and the training accuracy;
  ``kwargs``: `downstream.fit`'s."""
  if len(used) < 2:
    raise MetricInputError(f"fairness needs at least 2 factors with more than one value (a "
                           f"target and a sensitive one), got {len(used)}")
  sizes = [int(dataset.factor_sizes[k]) for k in used]
  x_train, y_train = downstream.draw(dataset, represent, num_train, rng, used,
                                     encode_batch_size, minimum=2)
  x_train = x_train.mean
  k = len(used)
  mean_f, max_f = np.zeros((k, k)), np.zeros((k, k))
  counts_of = {}
  models_acc = []
  predictors, single = downstream.fit_columns(predictor, x_train, y_train, random_state,
                                              **kwargs)
  for i, predict in enumerate(predictors):
    models_acc.append(float(np.mean(predict(x_train) == y_train[:, i])))
    for j in range(k):
      if i == j:
        continue
      rows = np.asarray(dataset.sample_factors(num_test_points_per_class, rng), np.int64)
      # Every intervention s = c on the same rows, encoded in one call: [c, row].
      intervened = np.repeat(rows[None], sizes[j], axis=0)
      intervened[:, :, used[j]] = np.arange(sizes[j])[:, None]
      x = encode_factors(dataset, represent, intervened.reshape(-1, rows.shape[1]), rng,
                         encode_batch_size).mean
      pred = predict(x).reshape(sizes[j], len(rows))
      counts = np.stack([np.bincount(p, minlength=sizes[i]) for p in pred], axis=1)
      mean_f[i, j], max_f[i, j] = inter_group_fairness(counts)
      counts_of[f"pred{i}:sens{j}"] = counts.tolist()
  return {"mean_fairness": mean_f, "max_fairness": max_f, "counts": counts_of,
          "train_accuracy_per_target": models_acc, "single_class_factors": single}


# -- Registration in `registry` ------------------------------------------------------------------

@common.sampled_from_the_grid
def _fairness_dlib(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Locatello et al. 2019b's unfairness (`unfairness`); value: the paper's score,
  ``mean_fairness:mean_pred:mean_sens``."""
  common.require_ground_truth(inputs)
  sizes = [int(n) for n in inputs.ground_truth.factor_sizes]
  used = [k for k, n in enumerate(sizes) if n > 1]
  if len(used) < 2:
    raise sampling.MetricInputError(
        f"needs at least 2 factors with more than one value (a target and a sensitive one); "
        f"the set's factor_sizes are {sizes}")
  seed, log = int(inputs.rng.integers(2**31)), estimators_lib.FitLog()
  out = unfairness(
      inputs.ground_truth, inputs.represent, inputs.rng, used, s["num_train"],
      s["num_test_points_per_class"], s["predictor"], seed, inputs.encode_batch_size,
      estimators=s["estimators"], log=log)
  scores = {name: summarize(out[name]) for name in ("mean_fairness", "max_fairness")}
  return {"value": scores["mean_fairness"]["mean_pred:mean_sens"],
          "value_is": "mean_fairness:mean_pred:mean_sens", "scores": scores,
          "mean_fairness_matrix": out["mean_fairness"], "max_fairness_matrix": out["max_fairness"],
          "train_accuracy_per_target": out["train_accuracy_per_target"],
          "single_class_factors": out["single_class_factors"], "protocol": sampling.PROTOCOL,
          "use_discrete": False, "factors_used": used, "num_train": s["num_train"],
          "num_test_points_per_class": s["num_test_points_per_class"], "tree_seed": seed,
          "estimator": log.record(downstream.predictor_settings(s["predictor"],
                                                                s["estimators"]))}


registry.register(registry.Metric(
    "fairness_dlib", "unfairness (dlib)", _fairness_dlib,
    lambda cfg, stage: {
        "num_train": common.points(cfg, NUM_TRAIN),
        "num_test_points_per_class": min(NUM_TEST_POINTS_PER_CLASS, common.points(
            cfg, NUM_TEST_POINTS_PER_CLASS, half=True)),
        "predictor": PREDICTOR, "estimators": common.estimators_of(cfg)},
    training_flag="", run_flag="fairness_dlib", ground_truth=True, sampled=True, postprocessed=True,
    describe=lambda m: (f"{m['protocol']}: {m['value_is']}; max over pairs "
                        f"{m['scores']['mean_fairness']['max_pred:max_sens']:.4f}, "
                        f"{m['num_train']} training points, {m['num_test_points_per_class']} "
                        f"per sensitive value, {m['estimator']['estimator']}")))
