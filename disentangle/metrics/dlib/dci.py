"""DCI: disentanglement, completeness, informativeness (Eastwood & Williams 2018, Sec. 2).

As disentanglement_lib computes it (`evaluation/metrics/dci.py`, study settings
`config/unsupervised_study_v1/metric_configs/dci.gin`: ``num_train`` = 10,000, ``num_test`` =
5,000): one scikit-learn ``GradientBoostingClassifier()`` (default: 100 stages, depth 3, learning
rate 0.1) per factor on the posterior means; R_ik = ``|feature importance|`` of latent i for
factor k. The classifiers are fitted by `boosted_trees` (``trees='together'``: the same trees,
every factor's trees of a stage grown at once; 100 stages x 113 trees on dSprites; under
``eval.estimators='study2019'`` scikit-learn 0.20's multi-class fit, as the study ran it) or by
scikit-learn itself (``trees='sklearn'``, one tree after the other, its factors on `NUM_JOBS`
threads; today's fit only).

::

  disentanglement = sum_i rho_i (1 - H_K(P_i.)),  P_ik = R_ik / sum_k R_ik,  rho_i = sum_k R_ik /
                    sum R  (Eq. 1-2; the entropy in base K, 1e-11 added as disentanglement_lib);
  completeness    = sum_k rho_k (1 - H_D(P_.k)),  P_ik = R_ik / sum_i R_ik  (Eq. 3);
  informativeness = mean over factors of the classifier's accuracy, train and test (the paper
                    uses the prediction error; disentanglement_lib reports accuracy).

Only factors with more than one value are scored. A discrete code is one latent: its one-hot
block is given to the trees and its importance is the sum over the block.

Registered in `registry` as ``dci`` (value: disentanglement; settings and protocols:
`common`; the trees as recorded: `TREES`, `estimator_record`).
"""
from __future__ import annotations

import os
from typing import Optional, Sequence

import joblib
import numpy as np
import scipy.stats
from sklearn import ensemble

from disentangle.metrics import boosted_trees
from disentangle.metrics import registry
from disentangle.metrics.dlib import common

NUM_TRAIN = 10_000
NUM_TEST = 5_000
NUM_JOBS = min(2, os.cpu_count() or 1)  # factors fitted at once


def importance_matrix(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray,
                      y_test: np.ndarray, groups: Optional[Sequence[np.ndarray]] = None,
                      random_state: int = 0, n_jobs: Optional[int] = None,
                      trees: str = "together",
                      estimators: str = "current") -> tuple[np.ndarray, float, float]:
  """(R [latents, factors], mean train accuracy, mean test accuracy); ``trees``: 'together'
  (`boosted_trees.fit_columns`, today's fit or, with ``estimators='study2019'``, scikit-learn
  0.20's) or 'sklearn' (the installed scikit-learn, today's fit whatever ``estimators`` says;
  on ``n_jobs`` threads, default `NUM_JOBS`)."""
  n_jobs = n_jobs or NUM_JOBS
  groups = groups if groups is not None else [np.array([j]) for j in range(x_train.shape[1])]
  if trees == "together":
    models = boosted_trees.fit_columns(x_train, y_train, random_state=random_state,
                                       estimators=estimators)
    r = np.array([[np.abs(m.feature_importances)[cols].sum() for cols in groups]
                  for m in models]).T
    acc = lambda x, y: float(np.mean([np.mean(boosted_trees.predict(m, x) == y[:, k])
                                      for k, m in enumerate(models)]))
    return r, acc(x_train, y_train), acc(x_test, y_test)
  if trees != "sklearn":
    raise ValueError(f"trees must be 'together' or 'sklearn', got {trees!r}")

  def fit(k):
    model = ensemble.GradientBoostingClassifier(random_state=random_state)
    model.fit(x_train, y_train[:, k])
    imp = np.abs(model.feature_importances_)
    return ([imp[cols].sum() for cols in groups],
            np.mean(model.predict(x_train) == y_train[:, k]),
            np.mean(model.predict(x_test) == y_test[:, k]))

  # One model per factor, independent: fitted on threads (the trees' builder releases the GIL);
  # the numbers do not depend on n_jobs.
  order = sorted(range(y_train.shape[1]), key=lambda k: -len(np.unique(y_train[:, k])))
  fits = dict(zip(order, joblib.Parallel(n_jobs=n_jobs, prefer="threads")(
      joblib.delayed(fit)(k) for k in order)))
  r = np.array([fits[k][0] for k in range(y_train.shape[1])]).T.reshape(len(groups), -1)
  return (r, float(np.mean([fits[k][1] for k in fits])),
          float(np.mean([fits[k][2] for k in fits])))


