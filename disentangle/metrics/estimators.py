"""The scikit-learn classifiers of disentanglement_lib's suite, as today's scikit-learn builds
them or as its 2019 study ran them (``eval.estimators``), and a record of every fit.

Locatello et al.'s study (ICML 2019) ran disentanglement_lib with the scikit-learn of 2018
(0.19 / 0.20), whose defaults differ from those of the pinned version where a metric builds a
classifier with default arguments:

=====================  ==============================================  =========================
classifier             ``'current'`` (the pinned scikit-learn)         ``'study2019'`` (0.20)
=====================  ==============================================  =========================
LogisticRegression()   lbfgs, multinomial, max_iter 100                liblinear, one-vs-rest
                                                                       (0.20's ``'warn'``
                                                                       defaults), max_iter 100
LogisticRegressionCV   lbfgs, multinomial                              lbfgs, one-vs-rest
LinearSVC()            ``dual='auto'`` (primal when samples >           ``dual=True``
                       features), max_iter 1000
=====================  ==============================================  =========================

liblinear's one-vs-rest is built as ``OneVsRestClassifier(LogisticRegression(solver=
'liblinear'))``: the same binary problems, coefficients and normalised probabilities as 0.20's
``multi_class='ovr'`` (equal to 1e-14 on the pinned version, where liblinear on several classes
is deprecated). ``LinearSVC(dual=True)`` draws its coordinate order from ``random_state``; 0.20
and disentanglement_lib left it at None (numpy's global stream), here it is 0, so a number is a
function of its inputs.

``GradientBoostingClassifier`` (DCI, the downstream boosted trees, the reduced task, fairness,
the unified scores' importance matrix): fitted by `boosted_trees`, today's multi-class fit under
'current' and 0.20's under 'study2019': 0.20 started from the class priors as raw scores (not
their logarithms) and computed the gradient of each class's tree after the trees of the earlier
classes of the same stage had updated the predictions (both fixed in 0.21, scikit-learn PRs
12983 and 12715), and its trees kept nodes at impurity <= 1e-7 as leaves
(`boosted_trees` module doc, with the lines of 0.20's source). 0.20 computed
``feature_importances_`` as the sum over the stages of the mean over a stage's trees of the
unnormalised impurity importances, normalised to sum 1; today's version averages over the trees
that split and normalises: the same vector up to summation order. With ``eval.dci_trees=
'sklearn'`` DCI's trees are the installed scikit-learn's (today's fit), and the result says so.

Every fit goes through `fit`, which silences scikit-learn's ``ConvergenceWarning`` and counts a
fit whose iterations reached ``max_iter`` in a `FitLog`; the metric's result carries the log's
`FitLog.record` (fits, not converged, the estimator's settings), and the evaluation prints one
line for a metric with fits that did not converge.
"""
from __future__ import annotations

import threading
from typing import Optional
import warnings

import numpy as np
from sklearn import exceptions
from sklearn import linear_model
from sklearn import model_selection
from sklearn import multiclass
from sklearn import svm

from disentangle.config import ESTIMATORS

DEFAULT = ESTIMATORS[0]  # eval.estimators' default (config.base_config)


class FitLog:
  """The fits of one metric: how many, and how many stopped at ``max_iter`` (thread-safe)."""

  def __init__(self):
    self.fits = 0
    self.not_converged = 0
    self._lock = threading.Lock()

  def add(self, converged: bool) -> None:
    with self._lock:
      self.fits += 1
      self.not_converged += int(not converged)

  def record(self, settings: dict) -> dict:
    """The words a result carries: the estimator's ``settings``, ``fits``, ``not_converged``
    and ``converged`` (every fit)."""
    return dict(settings, fits=self.fits, not_converged=self.not_converged,
                converged=self.not_converged == 0)


def logistic_regression(estimators: str, random_state: Optional[int] = None):
  """``LogisticRegression()`` with the defaults of ``estimators`` (module doc)."""
  if estimators == "study2019":
    return multiclass.OneVsRestClassifier(
        linear_model.LogisticRegression(solver="liblinear", random_state=random_state))
  return linear_model.LogisticRegression(random_state=random_state)


