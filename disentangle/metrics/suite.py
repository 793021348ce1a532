"""Registration of disentanglement_lib's metric suite (Locatello et al. 2019) in `registry`.

Every metric here reads the evaluation's ground truth through `Inputs.ground_truth` (with the
whole dataset's encodings when the caller made them, so points are looked up, not encoded), with
disentanglement_lib's study settings (`config/unsupervised_study_v1/metric_configs/*.gin`), on
its own random stream, and reports the continuous means alone (``protocol='disentanglement_lib'``)
and, for an encoder with a discrete code where the definition extends, with the code too
(``'disentanglement_lib+discrete_codes'``, under ``by_protocol``); ``value`` is the one
``eval.use_discrete`` picks ('protocol': the means alone). All are computed by ``evaluate_run``
(stage ``"run"``); none at eval steps.
"""
from __future__ import annotations

import functools
from typing import Optional

import numpy as np

from disentangle.metrics import beta_vae
from disentangle.metrics import dci
from disentangle.metrics import downstream
from disentangle.metrics import estimators as estimators_lib
from disentangle.metrics import fairness_study
from disentangle.metrics import irs
from disentangle.metrics import modularity
from disentangle.metrics import registry
from disentangle.metrics import sampling
from disentangle.metrics import sap
from disentangle.metrics import udr
from disentangle.metrics import unified
from disentangle.metrics import unsupervised
from disentangle.metrics.factor_vae import factor_vae_score
from disentangle.metrics.information import kl_per_dim


def _use_discrete(cfg) -> bool:
  return registry.resolve_use_discrete(cfg, False)


def _estimators(cfg) -> str:
  """``eval.estimators``: today's scikit-learn defaults or the 2019 study's (`estimators`);
  checked by the metrics that build a classifier."""
  return registry.setting(cfg, "estimators", estimators_lib.DEFAULT)


def _points(cfg, default: int, half: bool = False) -> int:
  """``eval.suite_points`` (0: disentanglement_lib's own number ``default``); a test or eval
  split (``half``) takes half of it."""
  n = int(registry.setting(cfg, "suite_points", 0))
  return default if n <= 0 else max(1, n // 2) if half else n


def _headline(by_protocol: dict, key: str, use_discrete: bool, **extra) -> dict:
  """The result of the chosen protocol with ``value`` = its ``key``, every protocol beside it."""
  chosen = sampling.PROTOCOL_DISCRETE if (use_discrete and sampling.PROTOCOL_DISCRETE
                                          in by_protocol) else sampling.PROTOCOL
  out = dict(by_protocol[chosen], value=by_protocol[chosen][key], value_is=key,
             use_discrete=chosen == sampling.PROTOCOL_DISCRETE, **extra)
  if len(by_protocol) > 1:
    out["by_protocol"] = {p: dict(r, value=r[key]) for p, r in by_protocol.items()}
  return out


def _require_ground_truth(inputs: registry.Inputs) -> None:
  sampling.check_ground_truth(inputs.ground_truth)


def _describe_protocols(m: dict, key: str) -> str:
  others = [f"{p} {r['value']:.4f}" for p, r in m.get("by_protocol", {}).items()
            if p != m["protocol"]]
  return f"{m['protocol']}" + (f"; also {', '.join(others)}" if others else "")


# -- FactorVAE score, disentanglement_lib's protocol --------------------------------------------

def _sampled_from_the_grid(compute):
  """``compute`` with a missing factor combination as `MetricInputError`: the suite's protocols
  draw factors from the whole grid, so a set that is not one (a subset of dSprites, say) cannot
  serve them; the other metrics of the evaluation still run."""
  @functools.wraps(compute)
  def wrapped(inputs, s):
    try:
      return compute(inputs, s)
    except KeyError as e:
      raise sampling.MetricInputError(
          f"the evaluated set does not hold every factor combination the protocol draws "
          f"({e.args[0] if e.args else e}); evaluate on the whole grid") from e
  return wrapped


@_sampled_from_the_grid
def _factor_score_dlib(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Kim & Mnih's score as disentanglement_lib (`metrics.factor_vae_score`,
  ``protocol='disentanglement_lib'``: 10,000 variance points, std pruning 0.05, 10,000 training
  and 5,000 evaluation votes of 64; value: the evaluation accuracy)."""
  _require_ground_truth(inputs)
  by = {}
  for protocol, with_codes in ((sampling.PROTOCOL, False), (sampling.PROTOCOL_DISCRETE, True)):
    r = factor_vae_score(inputs.ground_truth, inputs.represent, inputs.rng,
                         protocol="disentanglement_lib", use_discrete=with_codes,
                         encode_batch_size=inputs.encode_batch_size,
                         **{k: s[k] for k in ("num_votes", "num_eval_votes", "batch_size",
                                              "num_variance_points") if s.get(k) is not None})
    if with_codes and r["discrete_dim"] is None:
      break  # no discrete code: the means alone
    by[protocol] = dict(r, protocol=protocol)
  return _headline(by, "eval_accuracy", s["use_discrete"])


def _votes(cfg) -> dict:
  """The score's own numbers (`factor_vae_score`'s defaults) unless ``eval.suite_points`` is set."""
  if not _points(cfg, 0):
    return {}
  return {"num_votes": _points(cfg, 0), "num_eval_votes": _points(cfg, 0, half=True),
          "num_variance_points": _points(cfg, 0)}


# -- β-VAE score ----------------------------------------------------------------------------------

@_sampled_from_the_grid
def _beta_vae(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Higgins et al.'s score as disentanglement_lib (`metrics.beta_vae.beta_vae_score`)."""
  _require_ground_truth(inputs)
  estimators_lib.check(s["estimators"])
  by = beta_vae.beta_vae_score(inputs.ground_truth, inputs.represent, inputs.rng,
                               batch_size=s["batch_size"], num_train=s["num_train"],
                               num_eval=s["num_eval"], estimators=s["estimators"],
                               encode_batch_size=inputs.encode_batch_size)
  return _headline(by, "eval_accuracy", s["use_discrete"])


