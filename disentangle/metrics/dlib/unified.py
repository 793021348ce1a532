"""Unified disentanglement scores: each matrix of latents x factors with each aggregation.

As disentanglement_lib computes them (`evaluation/metrics/unified_scores.py::unified_scores`):
three matrices R [latents, factors] relate the code to the factors,

- ``importance_gbt_matrix``: DCI's importance of each latent for each factor (`dci`);
- ``mutual_information_matrix``: plug-in I(bin(z_i); v_k) of the means in 20 histogram bins
  (MIG's and modularity's, `modularity.mutual_information`);
- ``accuracy_svm_matrix``: SAP's test accuracy of a linear SVM on each latent alone (`sap`);

and each matrix is aggregated by every score's aggregation (`aggregate`): DCI disentanglement
and completeness (with the per-latent and per-factor terms), MIG ((top - second) / H(v_k) per
factor, H of the training factors), SAP (top - second per factor) and modularity (per latent),
plus the precision curve of the matrix (`precision_curve`: over the thresholds t = every entry
in decreasing order, the number of connected components with an edge of the bipartite graph
of latents and factors joined where R >= t, `visualize_scores.precision`; its trapezoid area
over the thresholds and its maximum). DCI, MIG, SAP and modularity are the special cases of
their own matrix with their own aggregation.

Settings: no study of disentanglement_lib binds ``unified_scores``; ``num_train`` = 10,000 and
``num_test`` = 5,000 (DCI's and SAP's study points, which two of the matrices are) and the
study's discretiser (histogram, 20 bins) here. Only factors with more than one value take part
(as the rest of the suite).

Registered in `registry` as ``unified_scores``, switched on by ``eval.unified_scores``.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import scipy.sparse
import scipy.sparse.csgraph

from disentangle.metrics import estimators as estimators_lib
from disentangle.metrics import information
from disentangle.metrics import registry
from disentangle.metrics import sampling
from disentangle.metrics.dlib import common
from disentangle.metrics.dlib import dci
from disentangle.metrics.dlib import modularity
from disentangle.metrics.dlib import sap
from disentangle.metrics.mig import mig_from_matrix

NUM_TRAIN = 10_000
NUM_TEST = 5_000
NUM_BINS = 20
MATRICES = ("importance_gbt_matrix", "mutual_information_matrix", "accuracy_svm_matrix")


def matrix(name: str, x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray,
           y_test: np.ndarray, *, random_state: int = 0, num_bins: int = NUM_BINS,
           trees: str = "together", estimators: str = estimators_lib.DEFAULT,
           log: Optional[estimators_lib.FitLog] = None) -> np.ndarray:
  """The matrix ``name`` (one of `MATRICES`) [latents, factors] of means x [n, d], factors y;
  ``estimators``: the boosted trees' fit (`dci.importance_matrix`) and the SVMs' defaults
  (`sap.score_matrix`); ``log``: the SVMs'."""
  if name == "importance_gbt_matrix":
    return dci.importance_matrix(x_train, y_train, x_test, y_test, random_state=random_state,
                                 trees=trees, estimators=estimators)[0]
  if name == "mutual_information_matrix":
    return modularity.mutual_information(sampling.histogram_discretize(x_train, num_bins),
                                         y_train)
  if name == "accuracy_svm_matrix":
    return sap.score_matrix(x_train, y_train, x_test, y_test, continuous_factors=False,
                            estimators=estimators, log=log)
  raise ValueError(f"unknown matrix {name!r}; choose from {list(MATRICES)}")


def precision(r: np.ndarray, threshold: float) -> int:
  """Connected components holding an edge of the bipartite graph latents - factors with an
  edge where ``r`` >= ``threshold`` and ``r`` != 0 (`visualize_scores.precision`)."""
  edges = (r >= threshold) & (r != 0)
  d, k = r.shape
  graph = scipy.sparse.bmat([[None, scipy.sparse.csr_matrix(edges)],
                             [scipy.sparse.csr_matrix(edges.T), None]])
  _, label = scipy.sparse.csgraph.connected_components(graph, directed=False)
  return int(len(np.unique(label[:d][edges.any(axis=1)])))


def precision_curve(r: np.ndarray) -> dict:
  """``area_precision`` (trapezoids over the thresholds, every entry of ``r`` in decreasing
  order) and ``max_precision`` (`unified_scores.pr_curves_values`)."""
  thresholds = np.sort(r.ravel())[::-1]
  p = np.array([precision(r, t) for t in thresholds], np.float64)
  area = float(np.sum((p[:-1] + p[1:]) * (thresholds[:-1] - thresholds[1:]) * 0.5))
  return {"area_precision": area, "max_precision": int(p.max())}


def aggregate(r: np.ndarray, y_train: np.ndarray) -> dict:
  """Every aggregation of ``r`` [latents, factors] (`unified_scores.AGGREGATION_FN`); the
  per-latent / per-factor terms are each score of that row / column alone."""
  rows = [r[[i]] for i in range(r.shape[0])]
  cols = [r[:, [k]] for k in range(r.shape[1])]
  entropies = np.array([information.discrete_entropy(y_train[:, k])
                        for k in range(y_train.shape[1])])
  mig_score, mig_per_factor = mig_from_matrix(r, entropies)
  return {"dci_disentanglement": dci.disentanglement(r),
          "dci_completeness": dci.completeness(r),
          "dci_disentanglement_per_code": [dci.disentanglement(x) for x in rows],
          "dci_completeness_per_factor": [dci.completeness(x) for x in cols],
          "mig": mig_score, "mig_per_factor": np.asarray(mig_per_factor).tolist(),
          "sap": sap.avg_diff_top_two(r),
          "sap_per_factor": [sap.avg_diff_top_two(x) for x in cols],
          "modularity": modularity.modularity(r),
          "modularity_per_code": [modularity.modularity(x) for x in rows]}


def unified_scores(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray,
                   y_test: np.ndarray, matrices=MATRICES, **kwargs) -> dict:
  """{matrix name: {the matrix, its precision curve, every aggregation}} (`unified_scores`)."""
  out = {}
  for name in matrices:
    r = matrix(name, x_train, y_train, x_test, y_test, **kwargs)
    out[name] = dict(matrix=r.tolist(), **precision_curve(r), **aggregate(r, y_train))
  return out


# -- Registration in `registry` ------------------------------------------------------------------

@common.sampled_from_the_grid
def _unified_scores(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """disentanglement_lib's unified scores (`unified_scores`) of every matrix; value: DCI
  disentanglement of the importance matrix (the scores of each matrix under ``by_matrix``)."""
  sets, used, _ = common.sets(inputs, s)
  (rep_tr, y_tr), (rep_te, y_te) = sets["train"], sets["test"]
  seed, log = int(inputs.rng.integers(2**31)), estimators_lib.FitLog()
  by_matrix = unified_scores(rep_tr.mean, y_tr, rep_te.mean, y_te, s["matrices"],
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


def _unified_settings(cfg, stage):
  return dict(common.split_settings(NUM_TRAIN, NUM_TEST, num_bins=NUM_BINS,
                                    matrices=MATRICES)(cfg, stage),
              trees=registry.setting(cfg, "dci_trees"))


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
