"""Downstream classification tasks on a representation: plain, reduced and strong.

As disentanglement_lib computes them (Locatello et al. 2019, Sec. 6: "usefulness for downstream
tasks"); every task fits one classifier per factor on the posterior means and reports accuracy:

- **downstream** (`evaluation/metrics/downstream_task.py::compute_downstream_task`, study
  settings `config/unsupervised_study_v1/metric_configs/downstream_task_*.gin`): for each
  training size in ``num_train`` = (10, 100, 1,000, 10,000), a fresh training set of that size
  and a fresh test set of ``num_test`` = 5,000 points; per factor the train and test accuracy;
  the mean and the minimum over factors.
- **reduced** (`reduced_downstream_task.py::compute_reduced_downstream_task`): for each factor
  f, the ``num_factors_to_remove`` latents most important for f are deleted one at a time (each
  time the largest entry of f's column of DCI's importance matrix on the latents left,
  `factorwise_dci`), then every factor is predicted from the latents left: the accuracy of f
  (information left about it elsewhere) and the mean accuracy of the others.
- **strong** (`strong_downstream_task.py::compute_strong_downstream_task`): besides the plain
  task, for each factor i and each of ``n_experiment`` repetitions one other factor j is fixed
  to a random value in the whole training set and drawn from its other values in the test set
  (`intervene`); the classifier of i trained under the intervention is tested out of
  distribution. ``strong_generalization_gap`` = 1 - strong test accuracy / plain test accuracy.

The classifiers (`utils.make_predictor_fn`, chosen by the gin configs):

- ``'logistic_regression_cv'``: scikit-learn ``LogisticRegressionCV(Cs=10,
  cv=KFold(n_splits=5))`` built by `estimators.logistic_regression_cv` (``eval.estimators``:
  'current', the pinned scikit-learn's multinomial fit, or 'study2019', one-vs-rest as the
  study's scikit-learn 0.20 fitted it); the multinomial fit fails where a fold misses a class
  (10 or 100 training points of 40 orientations): such a training size is recorded as not
  computed, with the reason, and the other sizes still run.
- ``'gradient_boosting_classifier'``: scikit-learn's ``GradientBoostingClassifier()``, fitted
  by `boosted_trees` (the same model; every factor's trees of a stage grown together; under
  'study2019' scikit-learn 0.20's multi-class fit, as the study ran it).

Settings without a study config: disentanglement_lib's experiments set neither the reduced nor
the strong task; its only bindings are its evaluation tests
(`config/tests/evaluation/evaluate_test_configs/reduced_downstream_task.gin`: 100 training and
100 test points, one latent removed, `factorwise_dci`, boosted trees;
`strong_downstream_task_test.py`: 1,000 and 1,000 points, 2 repetitions, boosted trees), which
are the defaults here (`REDUCED_*`, `STRONG_*`).

Departures: only factors with more than one value are predicted (as the rest of the suite); a
factor whose training points all hold one value is predicted as that value (scikit-learn
refuses to fit it; recorded in ``single_class_factors``); the strong task's intervention draws
from the metric's stream (disentanglement_lib draws it from numpy's global one).

Registered in `registry` as ``downstream_logistic``, ``downstream_trees``,
``reduced_downstream`` and ``strong_downstream``, switched on by ``eval.downstream``.
"""
from __future__ import annotations

import functools
from typing import Callable, Optional, Sequence

import numpy as np

from disentangle.metrics import boosted_trees
from disentangle.metrics import estimators as estimators_lib
from disentangle.metrics import registry
from disentangle.metrics import sampling
from disentangle.metrics.dlib import common
from disentangle.metrics.dlib import dci
from disentangle.metrics.representation import MetricInputError
from disentangle.metrics.representation import encode_factors

