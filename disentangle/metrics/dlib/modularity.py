"""Modularity and explicitness (Ridgeway & Zemel 2018, Sec. 3).

As disentanglement_lib computes them (`evaluation/metrics/modularity_explicitness.py`, study
settings `config/unsupervised_study_v1/metric_configs/modularity_explicitness.gin`:
``num_train`` = 10,000, ``num_test`` = 5,000, histogram discretisation with 20 bins):

  modularity   = mean over latents i of 1 - sum_{k != k*} m_ik^2 / (m_ik*^2 (K - 1)), where m_ik is
                 the plug-in mutual information of the discretised latent i and factor k and k*
                 its best factor; a latent with no information scores 0;
  explicitness = mean over factors of the ROC-AUC (one-vs-rest, macro over the factor's values)
                 of a scikit-learn ``LogisticRegression()`` (defaults: today's or the 2019
                 study's, `metrics.estimators`) on the standardised latents (train mean /
                 std), on the train points and on the test points.

Departures: a constant latent (std 0) is divided by 1, not 0; a factor value absent from the
test points (no AUC defined; disentanglement_lib fails there) is left out of that factor's
mean. A discrete code is one more latent: its own classes are its bins (modularity) and its
one-hot block enters the regression (explicitness).

Registered in `registry` as ``modularity`` (value: modularity, explicitness beside it;
settings and protocols: `common`).
"""
from __future__ import annotations

from typing import Optional

import numpy as np
from sklearn import metrics

from disentangle.metrics import estimators as estimators_lib
from disentangle.metrics import registry
from disentangle.metrics import sampling
from disentangle.metrics.dlib import common
from disentangle.metrics.information import plugin_mutual_information

NUM_TRAIN = 10_000
NUM_TEST = 5_000
NUM_BINS = 20


def mutual_information(codes: np.ndarray, factors: np.ndarray) -> np.ndarray:
  """Plug-in I(code_i; v_k) [latents, factors] in nats (`information.plugin_mutual_information`,
  sklearn's ``mutual_info_score(v_k, code_i)`` bit for bit, as disentanglement_lib calls it)."""
  return np.array([[plugin_mutual_information(factors[:, k], codes[:, i])
                    for k in range(factors.shape[1])] for i in range(codes.shape[1])])


def modularity(mi: np.ndarray) -> float:
  """Ridgeway & Zemel's modularity of a mutual-information matrix [latents, factors]."""
  sq = np.square(mi)
  top = sq.max(axis=1)
  with np.errstate(divide="ignore", invalid="ignore"):
    score = 1.0 - (sq.sum(axis=1) - top) / (top * (sq.shape[1] - 1.0))
  score[top == 0.0] = 0.0
  return float(np.mean(score))


def explicitness(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray,
                 y_test: np.ndarray, estimators: str = estimators_lib.DEFAULT,
                 log: Optional[estimators_lib.FitLog] = None) -> tuple[float, float, list]:
  """(mean train AUC, mean test AUC, per-factor [train, test]) on standardised features; the
  fits counted in ``log``."""
  per = []
  for k in range(y_train.shape[1]):
    clf = estimators_lib.fit(estimators_lib.logistic_regression(estimators), x_train,
                             y_train[:, k], log)
    per.append([_auc(y, clf.predict_proba(x), clf.classes_)
                for x, y in ((x_train, y_train[:, k]), (x_test, y_test[:, k]))])
  per = np.array(per)
  return float(per[:, 0].mean()), float(per[:, 1].mean()), per.tolist()


def _auc(y: np.ndarray, proba: np.ndarray, classes: np.ndarray) -> float:
  """Macro one-vs-rest ROC-AUC over the classes present in ``y`` (and not all of it)."""
  truth = (y[:, None] == classes[None, :]).astype(int)
  ok = (truth.sum(axis=0) > 0) & (truth.sum(axis=0) < len(y))
  return float(metrics.roc_auc_score(truth[:, ok], proba[:, ok], average="macro"))


# -- Registration in `registry` ------------------------------------------------------------------

@common.sampled_from_the_grid
def _modularity(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Ridgeway & Zemel's modularity and explicitness as disentanglement_lib
  (`modularity`, `explicitness`); value: modularity."""
  sets, used, code_sizes = common.sets(inputs, s)
  rep_tr, y_tr = sets["train"]
  settings = estimators_lib.logistic_regression_settings(s["estimators"])
  def fn(x_tr, y_tr, x_te, y_te, groups, with_codes):
    del groups
    log = estimators_lib.FitLog()
    codes = sampling.histogram_discretize(rep_tr.mean, s["num_bins"])
    if with_codes:
      codes = np.concatenate([codes, rep_tr.codes], axis=1)
    mi = mutual_information(codes, y_tr)
    n_tr, n_te = sampling.normalize(x_tr, x_te)
    train_auc, test_auc, per = explicitness(n_tr, y_tr, n_te, y_te, s["estimators"], log)
    return {"modularity": modularity(mi), "explicitness_train": train_auc,
            "explicitness_test": test_auc, "explicitness_per_factor": per,
            "mutual_information": mi, "estimator": log.record(settings)}
  by = common.by_protocol(sets, code_sizes, True, fn)
  return common.headline(by, "modularity", s["use_discrete"], factors_used=used,
                         num_train=s["num_train"], num_test=s["num_test"], num_bins=s["num_bins"],
                         classifier=f"{estimators_lib.describe(settings)} on standardised latents")


def _explicitness_logged(m: dict) -> dict:
  return {"modularity": m["value"], "explicitness": m["explicitness_test"]}


registry.register(registry.Metric(
    "modularity", "modularity", _modularity,
    common.split_settings(NUM_TRAIN, NUM_TEST, num_bins=NUM_BINS), training_flag="",
    ground_truth=True, sampled=True, postprocessed=True, logged=_explicitness_logged,
    describe=lambda m: (f"{common.describe_protocols(m, 'modularity')}: explicitness "
                        f"{m['explicitness_train']:.4f} / {m['explicitness_test']:.4f} (train / "
                        f"test ROC-AUC), {m['num_bins']} bins, {m['num_train']} / "
                        f"{m['num_test']} points")))