registry.register(registry.Metric(
    "factor_score_dlib", "FactorVAE score (dlib)", _factor_score_dlib,
    lambda cfg, stage: dict(_votes(cfg), use_discrete=_use_discrete(cfg)),
    training_flag="", ground_truth=True, sampled=True,
    describe=lambda m: (f"{_describe_protocols(m, 'eval_accuracy')}: {m['num_votes']} train / "
                        f"{m['num_eval_votes']} eval votes x {m['batch_size']}, variances over "
                        f"{m['num_variance_points']} points, std pruning {m['prune_std']}, "
                        f"train accuracy {m['train_accuracy']:.4f}")))
registry.register(registry.Metric(
    "beta_vae", "β-VAE score", _beta_vae,
    lambda cfg, stage: {"batch_size": beta_vae.BATCH_SIZE,
                        "num_train": _points(cfg, beta_vae.NUM_TRAIN),
                        "num_eval": _points(cfg, beta_vae.NUM_EVAL, half=True),
                        "use_discrete": _use_discrete(cfg), "estimators": _estimators(cfg)},
    training_flag="", ground_truth=True, sampled=True,
    describe=lambda m: (f"{_describe_protocols(m, 'eval_accuracy')}: {m['num_train']} train / "
                        f"{m['num_eval']} eval points, pairs of {m['batch_size']}, "
                        f"{m['classifier']}, train accuracy {m['train_accuracy']:.4f}")))


# -- SAP, DCI, modularity and explicitness, IRS: points drawn once, train and test -------------

def _sets(inputs: registry.Inputs, s: dict, names=("train", "test")):
  """{name: (rep, factors of the factors with more than one value)}, the columns used, the code
  sizes; ``s['num_<name>']`` points each, drawn from the metric's stream."""
  _require_ground_truth(inputs)
  sizes = [int(n) for n in inputs.ground_truth.factor_sizes]
  used = [k for k, n in enumerate(sizes) if n > 1]
  if not used:
    raise sampling.MetricInputError("no factor has more than one value")
  out = {}
  for name in names:
    rep, factors = sampling.sample_points(inputs.ground_truth, inputs.represent, s[f"num_{name}"],
                                          inputs.rng, inputs.encode_batch_size,
                                          minimum=2 if name == "train" else 1)
    out[name] = (rep, factors[:, used])
  return out, used, sampling.code_sizes(*(r for r, _ in out.values()))


