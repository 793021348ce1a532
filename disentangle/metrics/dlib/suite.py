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

from typing import Optional

import numpy as np

from disentangle.metrics import estimators as estimators_lib
from disentangle.metrics import registry
from disentangle.metrics import sampling
from disentangle.metrics.dlib import beta_vae
from disentangle.metrics.dlib import common
from disentangle.metrics.dlib import dci
from disentangle.metrics.dlib import irs
from disentangle.metrics.dlib import modularity
from disentangle.metrics.dlib import sap
from disentangle.metrics.dlib import udr
from disentangle.metrics.dlib import unsupervised
from disentangle.metrics.factor_vae import factor_vae_score
from disentangle.metrics.information import kl_per_dim


@common.sampled_from_the_grid
def _factor_score_dlib(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Kim & Mnih's score as disentanglement_lib (`metrics.factor_vae_score`,
  ``protocol='disentanglement_lib'``: 10,000 variance points, std pruning 0.05, 10,000 training
  and 5,000 evaluation votes of 64; value: the evaluation accuracy)."""
  common.require_ground_truth(inputs)
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
  return common.headline(by, "eval_accuracy", s["use_discrete"])


def _votes(cfg) -> dict:
  """The score's own numbers (`factor_vae_score`'s defaults) unless ``eval.suite_points`` is set."""
  if not common.points(cfg, 0):
    return {}
  return {"num_votes": common.points(cfg, 0), "num_eval_votes": common.points(cfg, 0, half=True),
          "num_variance_points": common.points(cfg, 0)}


# -- β-VAE score ----------------------------------------------------------------------------------

@common.sampled_from_the_grid
def _beta_vae(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Higgins et al.'s score as disentanglement_lib (`metrics.beta_vae.beta_vae_score`)."""
  common.require_ground_truth(inputs)
  estimators_lib.check(s["estimators"])
  by = beta_vae.beta_vae_score(inputs.ground_truth, inputs.represent, inputs.rng,
                               batch_size=s["batch_size"], num_train=s["num_train"],
                               num_eval=s["num_eval"], estimators=s["estimators"],
                               encode_batch_size=inputs.encode_batch_size)
  return common.headline(by, "eval_accuracy", s["use_discrete"])


registry.register(registry.Metric(
    "factor_score_dlib", "FactorVAE score (dlib)", _factor_score_dlib,
    lambda cfg, stage: dict(_votes(cfg), use_discrete=common.use_discrete(cfg)),
    training_flag="", ground_truth=True, sampled=True, postprocessed=True,
    describe=lambda m: (f"{common.describe_protocols(m, 'eval_accuracy')}: {m['num_votes']} "
                        f"train / {m['num_eval_votes']} eval votes x {m['batch_size']}, "
                        f"variances over {m['num_variance_points']} points, std pruning "
                        f"{m['prune_std']}, train accuracy {m['train_accuracy']:.4f}")))
registry.register(registry.Metric(
    "beta_vae", "β-VAE score", _beta_vae,
    lambda cfg, stage: {"batch_size": beta_vae.BATCH_SIZE,
                        "num_train": common.points(cfg, beta_vae.NUM_TRAIN),
                        "num_eval": common.points(cfg, beta_vae.NUM_EVAL, half=True),
                        "use_discrete": common.use_discrete(cfg),
                        "estimators": common.estimators_of(cfg)},
    training_flag="", ground_truth=True, sampled=True, postprocessed=True,
    describe=lambda m: (f"{common.describe_protocols(m, 'eval_accuracy')}: {m['num_train']} "
                        f"train / {m['num_eval']} eval points, pairs of {m['batch_size']}, "
                        f"{m['classifier']}, train accuracy {m['train_accuracy']:.4f}")))


# -- SAP, DCI, modularity and explicitness, IRS: points drawn once, train and test -------------


