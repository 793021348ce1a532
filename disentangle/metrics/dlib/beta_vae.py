"""β-VAE disentanglement score (Higgins et al. 2017, Sec. 3 and Appendix A.4).

As disentanglement_lib computes it (`evaluation/metrics/beta_vae.py::compute_beta_vae_sklearn`,
study settings `config/unsupervised_study_v1/metric_configs/beta_vae_sklearn.gin`): a training
point fixes one factor k drawn uniformly from all K factors, draws two batches of L =
`batch_size` = 64 factor rows that agree on factor k (the other factors independent), and its
feature is the mean over the batch of ``|z(x1) - z(x2)|`` per dimension (posterior means);
its label is k. `num_train` = 10,000 training points fit a scikit-learn ``LogisticRegression``
with default settings (L2, C = 1; lbfgs multinomial today, liblinear one-vs-rest as the 2019 study ran it:
``estimators``, `metrics.estimators`); the score is the accuracy on `num_eval` = 5,000 fresh
points (``eval_accuracy``; ``train_accuracy`` beside it). Chance is 1/K.

The fixed factor is drawn from the factors with more than one value (disentanglement_lib's
``randint(num_factors)`` over its dSprites factors, which leave out the constant colour; ours
lists colour). With the discrete code (``protocol='disentanglement_lib+discrete_codes'``) each code enters as a
one-hot block, so its feature is the fraction of pairs whose codes differ (per class column).

Registered in `registry` as ``beta_vae`` (settings and protocols: `common`).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from disentangle.metrics import estimators as estimators_lib
from disentangle.metrics import registry
from disentangle.metrics import sampling
from disentangle.metrics.dlib import common
from disentangle.metrics.representation import encode_factors

BATCH_SIZE = 64
NUM_TRAIN = 10_000
NUM_EVAL = 5_000
CHUNK = 1_000  # training points generated per call of the representation function


def _points(dataset, represent, num: int, length: int, rng: np.random.Generator,
            encode_batch_size: int):
  """(pairs' representations r1, r2 [num * length rows], labels [num])."""
  used = np.array([k for k, n in enumerate(dataset.factor_sizes) if int(n) > 1])
  labels = used[rng.integers(0, len(used), size=num)]
  f1 = np.asarray(dataset.sample_factors(num * length, rng), np.int64)
  f2 = np.array(dataset.sample_factors(num * length, rng), np.int64)
  fixed = np.repeat(labels, length)
  rows = np.arange(num * length)
  f2[rows, fixed] = f1[rows, fixed]
  r1 = encode_factors(dataset, represent, f1, rng, encode_batch_size)
  r2 = encode_factors(dataset, represent, f2, rng, encode_batch_size)
  sampling.check_finite(r1)
  sampling.check_finite(r2)
  return r1, r2, labels


def _feature(r1, r2, num: int, length: int, with_codes: bool, sizes) -> np.ndarray:
  x1, _ = sampling.features(r1, with_codes, sizes)
  x2, _ = sampling.features(r2, with_codes, sizes)
  return np.abs(x1 - x2).reshape(num, length, -1).mean(axis=1)


def beta_vae_score(dataset, represent: Callable[[np.ndarray], Any], rng: np.random.Generator, *,
                   batch_size: int = BATCH_SIZE, num_train: int = NUM_TRAIN,
                   num_eval: int = NUM_EVAL, encode_batch_size: int = 1000,
                   estimators: str = estimators_lib.DEFAULT) -> dict:
  """The β-VAE score of ``represent`` on ``dataset`` (module doc); every setting beside it.

  Returns {protocol: {'train_accuracy', 'eval_accuracy', ...}} for the means alone and, with a
  discrete code, with it too.
  """
  sampling.check_ground_truth(dataset)
  if num_train < 2 or num_eval < 1 or batch_size < 1:
    raise sampling.MetricInputError(
        f"needs num_train >= 2, num_eval >= 1, batch_size >= 1; got {num_train}, {num_eval}, "
        f"{batch_size}")
  sets = {}
  for name, num in (("train", num_train), ("eval", num_eval)):
    parts = []
    for start in range(0, num, CHUNK):
      parts.append(_points(dataset, represent, min(CHUNK, num - start), batch_size, rng,
                           encode_batch_size))
    sets[name] = parts
  reps = [r for parts in sets.values() for p in parts for r in p[:2]]
  sizes = sampling.code_sizes(*reps)
  has_codes = bool(sizes)
  out = {}
  for protocol, with_codes in sampling.protocols(reps[0], has_codes):
    x = {k: np.concatenate([_feature(r1, r2, len(y), batch_size, with_codes, sizes)
                            for r1, r2, y in parts]) for k, parts in sets.items()}
    y = {k: np.concatenate([p[2] for p in parts]) for k, parts in sets.items()}
    if len(np.unique(y["train"])) < 2:
      raise sampling.MetricInputError("the training points fix a single factor: no classifier")
    log = estimators_lib.FitLog()
    settings = estimators_lib.logistic_regression_settings(estimators)
    model = estimators_lib.fit(estimators_lib.logistic_regression(estimators, random_state=0),
                               x["train"], y["train"], log)
    out[protocol] = {
        "train_accuracy": float(np.mean(model.predict(x["train"]) == y["train"])),
        "eval_accuracy": float(np.mean(model.predict(x["eval"]) == y["eval"])),
        "protocol": protocol, "batch_size": int(batch_size), "num_train": int(num_train),
        "num_eval": int(num_eval),
        "factors_used": [k for k, n in enumerate(dataset.factor_sizes) if int(n) > 1],
        "classifier": estimators_lib.describe(settings),
        "estimator": log.record(settings),
        "num_features": int(x["train"].shape[1]),
    }
  return out


# -- Registration in `registry` ------------------------------------------------------------------

@common.sampled_from_the_grid
def _beta_vae(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Higgins et al.'s score as disentanglement_lib (`beta_vae_score`)."""
  common.require_ground_truth(inputs)
  by = beta_vae_score(inputs.ground_truth, inputs.represent, inputs.rng,
                      batch_size=s["batch_size"], num_train=s["num_train"],
                      num_eval=s["num_eval"], estimators=s["estimators"],
                      encode_batch_size=inputs.encode_batch_size)
  return common.headline(by, "eval_accuracy", s["use_discrete"])


registry.register(registry.Metric(
    "beta_vae", "β-VAE score", _beta_vae,
    lambda cfg, stage: {"batch_size": BATCH_SIZE,
                        "num_train": common.points(cfg, NUM_TRAIN),
                        "num_eval": common.points(cfg, NUM_EVAL, half=True),
                        "use_discrete": common.use_discrete(cfg),
                        "estimators": common.estimators_of(cfg)},
    training_flag="", ground_truth=True, sampled=True, postprocessed=True,
    describe=lambda m: (f"{common.describe_protocols(m, 'eval_accuracy')}: {m['num_train']} "
                        f"train / {m['num_eval']} eval points, pairs of {m['batch_size']}, "
                        f"{m['classifier']}, train accuracy {m['train_accuracy']:.4f}")))