def _by_protocol(sets, code_sizes, extends: bool, fn) -> dict:
  """{protocol: fn(x_train, y_train, x_test, y_test, groups, protocol)} over the protocols."""
  by = {}
  (rep_tr, y_tr), (rep_te, y_te) = sets["train"], sets.get("test", (None, None))
  for protocol, with_codes in sampling.protocols(rep_tr, extends and bool(code_sizes)):
    x_tr, groups = sampling.features(rep_tr, with_codes, code_sizes)
    x_te = None if rep_te is None else sampling.features(rep_te, with_codes, code_sizes)[0]
    by[protocol] = dict(fn(x_tr, y_tr, x_te, y_te, groups, with_codes), protocol=protocol)
  return by


def _split_settings(module, **extra):
  def settings(cfg, stage):
    del stage
    num_test = getattr(module, "NUM_TEST", None)
    return dict(num_train=_points(cfg, module.NUM_TRAIN),
                num_test=None if num_test is None else _points(cfg, num_test, half=True),
                use_discrete=_use_discrete(cfg), estimators=_estimators(cfg), **extra)
  return settings


@_sampled_from_the_grid
def _sap(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Kumar et al.'s SAP as disentanglement_lib (`metrics.sap`)."""
  estimators_lib.check(s["estimators"])
  sets, used, code_sizes = _sets(inputs, s)
  settings = estimators_lib.linear_svc_settings(s["estimators"], sap.SVC_C, "balanced")
  def fn(x_tr, y_tr, x_te, y_te, groups, with_codes):
    del with_codes
    log = estimators_lib.FitLog()
    m = sap.score_matrix(x_tr, y_tr, x_te, y_te, groups, s["continuous_factors"],
                         estimators=s["estimators"], log=log)
    return {"score": sap.avg_diff_top_two(m), "score_matrix": m,
            "estimator": log.record(settings)}
  by = _by_protocol(sets, code_sizes, True, fn)
  return _headline(by, "score", s["use_discrete"], factors_used=used, num_train=s["num_train"],
                   num_test=s["num_test"], continuous_factors=s["continuous_factors"],
                   classifier=(f"{estimators_lib.describe(settings)} per latent and factor"
                               if not s["continuous_factors"] else "none (squared correlation)"))


_DCI_TREES = {
    "together": ("GradientBoostingClassifier() per factor, the trees of a stage grown together "
                 "(disentangle.metrics.boosted_trees: scikit-learn's splits, leaves and "
                 "importances)"),
    "sklearn": "sklearn GradientBoostingClassifier() per factor",
}


def _dci_estimator(s: dict) -> dict:
  """DCI's trees as recorded: today's fit under either ``eval.estimators`` (`estimators`)."""
  return {"estimator": "GradientBoostingClassifier", "estimators": s["estimators"],
          "implementation": ("disentangle.metrics.boosted_trees" if s["trees"] == "together"
                             else "sklearn"),
          "fit": "scikit-learn >= 0.21 (log-prior start, a stage's gradients from the previous "
                 "stage); 0.20's multi-class fit is not reproduced",
          "n_estimators": 100, "max_depth": 3, "learning_rate": 0.1, "converged": True}


@_sampled_from_the_grid
def _dci(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Eastwood & Williams' DCI as disentanglement_lib (`metrics.dci`); value: disentanglement."""
  estimators_lib.check(s["estimators"])
  sets, used, code_sizes = _sets(inputs, s)
  seed = int(inputs.rng.integers(2**31))
  def fn(x_tr, y_tr, x_te, y_te, groups, with_codes):
    del with_codes
    r, train_acc, test_acc = dci.importance_matrix(x_tr, y_tr, x_te, y_te, groups, seed,
                                                   trees=s["trees"])
    return {"disentanglement": dci.disentanglement(r), "completeness": dci.completeness(r),
            "informativeness_train": train_acc, "informativeness_test": test_acc,
            "importance_matrix": r}
  by = _by_protocol(sets, code_sizes, True, fn)
  return _headline(by, "disentanglement", s["use_discrete"], factors_used=used,
                   num_train=s["num_train"], num_test=s["num_test"], tree_seed=seed,
                   classifier=_DCI_TREES[s["trees"]], trees=s["trees"],
                   estimator=_dci_estimator(s))


@_sampled_from_the_grid
def _modularity(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Ridgeway & Zemel's modularity and explicitness as disentanglement_lib
  (`metrics.modularity`); value: modularity."""
  estimators_lib.check(s["estimators"])
  sets, used, code_sizes = _sets(inputs, s)
  rep_tr, y_tr = sets["train"]
  settings = estimators_lib.logistic_regression_settings(s["estimators"])
  def fn(x_tr, y_tr, x_te, y_te, groups, with_codes):
    del groups
    log = estimators_lib.FitLog()
    codes = sampling.histogram_discretize(rep_tr.mean, s["num_bins"])
    if with_codes:
      codes = np.concatenate([codes, rep_tr.codes], axis=1)
    mi = modularity.mutual_information(codes, y_tr)
    n_tr, n_te = sampling.normalize(x_tr, x_te)
    train_auc, test_auc, per = modularity.explicitness(n_tr, y_tr, n_te, y_te,
                                                       s["estimators"], log)
    return {"modularity": modularity.modularity(mi), "explicitness_train": train_auc,
            "explicitness_test": test_auc, "explicitness_per_factor": per,
            "mutual_information": mi, "estimator": log.record(settings)}
  by = _by_protocol(sets, code_sizes, True, fn)
  return _headline(by, "modularity", s["use_discrete"], factors_used=used,
                   num_train=s["num_train"], num_test=s["num_test"], num_bins=s["num_bins"],
                   classifier=f"{estimators_lib.describe(settings)} on standardised latents")


def _explicitness_logged(m: dict) -> dict:
  return {"modularity": m["value"], "explicitness": m["explicitness_test"]}


@_sampled_from_the_grid
def _irs(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Suter et al.'s IRS as disentanglement_lib (`metrics.irs`); the means alone."""
  sets, used, _ = _sets(inputs, s, names=("train",))
  rep, factors = sets["train"]
  binned = sampling.histogram_discretize(factors.astype(np.float64), s["num_bins"])
  out = irs.irs(binned, rep.mean, s["diff_quantile"])
  return dict(out, value=out["score"], protocol=sampling.PROTOCOL, use_discrete=False,
              factors_used=used, num_train=s["num_train"], num_bins=s["num_bins"],
              diff_quantile=s["diff_quantile"])


@_sampled_from_the_grid
def _unsupervised(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """disentanglement_lib's unsupervised scores (`metrics.unsupervised`) on ``num_train`` points
  of the ground truth, else on the eval points; value: the Gaussian total correlation."""
  if inputs.ground_truth is not None:
    rep, _ = sampling.sample_points(inputs.ground_truth, inputs.represent, s["num_train"],
                                    inputs.rng, inputs.encode_batch_size)
    points = "sampled from the ground truth"
  elif inputs.rep is not None:
    rep = inputs.rep.take(slice(0, s["num_train"]))
    sampling.check_finite(rep, "the eval points")
    points = "the eval points"
  else:
    raise sampling.MetricInputError("no points to encode")
  if rep.num_examples < 2:
    raise sampling.MetricInputError(f"needs at least 2 points, got {rep.num_examples}")
  by = {}
  for protocol, with_codes in sampling.protocols(rep, True):
    codes = sampling.histogram_discretize(rep.mean, s["num_bins"])
    if with_codes:
      codes = np.concatenate([codes, rep.codes], axis=1)
    by[protocol] = dict(unsupervised.scores(rep.mean, codes), protocol=protocol)
  return _headline(by, "gaussian_total_correlation", s["use_discrete"], points=points,
                   num_points=rep.num_examples, num_bins=s["num_bins"], units="nats")


_KEYS = ("gaussian_total_correlation", "gaussian_wasserstein_correlation",
         "gaussian_wasserstein_correlation_norm", "mutual_info_score")

registry.register(registry.Metric(
    "sap", "SAP", _sap, _split_settings(sap, continuous_factors=False), training_flag="",
    ground_truth=True, sampled=True,
    describe=lambda m: (f"{_describe_protocols(m, 'score')}: {m['num_train']} train / "
                        f"{m['num_test']} test points, {m['classifier']}")))


def _dci_settings(cfg, stage):
  return dict(_split_settings(dci)(cfg, stage),
              trees=registry.setting(cfg, "dci_trees", "together"))


registry.register(registry.Metric(
    "dci", "DCI disentanglement", _dci, _dci_settings, training_flag="",
    ground_truth=True, sampled=True,
    logged=lambda m: {f"dci_{k}": m[k] for k in ("disentanglement", "completeness",
                                                 "informativeness_train",
                                                 "informativeness_test")},
    describe=lambda m: (f"{_describe_protocols(m, 'disentanglement')}: completeness "
                        f"{m['completeness']:.4f}, informativeness {m['informativeness_train']:.4f}"
                        f" / {m['informativeness_test']:.4f} (train / test accuracy), "
                        f"{m['num_train']} / {m['num_test']} points")))
registry.register(registry.Metric(
    "modularity", "modularity", _modularity,
    _split_settings(modularity, num_bins=modularity.NUM_BINS), training_flag="",
    ground_truth=True, sampled=True, logged=_explicitness_logged,
    describe=lambda m: (f"{_describe_protocols(m, 'modularity')}: explicitness "
                        f"{m['explicitness_train']:.4f} / {m['explicitness_test']:.4f} (train / "
                        f"test ROC-AUC), {m['num_bins']} bins, {m['num_train']} / "
                        f"{m['num_test']} points")))
registry.register(registry.Metric(
    "irs", "IRS", _irs,
    lambda cfg, stage: {"num_train": _points(cfg, irs.NUM_TRAIN), "num_bins": irs.NUM_BINS,
                        "diff_quantile": irs.DIFF_QUANTILE},
    training_flag="", ground_truth=True, sampled=True,
    describe=lambda m: (f"{m['protocol']}: {m['num_train']} points, factors in {m['num_bins']} "
                        f"bins, quantile {m['diff_quantile']}, {m['num_active_dims']} active "
                        f"dims")))
registry.register(registry.Metric(
    "unsupervised", "Gaussian total correlation (nats)", _unsupervised,
    lambda cfg, stage: {"num_train": _points(cfg, unsupervised.NUM_TRAIN),
                        "num_bins": unsupervised.NUM_BINS,
                        "use_discrete": _use_discrete(cfg)},
    training_flag="", sampled=True, tabulated=False,
    logged=lambda m: {k: m[k] for k in _KEYS},
    describe=lambda m: (f"{_describe_protocols(m, 'gaussian_total_correlation')}: "
                        + ", ".join(f"{k} {m[k]:.4f}" for k in _KEYS[1:])
                        + f", {m['num_points']} points ({m['points']}), {m['num_bins']} bins")))


# -- UDR's sample: the same points for every seed; the score is `aggregate`'s, per table row ----

@_sampled_from_the_grid
def _udr_sample(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """The means (and mean KL per latent) of `udr.NUM_POINTS` points drawn with the fixed stream
  `udr.POINTS_SEED`, so that every seed of a configuration encodes the same observations;
  `disentangle.evaluation.aggregate` computes UDR (`metrics.udr`) over a row's runs from them."""
  _require_ground_truth(inputs)
  gen = np.random.default_rng(s["points_seed"])
  rep, factors = sampling.sample_points(inputs.ground_truth, inputs.represent, s["num_points"],
                                        gen, inputs.encode_batch_size)
  kl = None if rep.logvar is None else kl_per_dim(rep.mean, rep.logvar)
  return {"value": None, "means": rep.mean, "kl_per_dim": kl, "num_points": rep.num_examples,
          "points_seed": s["points_seed"], "factors_checksum": int(np.sum(
              factors * np.arange(1, factors.shape[1] + 1)) % 1_000_003),
          "protocol": sampling.PROTOCOL}


registry.register(registry.Metric(
    "udr_sample", "UDR sample", _udr_sample,
    lambda cfg, stage: {"num_points": udr.NUM_POINTS, "points_seed": udr.POINTS_SEED},
    training_flag="", ground_truth=True, tabulated=False, logged=lambda m: {},
    describe=lambda m: (f"{m['num_points']} points (stream {m['points_seed']}) for UDR across "
                        f"the seeds of a configuration (aggregate)")))


NAMES = ("factor_score_dlib", "beta_vae", "sap", "dci", "modularity", "irs", "unsupervised",
         "udr_sample")


# -- Downstream tasks, the fairness of Locatello et al. 2019b, the unified scores ---------------
# (disentanglement_lib's `downstream_task`, `reduced_downstream_task`, `strong_downstream_task`,
# `fairness` and `unified_scores`; the means alone, ``protocol='disentanglement_lib'``, except
# the plain downstream tasks, whose classifiers read a discrete code's one-hot block too)

def _task_settings(predictor: str, sizes, num_test: int, trees: bool = False, **extra):
  """Settings of a task over training ``sizes``: ``num_points`` is the evaluation's points
  (``eval.suite_points``, else the largest size); sizes above it are left out and recorded;
  ``trees``: DCI's importances are read (``eval.dci_trees``)."""
  def settings(cfg, stage):
    del stage
    num_points = _points(cfg, max(sizes))
    within, above = downstream.sizes_within(sizes, num_points)
    out = dict(predictor=predictor, num_train=within, sizes_left_out=above,
               num_points=num_points, num_test=_points(cfg, num_test, half=True),
               estimators=_estimators(cfg), use_discrete=_use_discrete(cfg), **extra)
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


@_sampled_from_the_grid
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
  return _headline(by, "mean_test_accuracy", s["use_discrete"],
                   **_task_record(s, log, seed, used))


@_sampled_from_the_grid
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
              correlation_measure=f"factorwise_dci ({_DCI_TREES[s['trees']]})", trees=s["trees"],
              **_task_record(s, log, seed, used))


@_sampled_from_the_grid
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


@_sampled_from_the_grid
def _fairness_dlib(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Locatello et al. 2019b's unfairness (`metrics.fairness_study`); value: the paper's score,
  ``mean_fairness:mean_pred:mean_sens``."""
  _require_ground_truth(inputs)
  sizes = [int(n) for n in inputs.ground_truth.factor_sizes]
  used = [k for k, n in enumerate(sizes) if n > 1]
  if len(used) < 2:
    raise sampling.MetricInputError(
        f"needs at least 2 factors with more than one value (a target and a sensitive one); "
        f"the set's factor_sizes are {sizes}")
  estimators_lib.check(s["estimators"])
  seed, log = int(inputs.rng.integers(2**31)), estimators_lib.FitLog()
  out = fairness_study.unfairness(
      inputs.ground_truth, inputs.represent, inputs.rng, used, s["num_train"],
      s["num_test_points_per_class"], s["predictor"], seed, inputs.encode_batch_size,
      estimators=s["estimators"], log=log)
  scores = {name: fairness_study.summarize(out[name]) for name in ("mean_fairness",
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


@_sampled_from_the_grid
def _unified_scores(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """disentanglement_lib's unified scores (`metrics.unified`) of every matrix; value: DCI
  disentanglement of the importance matrix (the scores of each matrix under ``by_matrix``)."""
  estimators_lib.check(s["estimators"])
  sets, used, _ = _sets(inputs, s)
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
  return (f"{_describe_protocols(m, key)}: {key} at {m['num_train'][-1]} training points; "
          f"sizes {list(m['num_train'])}{left}, {m['num_test']} test points, "
          f"{m['estimator']['estimator']} "
          f"[{m['estimator'].get('estimators') or m['estimator'].get('implementation')}]")


_GBT = "gradient_boosting_classifier"

registry.register(registry.Metric(
    "downstream_logistic", "downstream acc. (logistic)", _downstream,
    _task_settings("logistic_regression_cv", downstream.NUM_TRAIN, downstream.NUM_TEST),
    training_flag="", run_flag="downstream", ground_truth=True, sampled=True,
    describe=lambda m: _describe_task(m, "mean_test_accuracy")))
registry.register(registry.Metric(
    "downstream_trees", "downstream acc. (boosted trees)", _downstream,
    _task_settings(_GBT, downstream.NUM_TRAIN, downstream.NUM_TEST),
    training_flag="", run_flag="downstream", ground_truth=True, sampled=True,
    describe=lambda m: _describe_task(m, "mean_test_accuracy")))
registry.register(registry.Metric(
    "reduced_downstream", "reduced downstream acc.", _reduced_downstream,
    _task_settings(_GBT, downstream.REDUCED_NUM_TRAIN, downstream.REDUCED_NUM_TEST, trees=True,
                   num_factors_to_remove=downstream.NUM_FACTORS_TO_REMOVE),
    training_flag="", run_flag="downstream", ground_truth=True, sampled=True,
    describe=lambda m: (_describe_task(m, "mean_test_accuracy_reduced_factor") + f", "
                        f"{m['num_factors_to_remove']} latent(s) removed per factor; other "
                        f"factors {m['mean_test_accuracy_other_factors']:.4f}")))
registry.register(registry.Metric(
    "strong_downstream", "strong downstream acc.", _strong_downstream,
    _task_settings(_GBT, downstream.STRONG_NUM_TRAIN, downstream.STRONG_NUM_TEST,
                   num_experiments=downstream.STRONG_NUM_EXPERIMENTS),
    training_flag="", run_flag="downstream", ground_truth=True, sampled=True,
    describe=lambda m: (_describe_task(m, "mean_strong_test_accuracy") + f", "
                        f"{m['num_experiments']} interventions per factor; in distribution "
                        f"{m['mean_test_accuracy']:.4f}, gap "
                        f"{m['strong_generalization_gap']:.4f}")))
registry.register(registry.Metric(
    "fairness_dlib", "unfairness (dlib)", _fairness_dlib,
    lambda cfg, stage: {
        "num_train": _points(cfg, fairness_study.NUM_TRAIN),
        "num_test_points_per_class": min(fairness_study.NUM_TEST_POINTS_PER_CLASS, _points(
            cfg, fairness_study.NUM_TEST_POINTS_PER_CLASS, half=True)),
        "predictor": fairness_study.PREDICTOR, "estimators": _estimators(cfg)},
    training_flag="", run_flag="fairness_dlib", ground_truth=True, sampled=True,
    describe=lambda m: (f"{m['protocol']}: {m['value_is']}; max over pairs "
                        f"{m['scores']['mean_fairness']['max_pred:max_sens']:.4f}, "
                        f"{m['num_train']} training points, {m['num_test_points_per_class']} "
                        f"per sensitive value, {m['estimator']['estimator']}")))


def _unified_settings(cfg, stage):
  return dict(_split_settings(unified, num_bins=unified.NUM_BINS,
                              matrices=unified.MATRICES)(cfg, stage),
              trees=registry.setting(cfg, "dci_trees", "together"))


registry.register(registry.Metric(
    "unified_scores", "unified scores", _unified_scores, _unified_settings, training_flag="",
    run_flag="unified_scores",
    ground_truth=True, sampled=True, tabulated=False,
    logged=lambda m: {f"unified_{name}_{key}": r[key] for name, r in m["by_matrix"].items()
                      for key in ("dci_disentanglement", "mig", "sap", "modularity",
                                  "area_precision")},
    describe=lambda m: (f"{m['protocol']}: " + "; ".join(
        f"{name} DCI {r['dci_disentanglement']:.3f}, MIG {r['mig']:.3f}, SAP {r['sap']:.3f}, "
        f"modularity {r['modularity']:.3f}, precision area {r['area_precision']:.3f}"
        for name, r in m["by_matrix"].items()) + f"; {m['num_train']} / {m['num_test']} points")))


NAMES = NAMES + ("downstream_logistic", "downstream_trees", "reduced_downstream",
                 "strong_downstream", "fairness_dlib", "unified_scores")