@common.sampled_from_the_grid
def _sap(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Kumar et al.'s SAP as disentanglement_lib (`metrics.sap`)."""
  estimators_lib.check(s["estimators"])
  sets, used, code_sizes = common.sets(inputs, s)
  settings = estimators_lib.linear_svc_settings(s["estimators"], sap.SVC_C, "balanced")
  def fn(x_tr, y_tr, x_te, y_te, groups, with_codes):
    del with_codes
    log = estimators_lib.FitLog()
    m = sap.score_matrix(x_tr, y_tr, x_te, y_te, groups, s["continuous_factors"],
                         estimators=s["estimators"], log=log)
    return {"score": sap.avg_diff_top_two(m), "score_matrix": m,
            "estimator": log.record(settings)}
  by = common.by_protocol(sets, code_sizes, True, fn)
  classifier = (f"{estimators_lib.describe(settings)} per latent and factor"
                if not s["continuous_factors"] else "none (squared correlation)")
  return common.headline(by, "score", s["use_discrete"], factors_used=used,
                         num_train=s["num_train"], num_test=s["num_test"],
                         continuous_factors=s["continuous_factors"], classifier=classifier)




@common.sampled_from_the_grid
def _dci(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Eastwood & Williams' DCI as disentanglement_lib (`metrics.dci`); value: disentanglement."""
  estimators_lib.check(s["estimators"])
  sets, used, code_sizes = common.sets(inputs, s)
  seed = int(inputs.rng.integers(2**31))
  def fn(x_tr, y_tr, x_te, y_te, groups, with_codes):
    del with_codes
    r, train_acc, test_acc = dci.importance_matrix(x_tr, y_tr, x_te, y_te, groups, seed,
                                                   trees=s["trees"], estimators=s["estimators"])
    return {"disentanglement": dci.disentanglement(r), "completeness": dci.completeness(r),
            "informativeness_train": train_acc, "informativeness_test": test_acc,
            "importance_matrix": r}
  by = common.by_protocol(sets, code_sizes, True, fn)
  return common.headline(by, "disentanglement", s["use_discrete"], factors_used=used,
                         num_train=s["num_train"], num_test=s["num_test"], tree_seed=seed,
                         classifier=common.DCI_TREES[s["trees"]], trees=s["trees"],
                         estimator=common.dci_estimator(s))


@common.sampled_from_the_grid
def _modularity(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Ridgeway & Zemel's modularity and explicitness as disentanglement_lib
  (`metrics.modularity`); value: modularity."""
  estimators_lib.check(s["estimators"])
  sets, used, code_sizes = common.sets(inputs, s)
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
  by = common.by_protocol(sets, code_sizes, True, fn)
  return common.headline(by, "modularity", s["use_discrete"], factors_used=used,
                         num_train=s["num_train"], num_test=s["num_test"], num_bins=s["num_bins"],
                         classifier=f"{estimators_lib.describe(settings)} on standardised latents")


def _explicitness_logged(m: dict) -> dict:
  return {"modularity": m["value"], "explicitness": m["explicitness_test"]}


@common.sampled_from_the_grid
def _irs(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Suter et al.'s IRS as disentanglement_lib (`metrics.irs`); the means alone."""
  sets, used, _ = common.sets(inputs, s, names=("train",))
  rep, factors = sets["train"]
  binned = sampling.histogram_discretize(factors.astype(np.float64), s["num_bins"])
  out = irs.irs(binned, rep.mean, s["diff_quantile"])
  return dict(out, value=out["score"], protocol=sampling.PROTOCOL, use_discrete=False,
              factors_used=used, num_train=s["num_train"], num_bins=s["num_bins"],
              diff_quantile=s["diff_quantile"])


@common.sampled_from_the_grid
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
  return common.headline(by, "gaussian_total_correlation", s["use_discrete"], points=points,
                         num_points=rep.num_examples, num_bins=s["num_bins"], units="nats")


_KEYS = ("gaussian_total_correlation", "gaussian_wasserstein_correlation",
         "gaussian_wasserstein_correlation_norm", "mutual_info_score")

registry.register(registry.Metric(
    "sap", "SAP", _sap, common.split_settings(sap, continuous_factors=False), training_flag="",
    ground_truth=True, sampled=True, postprocessed=True,
    describe=lambda m: (f"{common.describe_protocols(m, 'score')}: {m['num_train']} train / "
                        f"{m['num_test']} test points, {m['classifier']}")))


def _dci_settings(cfg, stage):
  return dict(common.split_settings(dci)(cfg, stage),
              trees=registry.setting(cfg, "dci_trees", "together"))


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
registry.register(registry.Metric(
    "modularity", "modularity", _modularity,
    common.split_settings(modularity, num_bins=modularity.NUM_BINS), training_flag="",
    ground_truth=True, sampled=True, postprocessed=True, logged=_explicitness_logged,
    describe=lambda m: (f"{common.describe_protocols(m, 'modularity')}: explicitness "
                        f"{m['explicitness_train']:.4f} / {m['explicitness_test']:.4f} (train / "
                        f"test ROC-AUC), {m['num_bins']} bins, {m['num_train']} / "
                        f"{m['num_test']} points")))
registry.register(registry.Metric(
    "irs", "IRS", _irs,
    lambda cfg, stage: {"num_train": common.points(cfg, irs.NUM_TRAIN), "num_bins": irs.NUM_BINS,
                        "diff_quantile": irs.DIFF_QUANTILE},
    training_flag="", ground_truth=True, sampled=True, postprocessed=True,
    describe=lambda m: (f"{m['protocol']}: {m['num_train']} points, factors in {m['num_bins']} "
                        f"bins, quantile {m['diff_quantile']}, {m['num_active_dims']} active "
                        f"dims")))
registry.register(registry.Metric(
    "unsupervised", "Gaussian total correlation (nats)", _unsupervised,
    lambda cfg, stage: {"num_train": common.points(cfg, unsupervised.NUM_TRAIN),
                        "num_bins": unsupervised.NUM_BINS,
                        "use_discrete": common.use_discrete(cfg)},
    training_flag="", sampled=True, postprocessed=True, tabulated=False,
    logged=lambda m: {k: m[k] for k in _KEYS},
    describe=lambda m: (f"{common.describe_protocols(m, 'gaussian_total_correlation')}: "
                        + ", ".join(f"{k} {m[k]:.4f}" for k in _KEYS[1:])
                        + f", {m['num_points']} points ({m['points']}), {m['num_bins']} bins")))


# -- UDR's sample: the same points for every seed; the score is `aggregate`'s, per table row ----

@common.sampled_from_the_grid
def _udr_sample(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """The means (and mean KL per latent) of `udr.NUM_POINTS` points drawn with the fixed stream
  `udr.POINTS_SEED`, so that every seed of a configuration encodes the same observations;
  `disentangle.evaluation.aggregate` computes UDR (`metrics.udr`) over a row's runs from them."""
  common.require_ground_truth(inputs)
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