NUM_TRAIN = (10, 100, 1_000, 10_000)
NUM_TEST = 5_000
PREDICTORS = ("logistic_regression_cv", "gradient_boosting_classifier")
LOGISTIC_CS = 10
LOGISTIC_FOLDS = 5
REDUCED_NUM_TRAIN = (100,)
REDUCED_NUM_TEST = 100
NUM_FACTORS_TO_REMOVE = 1
STRONG_NUM_TRAIN = (1_000,)
STRONG_NUM_TEST = 1_000
STRONG_NUM_EXPERIMENTS = 2


def predictor_settings(predictor: str, estimators: str = estimators_lib.DEFAULT) -> dict:
  """The words recorded beside a number for ``predictor`` (one of `PREDICTORS`)."""
  if predictor == "logistic_regression_cv":
    return dict(estimators_lib.logistic_regression_cv_settings(estimators, LOGISTIC_CS,
                                                               LOGISTIC_FOLDS),
                predictor=predictor)
  if predictor == "gradient_boosting_classifier":
    return {"predictor": predictor, "estimator": "GradientBoostingClassifier",
            "implementation": "boosted_trees", "estimators": estimators,
            "fit": boosted_trees.FIT_WORDS[estimators],
            "n_estimators": boosted_trees.NUM_STAGES,
            "learning_rate": boosted_trees.LEARNING_RATE, "max_depth": boosted_trees.MAX_DEPTH}
  raise ValueError(f"unknown predictor {predictor!r}; choose from {list(PREDICTORS)}")


def fit(predictor: str, x_train: np.ndarray, y_train: np.ndarray, random_state: int = 0,
        estimators: str = estimators_lib.DEFAULT,
        log: Optional[estimators_lib.FitLog] = None) -> Callable[[np.ndarray], np.ndarray]:
  """x -> predicted labels of one ``predictor`` fitted on ``x_train`` [n, d], ``y_train`` [n]
  (labels holding a single value: that value); logistic fits are counted in ``log``."""
  predictor_settings(predictor, estimators)
  y = np.asarray(y_train)
  if len(np.unique(y)) < 2:
    return lambda x: np.full(len(x), y[0])
  if predictor == "gradient_boosting_classifier":
    model = boosted_trees.fit(x_train, y, random_state=random_state, estimators=estimators)
    return lambda x: boosted_trees.predict(model, x)
  model = estimators_lib.logistic_regression_cv(estimators, LOGISTIC_CS, LOGISTIC_FOLDS)
  return estimators_lib.fit(model, x_train, y, log).predict


def fit_columns(predictor: str, x_train: np.ndarray, y_train: np.ndarray,
                random_state: int = 0, **kwargs) -> tuple[list, list]:
  """One classifier per column of ``y_train`` [n, K] on ``x_train`` (`fit`; the boosted trees
  of every column grown together, `boosted_trees.fit_columns`); (a predict function per column,
  the columns whose training labels hold a single value); ``kwargs``: `fit`'s."""
  y_train = np.asarray(y_train)
  single = [k for k in range(y_train.shape[1]) if len(np.unique(y_train[:, k])) < 2]
  predictors = {}
  fitted = [k for k in range(y_train.shape[1]) if k not in single]
  if predictor == "gradient_boosting_classifier" and fitted:
    models = boosted_trees.fit_columns(
        x_train, y_train[:, fitted], random_state=random_state,
        estimators=kwargs.get("estimators", estimators_lib.DEFAULT))
    predictors = {k: (lambda x, m=m: boosted_trees.predict(m, x)) for k, m in zip(fitted, models)}
  return [predictors.get(k) or fit(predictor, x_train, y_train[:, k], random_state, **kwargs)
          for k in range(y_train.shape[1])], single


def fit_predict(predictor: str, x_train: np.ndarray, y_train: np.ndarray,
                xs: Sequence[np.ndarray], random_state: int = 0, **kwargs) -> tuple[list, list]:
  """`fit_columns`, then (predictions [n_x, K] for each of ``xs``, the single-valued columns)."""
  predictors, single = fit_columns(predictor, x_train, y_train, random_state, **kwargs)
  return [np.stack([p(x) for p in predictors], axis=1) for x in xs], single


