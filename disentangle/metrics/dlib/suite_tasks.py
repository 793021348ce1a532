"""Registration of disentanglement_lib's later scores in `registry`, beside `suite`.

The downstream tasks (``downstream_task``, ``reduced_downstream_task``,
``strong_downstream_task``: `downstream`), the fairness of Locatello et al. 2019b
(`fairness_study`) and the unified scores (`unified`), each switched on by its run flag
(``eval.downstream``, ``eval.fairness_dlib``, ``eval.unified_scores``): each costs more than the
rest of the suite. Settings and protocols as in `suite` (`suite_common`): the means alone,
``protocol='disentanglement_lib'``, except the plain downstream tasks, whose classifiers read a
discrete code's one-hot block too.
"""
from __future__ import annotations

import functools
from typing import Optional

import numpy as np

from disentangle.metrics import estimators as estimators_lib
from disentangle.metrics import registry
from disentangle.metrics import sampling
from disentangle.metrics.dlib import common
from disentangle.metrics.dlib import downstream
from disentangle.metrics.dlib import fairness
from disentangle.metrics.dlib import sap
from disentangle.metrics.dlib import unified


def _task_settings(predictor: str, sizes, num_test: int, trees: bool = False, **extra):
  """Settings of a task over training ``sizes``: ``num_points`` is the evaluation's points
  (``eval.suite_points``, else the largest size); sizes above it are left out and recorded;
  ``trees``: DCI's importances are read (``eval.dci_trees``)."""
  def settings(cfg, stage):
    del stage
    num_points = common.points(cfg, max(sizes))
    within, above = downstream.sizes_within(sizes, num_points)
    out = dict(predictor=predictor, num_train=within, sizes_left_out=above,
               num_points=num_points, num_test=common.points(cfg, num_test, half=True),
               estimators=common.estimators_of(cfg), use_discrete=common.use_discrete(cfg),
               **extra)
    if trees:
      out["trees"] = registry.setting(cfg, "dci_trees", "together")
    return out
  return settings


def _task_start(inputs: registry.Inputs, s: dict):
  """(factors used, tree seed, fit log) after the checks every task shares."""
  used = downstream.used_factors(inputs.ground_truth)
  downstream.check_sizes(s["num_train"], s["num_points"])
  estimators_lib.check(s["estimators"])
  return used, int(inputs.rng.integers(2**31)), estimators_lib.FitLog()


def _task_record(s: dict, log, seed: int, used) -> dict:
  keys = ("num_train", "sizes_left_out", "num_points", "num_test")
  return dict({k: s[k] for k in keys}, factors_used=used, tree_seed=seed,
              estimator=log.record(downstream.predictor_settings(s["predictor"],
                                                                 s["estimators"])))


