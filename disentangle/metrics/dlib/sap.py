"""SAP score, Separated Attribute Predictability (Kumar et al. 2018, Sec. 3).

As disentanglement_lib computes it (`evaluation/metrics/sap_score.py`, study settings
`config/unsupervised_study_v1/metric_configs/sap_score.gin`: ``num_train`` = 10,000,
``num_test`` = 5,000, ``continuous_factors=False``): for every latent i and factor k, a score
S_ik; SAP = mean over factors of the gap between the largest and the second largest S_ik over
the latents.

Discrete factors (the study's setting): S_ik is the test accuracy of a scikit-learn
``LinearSVC(C=0.01, class_weight='balanced')`` (today's ``dual='auto'`` or the 2019 study's
``dual=True``, `metrics.estimators`) trained on latent i alone to predict factor k.
Continuous factors: S_ik = Cov(z_i, v_k)^2 / (Var z_i Var v_k) (ddof 1), 0 when Var z_i <= 1e-12.
Only factors with more than one value are scored (disentanglement_lib's dSprites has no colour
factor). A discrete code is one latent whose classifier reads its one-hot block.

Registered in `registry` as ``sap`` (settings and protocols: `common`).
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from disentangle.metrics import estimators as estimators_lib
from disentangle.metrics import registry
from disentangle.metrics.dlib import common

NUM_TRAIN = 10_000
NUM_TEST = 5_000
SVC_C = 0.01


def score_matrix(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray,
                 y_test: np.ndarray, groups: Optional[Sequence[np.ndarray]] = None,
                 continuous_factors: bool = False, estimators: str = estimators_lib.DEFAULT,
                 log: Optional[estimators_lib.FitLog] = None) -> np.ndarray:
  """S [latents, factors] from features x [n, d] (``groups``: the columns of each latent); the
  classifiers' fits counted in ``log``."""
  groups = groups if groups is not None else [np.array([j]) for j in range(x_train.shape[1])]
  out = np.zeros((len(groups), y_train.shape[1]))
  for i, cols in enumerate(groups):
    for k in range(y_train.shape[1]):
      if continuous_factors:
        cov = np.cov(x_train[:, cols[0]], y_train[:, k], ddof=1)
        out[i, k] = cov[0, 1] ** 2 / (cov[0, 0] * cov[1, 1]) if cov[0, 0] > 1e-12 else 0.0
        continue
      clf = estimators_lib.fit(estimators_lib.linear_svc(estimators, SVC_C, "balanced"),
                               x_train[:, cols], y_train[:, k], log)
      out[i, k] = np.mean(clf.predict(x_test[:, cols]) == y_test[:, k])
  return out


def avg_diff_top_two(matrix: np.ndarray) -> float:
  """Mean over columns of (largest - second largest) entry."""
  top = np.sort(matrix, axis=0)
  if len(top) < 2:
    return float(np.mean(top[-1]))
  return float(np.mean(top[-1] - top[-2]))


# -- Registration in `registry` ------------------------------------------------------------------

@common.sampled_from_the_grid
def _sap(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Kumar et al.'s SAP as disentanglement_lib (`score_matrix`)."""
  sets, used, code_sizes = common.sets(inputs, s)
  settings = estimators_lib.linear_svc_settings(s["estimators"], SVC_C, "balanced")
  def fn(x_tr, y_tr, x_te, y_te, groups, with_codes):
    del with_codes
    log = estimators_lib.FitLog()
    m = score_matrix(x_tr, y_tr, x_te, y_te, groups, s["continuous_factors"],
                     estimators=s["estimators"], log=log)
    return {"score": avg_diff_top_two(m), "score_matrix": m,
            "estimator": log.record(settings)}
  by = common.by_protocol(sets, code_sizes, True, fn)
  classifier = (f"{estimators_lib.describe(settings)} per latent and factor"
                if not s["continuous_factors"] else "none (squared correlation)")
  return common.headline(by, "score", s["use_discrete"], factors_used=used,
                         num_train=s["num_train"], num_test=s["num_test"],
                         continuous_factors=s["continuous_factors"], classifier=classifier)


registry.register(registry.Metric(
    "sap", "SAP", _sap, common.split_settings(NUM_TRAIN, NUM_TEST, continuous_factors=False),
    training_flag="", ground_truth=True, sampled=True, postprocessed=True,
    describe=lambda m: (f"{common.describe_protocols(m, 'score')}: {m['num_train']} train / "
                        f"{m['num_test']} test points, {m['classifier']}")))