def accuracies(predictor: str, x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray,
               y_test: np.ndarray, random_state: int = 0, **kwargs) -> dict:
  """Per factor train and test accuracy of ``predictor`` (disentanglement_lib's
  `downstream_task._compute_loss`); ``x`` [n, d], ``y`` [n, K]; ``kwargs``: `fit`'s."""
  (p_train, p_test), single = fit_predict(predictor, x_train, y_train, (x_train, x_test),
                                          random_state, **kwargs)
  return {"train": np.mean(p_train == y_train, axis=0), "test": np.mean(p_test == y_test, axis=0),
          "single_class_factors": single}


def summary(acc: dict) -> dict:
  """disentanglement_lib's keys of one training size: mean and min over factors, per factor."""
  return {"mean_train_accuracy": float(np.mean(acc["train"])),
          "mean_test_accuracy": float(np.mean(acc["test"])),
          "min_train_accuracy": float(np.min(acc["train"])),
          "min_test_accuracy": float(np.min(acc["test"])),
          "train_accuracy_per_factor": acc["train"].tolist(),
          "test_accuracy_per_factor": acc["test"].tolist(),
          "single_class_factors": acc["single_class_factors"]}


def reduced_accuracies(predictor: str, x_train: np.ndarray, y_train: np.ndarray,
                       x_test: np.ndarray, y_test: np.ndarray, num_factors_to_remove: int,
                       random_state: int = 0, trees: str = "together", **kwargs) -> dict:
  """The reduced task of one training size (`compute_reduced_downstream_task`'s loop body).

  For each factor f: the latents left after removing, ``num_factors_to_remove`` times, the one
  with the largest DCI importance for f (`dci.importance_matrix` on the latents left, trees
  ``trees``); every factor's accuracy from them. Returns per factor ``removed`` (the latents
  deleted, in order), ``train`` / ``test`` [K] accuracies of every factor, and the means.
  """
  num_latents, num_factors = x_train.shape[1], y_train.shape[1]
  if num_factors_to_remove >= num_latents:
    raise MetricInputError(f"num_factors_to_remove={num_factors_to_remove} leaves no latent of "
                           f"{num_latents}")
  importance = {}  # the latents left -> their importance matrix (computed once)
  per_factor = []
  for f in range(num_factors):
    left = list(range(num_latents))
    removed = []
    for _ in range(num_factors_to_remove):
      key = tuple(left)
      if key not in importance:
        importance[key] = dci.importance_matrix(
            x_train[:, left], y_train, x_test[:, left], y_test, random_state=random_state,
            trees=trees, estimators=kwargs.get("estimators", estimators_lib.DEFAULT))[0]
      removed.append(left.pop(int(np.argmax(importance[key][:, f]))))
    acc = accuracies(predictor, x_train[:, left], y_train, x_test[:, left], y_test, random_state,
                     **kwargs)
    others = [k for k in range(num_factors) if k != f]
    per_factor.append({"removed": removed, "train": acc["train"].tolist(),
                       "test": acc["test"].tolist(),
                       "train_accuracy_reduced_factor": float(acc["train"][f]),
                       "test_accuracy_reduced_factor": float(acc["test"][f]),
                       "train_accuracy_other_factors": float(np.mean(acc["train"][others])),
                       "test_accuracy_other_factors": float(np.mean(acc["test"][others])),
                       "single_class_factors": acc["single_class_factors"]})
  mean = lambda key: float(np.mean([p[key] for p in per_factor]))
  return {"mean_train_accuracy_reduced_factor": mean("train_accuracy_reduced_factor"),
          "mean_test_accuracy_reduced_factor": mean("test_accuracy_reduced_factor"),
          "mean_train_accuracy_other_factors": mean("train_accuracy_other_factors"),
          "mean_test_accuracy_other_factors": mean("test_accuracy_other_factors"),
          "per_factor": per_factor}