@common.sampled_from_the_grid
def _downstream(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """disentanglement_lib's downstream task (`metrics.downstream`): per training size, a fresh
  training and test set; value: the mean test accuracy at the largest size computed."""
  used, seed, log = _task_start(inputs, s)
  draw = functools.partial(downstream.draw, inputs.ground_truth, inputs.represent,
                           rng=inputs.rng, used=used, encode_batch_size=inputs.encode_batch_size)
  by_size = {}
  for size in s["num_train"]:
    (rep_tr, y_tr), (rep_te, y_te) = draw(size, minimum=2), draw(s["num_test"])
    code_sizes = sampling.code_sizes(rep_tr, rep_te)
    for protocol, with_codes in sampling.protocols(rep_tr, True):
      x_tr = sampling.features(rep_tr, with_codes, code_sizes)[0]
      x_te = sampling.features(rep_te, with_codes, code_sizes)[0]
      try:
        out = downstream.summary(downstream.accuracies(
            s["predictor"], x_tr, y_tr, x_te, y_te, seed, estimators=s["estimators"], log=log))
      except ValueError as e:  # scikit-learn's multinomial fit of a fold missing a class
        if s["predictor"] != "logistic_regression_cv":
          raise
        out = {"not_computed": f"scikit-learn's LogisticRegressionCV failed at {size} points: "
                               f"{str(e).splitlines()[0]}"}
      by_size.setdefault(protocol, {})[str(size)] = out
  by = {}
  for protocol, sizes in by_size.items():
    done = [n for n, r in sizes.items() if "not_computed" not in r]
    if not done:
      raise sampling.MetricInputError(f"no training size of num_train {s['num_train']} could be "
                                      f"fitted: {sizes[str(s['num_train'][0])]['not_computed']}")
    by[protocol] = dict(sizes[done[-1]], by_size=sizes, value_num_train=int(done[-1]),
                        protocol=protocol)
  return common.headline(by, "mean_test_accuracy", s["use_discrete"],
                         **_task_record(s, log, seed, used))


@common.sampled_from_the_grid
def _reduced_downstream(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """disentanglement_lib's reduced downstream task (`downstream.reduced_accuracies`); value:
  the mean test accuracy of the reduced factor at the largest size."""
  used, seed, log = _task_start(inputs, s)
  by_size = {}
  for size in s["num_train"]:
    rep_tr, y_tr = downstream.draw(inputs.ground_truth, inputs.represent, size, inputs.rng, used,
                                   inputs.encode_batch_size, minimum=2)
    rep_te, y_te = downstream.draw(inputs.ground_truth, inputs.represent, s["num_test"],
                                   inputs.rng, used, inputs.encode_batch_size)
    by_size[str(size)] = downstream.reduced_accuracies(
        s["predictor"], rep_tr.mean, y_tr, rep_te.mean, y_te, s["num_factors_to_remove"], seed,
        trees=s["trees"], estimators=s["estimators"], log=log)
  last = by_size[str(s["num_train"][-1])]
  return dict({k: v for k, v in last.items() if k != "per_factor"},
              value=last["mean_test_accuracy_reduced_factor"],
              value_is="mean_test_accuracy_reduced_factor", by_size=by_size,
              protocol=sampling.PROTOCOL, use_discrete=False,
              num_factors_to_remove=s["num_factors_to_remove"],
              correlation_measure=f"factorwise_dci ({common.DCI_TREES[s['trees']]})",
              trees=s["trees"],
              **_task_record(s, log, seed, used))


@common.sampled_from_the_grid
def _strong_downstream(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """disentanglement_lib's strong downstream task (`downstream.strong_accuracies`); value: the
  mean strong (out-of-distribution) test accuracy at the largest size."""
  used, seed, log = _task_start(inputs, s)
  by_size = {}
  for size in s["num_train"]:
    rows = [np.asarray(inputs.ground_truth.sample_factors(n, inputs.rng), np.int64)
            for n in (size, s["num_test"])]
    by_size[str(size)] = downstream.strong_accuracies(
        inputs.ground_truth, inputs.represent, inputs.rng, s["predictor"], *rows, used,
        s["num_experiments"], seed, inputs.encode_batch_size, estimators=s["estimators"],
        log=log)
  last = by_size[str(s["num_train"][-1])]
  return dict({k: v for k, v in last.items() if k != "experiments"},
              value=last["mean_strong_test_accuracy"], value_is="mean_strong_test_accuracy",
              by_size=by_size, protocol=sampling.PROTOCOL, use_discrete=False,
              num_experiments=s["num_experiments"], **_task_record(s, log, seed, used))


@common.sampled_from_the_grid
def _fairness_dlib(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Locatello et al. 2019b's unfairness (`metrics.fairness_study`); value: the paper's score,
  ``mean_fairness:mean_pred:mean_sens``."""
  common.require_ground_truth(inputs)
  sizes = [int(n) for n in inputs.ground_truth.factor_sizes]
  used = [k for k, n in enumerate(sizes) if n > 1]
  if len(used) < 2:
    raise sampling.MetricInputError(
        f"needs at least 2 factors with more than one value (a target and a sensitive one); "
        f"the set's factor_sizes are {sizes}")
  estimators_lib.check(s["estimators"])
  seed, log = int(inputs.rng.integers(2**31)), estimators_lib.FitLog()
  out = fairness.unfairness(
      inputs.ground_truth, inputs.represent, inputs.rng, used, s["num_train"],
      s["num_test_points_per_class"], s["predictor"], seed, inputs.encode_batch_size,
      estimators=s["estimators"], log=log)
  scores = {name: fairness.summarize(out[name]) for name in ("mean_fairness",
                                                                   "max_fairness")}
  return {"value": scores["mean_fairness"]["mean_pred:mean_sens"],
          "value_is": "mean_fairness:mean_pred:mean_sens", "scores": scores,
          "mean_fairness_matrix": out["mean_fairness"], "max_fairness_matrix": out["max_fairness"],
          "train_accuracy_per_target": out["train_accuracy_per_target"],
          "single_class_factors": out["single_class_factors"], "protocol": sampling.PROTOCOL,
          "use_discrete": False, "factors_used": used, "num_train": s["num_train"],
          "num_test_points_per_class": s["num_test_points_per_class"], "tree_seed": seed,
          "estimator": log.record(downstream.predictor_settings(s["predictor"],
                                                                s["estimators"]))}


@common.sampled_from_the_grid
def _unified_scores(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """disentanglement_lib's unified scores (`metrics.unified`) of every matrix; value: DCI
  disentanglement of the importance matrix (the scores of each matrix under ``by_matrix``)."""
  estimators_lib.check(s["estimators"])
  sets, used, _ = common.sets(inputs, s)
  (rep_tr, y_tr), (rep_te, y_te) = sets["train"], sets["test"]
  seed, log = int(inputs.rng.integers(2**31)), estimators_lib.FitLog()
  by_matrix = unified.unified_scores(rep_tr.mean, y_tr, rep_te.mean, y_te, s["matrices"],
                                     random_state=seed, num_bins=s["num_bins"], trees=s["trees"],
                                     estimators=s["estimators"], log=log)
  first = "importance_gbt_matrix" if "importance_gbt_matrix" in by_matrix else s["matrices"][0]
  return {"value": by_matrix[first]["dci_disentanglement"],
          "value_is": f"{first}:dci_disentanglement", "by_matrix": by_matrix,
          "protocol": sampling.PROTOCOL, "use_discrete": False, "factors_used": used,
          "num_train": s["num_train"], "num_test": s["num_test"], "num_bins": s["num_bins"],
          "matrices": list(s["matrices"]), "tree_seed": seed, "trees": s["trees"],
          "svm": log.record(estimators_lib.linear_svc_settings(s["estimators"], sap.SVC_C,
                                                               "balanced"))}


def _describe_task(m: dict, key: str) -> str:
  left = (f" (above {m['num_points']} points left out: {list(m['sizes_left_out'])})"
          if m["sizes_left_out"] else "")
  return (f"{common.describe_protocols(m, key)}: {key} at {m['num_train'][-1]} training points; "
          f"sizes {list(m['num_train'])}{left}, {m['num_test']} test points, "
          f"{m['estimator']['estimator']} "
          f"[{m['estimator'].get('estimators') or m['estimator'].get('implementation')}]")


_GBT = "gradient_boosting_classifier"

registry.register(registry.Metric(
    "downstream_logistic", "downstream acc. (logistic)", _downstream,
    _task_settings("logistic_regression_cv", downstream.NUM_TRAIN, downstream.NUM_TEST),
    training_flag="", run_flag="downstream", ground_truth=True, sampled=True, postprocessed=True,
    describe=lambda m: _describe_task(m, "mean_test_accuracy")))
registry.register(registry.Metric(
    "downstream_trees", "downstream acc. (boosted trees)", _downstream,
    _task_settings(_GBT, downstream.NUM_TRAIN, downstream.NUM_TEST),
    training_flag="", run_flag="downstream", ground_truth=True, sampled=True, postprocessed=True,
    describe=lambda m: _describe_task(m, "mean_test_accuracy")))
registry.register(registry.Metric(
    "reduced_downstream", "reduced downstream acc.", _reduced_downstream,
    _task_settings(_GBT, downstream.REDUCED_NUM_TRAIN, downstream.REDUCED_NUM_TEST, trees=True,
                   num_factors_to_remove=downstream.NUM_FACTORS_TO_REMOVE),
    training_flag="", run_flag="downstream", ground_truth=True, sampled=True, postprocessed=True,
    describe=lambda m: (_describe_task(m, "mean_test_accuracy_reduced_factor") + f", "
                        f"{m['num_factors_to_remove']} latent(s) removed per factor; other "
                        f"factors {m['mean_test_accuracy_other_factors']:.4f}")))
registry.register(registry.Metric(
    "strong_downstream", "strong downstream acc.", _strong_downstream,
    _task_settings(_GBT, downstream.STRONG_NUM_TRAIN, downstream.STRONG_NUM_TEST,
                   num_experiments=downstream.STRONG_NUM_EXPERIMENTS),
    training_flag="", run_flag="downstream", ground_truth=True, sampled=True, postprocessed=True,
    describe=lambda m: (_describe_task(m, "mean_strong_test_accuracy") + f", "
                        f"{m['num_experiments']} interventions per factor; in distribution "
                        f"{m['mean_test_accuracy']:.4f}, gap "
                        f"{m['strong_generalization_gap']:.4f}")))
registry.register(registry.Metric(
    "fairness_dlib", "unfairness (dlib)", _fairness_dlib,
    lambda cfg, stage: {
        "num_train": common.points(cfg, fairness.NUM_TRAIN),
        "num_test_points_per_class": min(fairness.NUM_TEST_POINTS_PER_CLASS, common.points(
            cfg, fairness.NUM_TEST_POINTS_PER_CLASS, half=True)),
        "predictor": fairness.PREDICTOR, "estimators": common.estimators_of(cfg)},
    training_flag="", run_flag="fairness_dlib", ground_truth=True, sampled=True, postprocessed=True,
    describe=lambda m: (f"{m['protocol']}: {m['value_is']}; max over pairs "
                        f"{m['scores']['mean_fairness']['max_pred:max_sens']:.4f}, "
                        f"{m['num_train']} training points, {m['num_test_points_per_class']} "
                        f"per sensitive value, {m['estimator']['estimator']}")))


def _unified_settings(cfg, stage):
  return dict(common.split_settings(unified, num_bins=unified.NUM_BINS,
                                    matrices=unified.MATRICES)(cfg, stage),
              trees=registry.setting(cfg, "dci_trees", "together"))


registry.register(registry.Metric(
    "unified_scores", "unified scores", _unified_scores, _unified_settings, training_flag="",
    run_flag="unified_scores",
    ground_truth=True, sampled=True, postprocessed=True, tabulated=False,
    logged=lambda m: {f"unified_{name}_{key}": r[key] for name, r in m["by_matrix"].items()
                      for key in ("dci_disentanglement", "mig", "sap", "modularity",
                                  "area_precision")},
    describe=lambda m: (f"{m['protocol']}: " + "; ".join(
        f"{name} DCI {r['dci_disentanglement']:.3f}, MIG {r['mig']:.3f}, SAP {r['sap']:.3f}, "
        f"modularity {r['modularity']:.3f}, precision area {r['area_precision']:.3f}"
        for name, r in m["by_matrix"].items()) + f"; {m['num_train']} / {m['num_test']} points")))


NAMES = ("downstream_logistic", "downstream_trees", "reduced_downstream",
                 "strong_downstream", "fairness_dlib", "unified_scores")