def disentanglement(r: np.ndarray) -> float:
  """sum_i rho_i (1 - H_K(P_i.)) of an importance matrix [latents, factors]."""
  per_code = 1.0 - scipy.stats.entropy(r.T + 1e-11, base=r.shape[1])
  if r.sum() == 0.0:
    r = np.ones_like(r)
  return float(np.sum(per_code * r.sum(axis=1) / r.sum()))


def completeness(r: np.ndarray) -> float:
  """sum_k rho_k (1 - H_D(P_.k)) of an importance matrix [latents, factors]."""
  per_factor = 1.0 - scipy.stats.entropy(r + 1e-11, base=r.shape[0])
  if r.sum() == 0.0:
    r = np.ones_like(r)
  return float(np.sum(per_factor * r.sum(axis=0) / r.sum()))


TREES = {
    "together": ("GradientBoostingClassifier() per factor, the trees of a stage grown together "
                 "(disentangle.metrics.boosted_trees: scikit-learn's splits, leaves and "
                 "importances)"),
    "sklearn": "sklearn GradientBoostingClassifier() per factor",
}


def estimator_record(s: dict) -> dict:
  """DCI's trees as recorded: ``eval.estimators``' fit (`boosted_trees.FIT_WORDS`); the
  installed scikit-learn's (today's) with ``eval.dci_trees='sklearn'``."""
  together = s["trees"] == "together"
  return {"estimator": "GradientBoostingClassifier", "estimators": s["estimators"],
          "implementation": "disentangle.metrics.boosted_trees" if together else "sklearn",
          "fit": boosted_trees.FIT_WORDS[s["estimators"] if together else "current"],
          "n_estimators": 100, "max_depth": 3, "learning_rate": 0.1, "converged": True}


# -- Registration in `registry` ------------------------------------------------------------------

@common.sampled_from_the_grid
def _dci(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Eastwood & Williams' DCI as disentanglement_lib (`importance_matrix`); value:
  disentanglement."""
  sets, used, code_sizes = common.sets(inputs, s)
  seed = int(inputs.rng.integers(2**31))
  def fn(x_tr, y_tr, x_te, y_te, groups, with_codes):
    del with_codes
    r, train_acc, test_acc = importance_matrix(x_tr, y_tr, x_te, y_te, groups, seed,
                                               trees=s["trees"], estimators=s["estimators"])
    return {"disentanglement": disentanglement(r), "completeness": completeness(r),
            "informativeness_train": train_acc, "informativeness_test": test_acc,
            "importance_matrix": r}
  by = common.by_protocol(sets, code_sizes, True, fn)
  return common.headline(by, "disentanglement", s["use_discrete"], factors_used=used,
                         num_train=s["num_train"], num_test=s["num_test"], tree_seed=seed,
                         classifier=TREES[s["trees"]], trees=s["trees"],
                         estimator=estimator_record(s))


def _dci_settings(cfg, stage):
  return dict(common.split_settings(NUM_TRAIN, NUM_TEST)(cfg, stage),
              trees=registry.setting(cfg, "dci_trees"))


registry.register(registry.Metric(
    "dci", "DCI disentanglement", _dci, _dci_settings, training_flag="",
    ground_truth=True, sampled=True, postprocessed=True,
    logged=lambda m: {f"dci_{k}": m[k] for k in ("disentanglement", "completeness",
                                                 "informativeness_train",
                                                 "informativeness_test")},
    describe=lambda m: (f"{common.describe_protocols(m, 'disentanglement')}: completeness "
                        f"{m['completeness']:.4f}, informativeness {m['informativeness_train']:.4f}"
                        f" / {m['informativeness_test']:.4f} (train / test accuracy), "
                        f"{m['num_train']} / {m['num_test']} points")))