def intervene(factors_train: np.ndarray, factors_test: np.ndarray, target: int,
              candidates: Sequence[int], factor_sizes: Sequence[int],
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
  """disentanglement_lib's `strong_downstream_task.intervene`: one factor j of ``candidates``
  other than ``target``, fixed to one random value v in the training rows and drawn uniformly
  from its other values in the test rows; (train rows, test rows, j, v), copies."""
  j = int(rng.choice([c for c in candidates if c != target]))
  values = list(range(int(factor_sizes[j])))
  v = int(rng.choice(values))
  values.remove(v)
  train, test = factors_train.copy(), factors_test.copy()
  train[:, j] = v
  test[:, j] = rng.choice(values, size=len(test))
  return train, test, j, v


def strong_accuracies(dataset, represent: Callable, rng: np.random.Generator, predictor: str,
                      factors_train: np.ndarray, factors_test: np.ndarray,
                      used: Sequence[int], num_experiments: int, random_state: int = 0,
                      encode_batch_size: int = 1000, **kwargs) -> dict:
  """The strong task of one training size (`compute_strong_downstream_task`'s loop body) on
  drawn factor rows [n, all factors]; ``used``: the factors predicted (and intervened on)."""
  sizes = [int(s) for s in dataset.factor_sizes]
  if len(used) < 2:
    raise MetricInputError(f"the strong downstream task intervenes on another factor: needs at "
                           f"least 2 factors with more than one value, got {len(used)}")
  encode = lambda rows: encode_factors(dataset, represent, rows, rng, encode_batch_size).mean
  x_train, x_test = encode(factors_train), encode(factors_test)
  plain = accuracies(predictor, x_train, factors_train[:, used], x_test, factors_test[:, used],
                     random_state, **kwargs)
  train, test, trials = [], [], []
  for i in used:
    for _ in range(num_experiments):
      f_train, f_test, j, v = intervene(factors_train, factors_test, i, used, sizes, rng)
      x_tr, x_te = encode(f_train), encode(f_test)
      acc = accuracies(predictor, x_tr, f_train[:, [i]], x_te, f_test[:, [i]], random_state,
                       **kwargs)
      train.append(float(acc["train"][0]))
      test.append(float(acc["test"][0]))
      trials.append({"target": int(i), "intervened": j, "train_value": v,
                     "train_accuracy": train[-1], "test_accuracy": test[-1]})
  out = {"mean_train_accuracy": float(np.mean(plain["train"])),
         "mean_test_accuracy": float(np.mean(plain["test"])),
         "mean_strong_train_accuracy": float(np.mean(train)),
         "mean_strong_test_accuracy": float(np.mean(test)), "experiments": trials,
         "single_class_factors": plain["single_class_factors"]}
  with np.errstate(divide="ignore", invalid="ignore"):
    out["strong_generalization_gap"] = float(
        1.0 - np.float64(out["mean_strong_test_accuracy"]) / out["mean_test_accuracy"])
  return out


def sizes_within(sizes: Sequence[int], num_points: int) -> tuple[tuple, tuple]:
  """(the training sizes of ``sizes`` up to ``num_points``, those above it)."""
  return (tuple(int(s) for s in sizes if s <= num_points),
          tuple(int(s) for s in sizes if s > num_points))


def check_sizes(sizes: Sequence[int], num_points: int, field: str = "num_train") -> None:
  """`MetricInputError` naming ``field`` for a size above ``num_points`` or below 2."""
  if not len(sizes):
    raise MetricInputError(f"{field} holds no training size")
  for s in sizes:
    if s > num_points:
      raise MetricInputError(f"{field} size {s} is larger than the evaluation's {num_points} "
                             f"points (eval.suite_points)")
    if s < 2:
      raise MetricInputError(f"{field} size {s}: needs at least 2 points")


def draw(dataset, represent: Callable, num_points: int, rng: np.random.Generator,
         used: Sequence[int], encode_batch_size: int = 1000, minimum: int = 1):
  """(representation, factors [n, used]) of ``num_points`` points (`sampling.sample_points`)."""
  rep, factors = sampling.sample_points(dataset, represent, num_points, rng, encode_batch_size,
                                        minimum=minimum)
  return rep, factors[:, list(used)]


def used_factors(dataset) -> list:
  """The factors with more than one value; `MetricInputError` when there is none."""
  sampling.check_ground_truth(dataset)
  used = [k for k, n in enumerate(dataset.factor_sizes) if int(n) > 1]
  if not used:
    raise MetricInputError("no factor has more than one value")
  return used


# -- Registration in `registry` ------------------------------------------------------------------

def _task_settings(predictor: str, sizes, num_test: int, trees: bool = False, **extra):
  """Settings of a task over training ``sizes``: ``num_points`` is the evaluation's points
  (``eval.suite_points``, else the largest size); sizes above it are left out and recorded;
  ``trees``: DCI's importances are read (``eval.dci_trees``)."""
  def settings(cfg, stage):
    del stage
    num_points = common.points(cfg, max(sizes))
    within, above = sizes_within(sizes, num_points)
    out = dict(predictor=predictor, num_train=within, sizes_left_out=above,
               num_points=num_points, num_test=common.points(cfg, num_test, half=True),
               estimators=common.estimators_of(cfg), use_discrete=common.use_discrete(cfg),
               **extra)
    if trees:
      out["trees"] = registry.setting(cfg, "dci_trees")
    return out
  return settings


def _task_start(inputs: registry.Inputs, s: dict):
  """(factors used, tree seed, fit log) after the checks every task shares."""
  used = used_factors(inputs.ground_truth)
  check_sizes(s["num_train"], s["num_points"])
  return used, int(inputs.rng.integers(2**31)), estimators_lib.FitLog()


def _task_record(s: dict, log, seed: int, used) -> dict:
  keys = ("num_train", "sizes_left_out", "num_points", "num_test")
  return dict({k: s[k] for k in keys}, factors_used=used, tree_seed=seed,
              estimator=log.record(predictor_settings(s["predictor"], s["estimators"])))


@common.sampled_from_the_grid
def _downstream(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """disentanglement_lib's downstream task (`accuracies`): per training size, a fresh
  training and test set; value: the mean test accuracy at the largest size computed."""
  used, seed, log = _task_start(inputs, s)
  draw_set = functools.partial(draw, inputs.ground_truth, inputs.represent, rng=inputs.rng,
                               used=used, encode_batch_size=inputs.encode_batch_size)
  by_size = {}
  for size in s["num_train"]:
    (rep_tr, y_tr), (rep_te, y_te) = draw_set(size, minimum=2), draw_set(s["num_test"])
    code_sizes = sampling.code_sizes(rep_tr, rep_te)
    for protocol, with_codes in sampling.protocols(rep_tr, True):
      x_tr = sampling.features(rep_tr, with_codes, code_sizes)[0]
      x_te = sampling.features(rep_te, with_codes, code_sizes)[0]
      try:
        out = summary(accuracies(
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
  """disentanglement_lib's reduced downstream task (`reduced_accuracies`); value:
  the mean test accuracy of the reduced factor at the largest size."""
  used, seed, log = _task_start(inputs, s)
  by_size = {}
  for size in s["num_train"]:
    rep_tr, y_tr = draw(inputs.ground_truth, inputs.represent, size, inputs.rng, used,
                        inputs.encode_batch_size, minimum=2)
    rep_te, y_te = draw(inputs.ground_truth, inputs.represent, s["num_test"], inputs.rng, used,
                        inputs.encode_batch_size)
    by_size[str(size)] = reduced_accuracies(
        s["predictor"], rep_tr.mean, y_tr, rep_te.mean, y_te, s["num_factors_to_remove"], seed,
        trees=s["trees"], estimators=s["estimators"], log=log)
  last = by_size[str(s["num_train"][-1])]
  return dict({k: v for k, v in last.items() if k != "per_factor"},
              value=last["mean_test_accuracy_reduced_factor"],
              value_is="mean_test_accuracy_reduced_factor", by_size=by_size,
              protocol=sampling.PROTOCOL, use_discrete=False,
              num_factors_to_remove=s["num_factors_to_remove"],
              correlation_measure=f"factorwise_dci ({dci.TREES[s['trees']]})",
              trees=s["trees"],
              **_task_record(s, log, seed, used))


@common.sampled_from_the_grid
def _strong_downstream(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """disentanglement_lib's strong downstream task (`strong_accuracies`); value: the
  mean strong (out-of-distribution) test accuracy at the largest size."""
  used, seed, log = _task_start(inputs, s)
  by_size = {}
  for size in s["num_train"]:
    rows = [np.asarray(inputs.ground_truth.sample_factors(n, inputs.rng), np.int64)
            for n in (size, s["num_test"])]
    by_size[str(size)] = strong_accuracies(
        inputs.ground_truth, inputs.represent, inputs.rng, s["predictor"], *rows, used,
        s["num_experiments"], seed, inputs.encode_batch_size, estimators=s["estimators"],
        log=log)
  last = by_size[str(s["num_train"][-1])]
  return dict({k: v for k, v in last.items() if k != "experiments"},
              value=last["mean_strong_test_accuracy"], value_is="mean_strong_test_accuracy",
              by_size=by_size, protocol=sampling.PROTOCOL, use_discrete=False,
              num_experiments=s["num_experiments"], **_task_record(s, log, seed, used))


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
    _task_settings("logistic_regression_cv", NUM_TRAIN, NUM_TEST),
    training_flag="", run_flag="downstream", ground_truth=True, sampled=True, postprocessed=True,
    describe=lambda m: _describe_task(m, "mean_test_accuracy")))
registry.register(registry.Metric(
    "downstream_trees", "downstream acc. (boosted trees)", _downstream,
    _task_settings(_GBT, NUM_TRAIN, NUM_TEST),
    training_flag="", run_flag="downstream", ground_truth=True, sampled=True, postprocessed=True,
    describe=lambda m: _describe_task(m, "mean_test_accuracy")))
registry.register(registry.Metric(
    "reduced_downstream", "reduced downstream acc.", _reduced_downstream,
    _task_settings(_GBT, REDUCED_NUM_TRAIN, REDUCED_NUM_TEST, trees=True,
                   num_factors_to_remove=NUM_FACTORS_TO_REMOVE),
    training_flag="", run_flag="downstream", ground_truth=True, sampled=True, postprocessed=True,
    describe=lambda m: (_describe_task(m, "mean_test_accuracy_reduced_factor") + f", "
                        f"{m['num_factors_to_remove']} latent(s) removed per factor; other "
                        f"factors {m['mean_test_accuracy_other_factors']:.4f}")))
registry.register(registry.Metric(
    "strong_downstream", "strong downstream acc.", _strong_downstream,
    _task_settings(_GBT, STRONG_NUM_TRAIN, STRONG_NUM_TEST,
                   num_experiments=STRONG_NUM_EXPERIMENTS),
    training_flag="", run_flag="downstream", ground_truth=True, sampled=True, postprocessed=True,
    describe=lambda m: (_describe_task(m, "mean_strong_test_accuracy") + f", "
                        f"{m['num_experiments']} interventions per factor; in distribution "
                        f"{m['mean_test_accuracy']:.4f}, gap "
                        f"{m['strong_generalization_gap']:.4f}")))