def logistic_regression_settings(estimators: str) -> dict:
  model = linear_model.LogisticRegression()
  if estimators == "study2019":
    return {"estimator": "LogisticRegression", "estimators": estimators,
            "solver": "liblinear", "multi_class": "ovr", "max_iter": model.max_iter}
  return {"estimator": "LogisticRegression", "estimators": estimators, "solver": model.solver,
          "multi_class": "multinomial", "max_iter": model.max_iter}


def _logistic_cv_defaults() -> dict:
  """The arguments that keep ``LogisticRegressionCV``'s fit of before scikit-learn 1.8 on the
  releases that change its defaults: an L2 penalty (``l1_ratios=(0,)``), each C scored by
  accuracy, and the simplified fitted attributes (none is read here); {} on a release without
  ``use_legacy_attributes``."""
  if "use_legacy_attributes" not in linear_model.LogisticRegressionCV().get_params():
    return {}
  return {"l1_ratios": (0.0,), "scoring": "accuracy", "use_legacy_attributes": False}


def logistic_regression_cv(estimators: str, cs: int = 10, folds: int = 5):
  """``LogisticRegressionCV(Cs=cs, cv=KFold(folds))`` as disentanglement_lib's downstream
  predictor, multinomial ('current') or one-vs-rest ('study2019'); lbfgs in both, L2 penalty,
  each C scored by accuracy (`_logistic_cv_defaults`)."""
  model = linear_model.LogisticRegressionCV(Cs=cs, cv=model_selection.KFold(n_splits=folds),
                                            **_logistic_cv_defaults())
  return multiclass.OneVsRestClassifier(model) if estimators == "study2019" else model


def logistic_regression_cv_settings(estimators: str, cs: int = 10, folds: int = 5) -> dict:
  model = linear_model.LogisticRegressionCV()
  return {"estimator": "LogisticRegressionCV", "estimators": estimators, "Cs": cs,
          "cv": f"KFold(n_splits={folds})", "solver": model.solver,
          "multi_class": "ovr" if estimators == "study2019" else "multinomial",
          "max_iter": model.max_iter}


def linear_svc(estimators: str, c: float, class_weight=None):
  """``LinearSVC(C=c, class_weight=...)`` with the defaults of ``estimators`` (module doc)."""
  if estimators == "study2019":
    return svm.LinearSVC(C=c, class_weight=class_weight, dual=True, random_state=0)
  return svm.LinearSVC(C=c, class_weight=class_weight)


def linear_svc_settings(estimators: str, c: float, class_weight=None) -> dict:
  model = svm.LinearSVC()
  return {"estimator": "LinearSVC", "estimators": estimators, "C": c,
          "class_weight": class_weight,
          "dual": True if estimators == "study2019" else model.dual,
          "random_state": 0 if estimators == "study2019" else None,
          "max_iter": model.max_iter}


def describe(settings: dict) -> str:
  """One line of an estimator's ``*_settings``, e.g. ``sklearn LogisticRegression(solver=
  'lbfgs', multi_class='multinomial', max_iter=100) [current]``."""
  args = ", ".join(f"{k}={settings[k]!r}" for k in ("C", "Cs", "cv", "class_weight", "solver",
                                                     "multi_class", "dual", "max_iter")
                   if settings.get(k) is not None)
  return f"sklearn {settings['estimator']}({args}) [{settings['estimators']}]"


def _converged(model) -> bool:
  """Whether every iterative solve of a fitted ``model`` stopped before its ``max_iter``."""
  if isinstance(model, multiclass.OneVsRestClassifier):
    return all(_converged(m) for m in model.estimators_
               if hasattr(m, "n_iter_"))  # a constant class gets a dummy predictor
  n_iter = np.asarray(getattr(model, "n_iter_", 0))
  return bool(np.all(n_iter < model.max_iter))


def fit(model, x: np.ndarray, y: np.ndarray, log: Optional[FitLog] = None):
  """``model.fit(x, y)`` without scikit-learn's convergence warnings; counted in ``log``."""
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", exceptions.ConvergenceWarning)
    model.fit(x, y)
  if log is not None:
    log.add(_converged(model))
  return model
