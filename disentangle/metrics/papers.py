"""The metrics of the papers this project reproduces, registered in `registry`.

CascadeVAE's factor score (supplement C, and without the discrete code), MIG (two estimators),
the shape accuracy of the discrete code, the information estimates, the accuracies of a
discrete code against labels (one-to-one and, for a code named by labels, identity), and
PartedVAE's factor score; disentanglement_lib's suite is registered by `dlib`. Each function
computes one result from `registry.Inputs` (on the metric's own random stream) and its settings.
"""
from __future__ import annotations

import sys
from typing import Callable, Optional

import numpy as np

from disentangle.config import MIG_ESTIMATORS
from disentangle.metrics import registry
from disentangle.metrics.accuracy import classification_accuracy
from disentangle.metrics.accuracy import per_variable_accuracy
from disentangle.metrics.clustering import cluster_accuracy
from disentangle.metrics.factor_vae import factor_vae_score
from disentangle.metrics.information import information_report
from disentangle.metrics.mig import mig
from disentangle.metrics.representation import encode_factors
from disentangle.metrics.representation import enumerate_factors
from disentangle.metrics.sampling import MetricInputError


def _factor_score_settings(cfg, stage):
  training = stage == "training"
  return {"protocol": "cascadevae",
          "num_votes": int(registry.setting(cfg, "factor_score_votes")) if training
                       else registry.PAPER_NUM_VOTES,
          "batch_size": registry.PAPER_VOTE_BATCH,
          "use_discrete": registry.resolve_use_discrete(cfg, True)}


def _factor_score(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """CascadeVAE supplement C (``protocol='cascadevae'``); `metrics.factor_vae_score`."""
  if inputs.ground_truth is None:
    return None
  kwargs = dict(protocol=s["protocol"], num_votes=s["num_votes"], batch_size=s["batch_size"],
                use_discrete=s["use_discrete"], encode_batch_size=inputs.encode_batch_size)
  if inputs.whole_dataset_max is not None:
    kwargs["whole_dataset_max"] = inputs.whole_dataset_max
  if s.get("num_variance_points") is not None:
    kwargs["num_variance_points"] = s["num_variance_points"]
  score = factor_vae_score(inputs.ground_truth, inputs.represent, inputs.rng, **kwargs)
  score = dict(score, value=score["score"], use_discrete=score["discrete_dim"] is not None)
  if s.get("points"):
    score["points"] = s["points"]
  return score


def _mig_settings(cfg, stage):
  del stage
  return {"estimator": registry.setting(cfg, "mig_estimator"), "num_points": registry.MIG_NUM_POINTS,
          "num_bins": registry.MIG_NUM_BINS, "use_discrete": registry.resolve_use_discrete(cfg, False),
          "factor_set": registry.setting(cfg, "mig_factors")}


def _mig(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Chen et al.'s MIG; `metrics.mig` with ``eval.mig_estimator``, ``eval.mig_factors`` (the
  factor set: 'protocol' = Chen et al.'s, without dSprites' shape, for the sampled estimator and
  every factor for the histogram one) and ``eval.use_discrete``.

  ``estimator='both'`` (FFVAE App. E names Eq. 8, not the estimator): the histogram result is
  the headline (``value``), the sampled one sits beside it under ``by_estimator`` (both labelled,
  the sampled one computed after the histogram one from the same random stream).
  """
  if inputs.ground_truth is None:
    return None
  estimators = MIG_ESTIMATORS if s["estimator"] == "both" else (s["estimator"],)
  outs = {e: mig(inputs.ground_truth, inputs.represent, inputs.rng, num_points=s["num_points"],
                 num_bins=s["num_bins"], estimator=e, use_discrete=s["use_discrete"],
                 factor_set=s["factor_set"],
                 factor_names=inputs.factor_names or None,
                 encode_batch_size=inputs.encode_batch_size) for e in estimators}
  out = outs[estimators[0]]
  if len(estimators) == 1:
    return dict(out, value=out["score"])
  return dict(out, value=out["score"], value_is=f"{estimators[0]} estimator",
              by_estimator={e: dict(o, value=o["score"]) for e, o in outs.items()})


def _mig_logged(result: dict) -> dict:
  """``mig`` (the headline) and, with ``eval.mig_estimator='both'``, ``mig_<estimator>``."""
  out = {"mig": result["value"]}
  for e, o in result.get("by_estimator", {}).items():
    out[f"mig_{e}"] = o["value"]
  return out


def _shape_rows(inputs: registry.Inputs, num_points: int, rng: Callable[[], np.random.Generator]):
  """(shape classes [n], representation, where) of the shape factor's rows: those of
  ``Inputs.factors``, else ``num_points`` sampled with ``rng()`` (called only then) and encoded;
  None where there is no shape factor, no rows, or no discrete code."""
  if "shape" not in inputs.factor_names:
    return None
  k = inputs.factor_names.index("shape")
  factors, rep, where = inputs.factors, inputs.factor_rep, inputs.factor_points
  if factors is None:
    if inputs.ground_truth is None or inputs.stage == "training":
      return None
    gen = rng()
    factors = np.asarray(inputs.ground_truth.sample_factors(num_points, gen))
    rep = encode_factors(inputs.ground_truth, inputs.represent, factors, gen,
                         inputs.encode_batch_size)
    where = "sample"
  if rep is None or rep.discrete is None:
    return None
  return np.asarray(factors)[:, k], rep, where


def _shape_accuracy(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """One-to-one (Hungarian) accuracy of the discrete code against the shape factor (dSprites,
  CascadeVAE Table 2): on the rows of ``Inputs.factors``, else on ``num_points`` sampled ones."""
  rows = _shape_rows(inputs, s["num_points"], lambda: inputs.rng)
  if rows is None:
    return None
  shape, rep, where = rows
  acc = cluster_accuracy(shape, rep.discrete)
  return dict(acc, value=acc["one_to_one"], factor="shape", points=where,
              mapping="one_to_one (Hungarian)")


def _accuracy(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """One-to-one (Hungarian) accuracy of the discrete code against the labels."""
  del s
  rep = inputs.labelled_rep
  if inputs.labels is None or rep is None or rep.discrete is None:
    return None
  acc = cluster_accuracy(np.asarray(inputs.labels), rep.discrete)
  return dict(acc, value=acc["one_to_one"], mapping="one_to_one (Hungarian)",
              points=inputs.labelled_points)


def _accuracy_direct(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Identity-mapping accuracy of the discrete code against the labels (PartedVAE Sec. 5.2:
  the semi-supervised c is named by its labels); `metrics.accuracy.classification_accuracy`.
  None unless ``inputs.code_named``."""
  del s
  rep = inputs.labelled_rep
  if not inputs.code_named or inputs.labels is None or rep is None or rep.discrete is None:
    return None
  acc = classification_accuracy(np.asarray(inputs.labels), rep.discrete)
  if acc["accuracy"] is None:
    return None
  return dict(acc, value=acc["accuracy"], points=inputs.labelled_points)


def _variable_accuracy(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Identity-mapping accuracy of each of K discrete codes against its target column (PartedVAE
  on CelebA, label -1 skipped); ``value``: the mean over the variables with labels."""
  del s
  rep = inputs.labelled_rep
  if inputs.targets is None or rep is None or rep.codes is None:
    return None
  targets = np.asarray(inputs.targets)
  if targets.ndim != 2 or targets.shape[1] != rep.codes.shape[1] or targets.shape[1] < 2:
    return None  # one variable: that is accuracy_direct
  acc = per_variable_accuracy(targets, rep.codes, inputs.target_names or None)
  if acc["mean"] is None:
    return None
  return dict(acc, value=acc["mean"], value_is="mean over the variables with labels",
              points=inputs.labelled_points, mapping="identity")


def _shape_accuracy_direct(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Identity-mapping accuracy of the discrete code against the shape factor (dSprites,
  PartedVAE with shape labels), on the rows of ``Inputs.factors``, else on ``num_points``
  sampled ones. None unless ``inputs.code_named``."""
  if not inputs.code_named:
    return None
  rows = _shape_rows(inputs, s["num_points"], lambda: inputs.rng)
  if rows is None:
    return None
  shape, rep, where = rows
  acc = classification_accuracy(shape, rep.discrete)
  return dict(acc, value=acc["accuracy"], factor="shape", points=where)


def _partedvae_score_settings(cfg, stage):
  """The run stage reads every image (``num_points='all'``, the authors' protocol); eval steps
  read the ``eval.num_points`` eval points (0: all of them)."""
  points = "all" if stage == "run" else int(registry.setting(cfg, "num_points", 0)) or "all"
  return {"batch_size": registry.PARTEDVAE_VOTE_BATCH, "prune_std": registry.PARTEDVAE_PRUNE_STD,
          "num_points": points}


def _factor_score_partedvae(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """PartedVAE's factor score (``protocol='partedvae'``, `metrics.factor_vae_score`): every
  example's [mu_z, mu_u], std-normalised, groups of L = 100 per factor value in a random order,
  votes of dims with std < 0.1 zeroed (Sec. 5.1, Tables 1-2; the authors' code).

  The run stage (``num_points='all'``) reads every example of the evaluation set, as the
  authors' loop over their whole loader: the whole dataset's encodings when the caller has them,
  else every stored example encoded here, whatever the set's size; a set whose examples cannot
  be enumerated is not scored (`MetricInputError`). At eval steps it reads the eval points; a
  run stage asked for a number of points (`evaluate_run`'s ``variance_points``) reads a sample
  of that many. ``num_points_setting`` records which, ``num_points`` how many were read.
  """
  if inputs.ground_truth is None:
    return None
  every = s.get("num_points", "all") == "all" and inputs.stage == "run"
  if every and enumerate_factors(inputs.ground_truth) is None:
    raise MetricInputError(
        f"the authors' protocol reads every image, and {type(inputs.ground_truth).__name__} "
        f"cannot be enumerated (no factor rows of its examples)")
  limit = sys.maxsize if every else inputs.whole_dataset_max
  extra = {"whole_dataset_max": limit} if limit is not None else {}
  if inputs.stage == "run" and not every:  # a number of points asked of the run stage: a sample
    extra["num_variance_points"] = int(s["num_points"])
  score = factor_vae_score(inputs.ground_truth, inputs.represent, inputs.rng,
                           protocol="partedvae",
                           batch_size=s["batch_size"], prune_std=s["prune_std"],
                           encode_batch_size=inputs.encode_batch_size, **extra)
  return dict(score, value=score["score"], points=inputs.factor_points,
              num_points_setting=s.get("num_points", "all"))


def _factor_score_no_discrete(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """The CascadeVAE score (supplement C) without the discrete dimension, beside ``factor_score``
  (which follows ``eval.use_discrete``); only for encoders with a discrete code."""
  if inputs.ground_truth is None:
    return None
  if inputs.factor_rep is not None and inputs.factor_rep.discrete is None:
    return None  # no discrete code: the same number as factor_score
  return _factor_score(inputs, dict(s, use_discrete=False))


def _information(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """KL_j, I(x; z_j), total correlation (and I(x; d)) on the eval points."""
  rep = inputs.rep
  if rep is None or rep.logvar is None:
    return None
  info = information_report(rep, inputs.rng,
                            num_samples=min(s["num_samples"], rep.num_examples))
  return dict(info, value=info["total_correlation"], value_is="total_correlation")


def _information_logged(info: dict) -> dict:
  out = {k: info[k] for k in ("kl_per_dim", "mi_per_dim", "total_correlation")}
  if "discrete_mi" in info:
    out["discrete_mi"] = info["discrete_mi"]
  return out


def _describe_score(m):
  return (f"{m['protocol']}, {m['num_votes']} votes x {m['batch_size']}, variances over "
          f"{m['num_variance_points']} points ({m['variance_source']}), votes from "
          f"{m['vote_source']}, KL pruning {m['prune_kl']}, kept dims {m['kept_dims']}, "
          f"discrete code {'in' if m['use_discrete'] else 'out'}")


def _factors_of(m):
  """``set: names`` of a MIG result (its factor indices when it names no set)."""
  if "factor_set" not in m:
    return str(m["factors_used"])
  return f"{m['factor_set']}: {', '.join(m['factor_names'])}"


def _describe_mig(m):
  text = (f"{m['protocol']}: {m['estimator']}, {m['num_points']} points, {m['num_bins']} bins, "
          f"factors {_factors_of(m)}, discrete code {'in' if m['use_discrete'] else 'out'}")
  others = [f"{e} {o['value']:.4f} ({o['protocol']}, factors {_factors_of(o)})"
            for e, o in m.get("by_estimator", {}).items() if e != m["estimator"]]
  return text + (f"; also {', '.join(others)}" if others else "")


def _describe_accuracy(m):
  return (f"{m['mapping']}, {m['num_examples']} examples ({m['points']}), many-to-one "
          f"{m['many_to_one']:.4f}, {m['num_clusters']} clusters / {m['num_labels']} labels")


registry.register(registry.Metric("factor_score", "score", _factor_score, _factor_score_settings,
                training_flag="factor_score", ground_truth=True, sampled=True,
                describe=_describe_score))
registry.register(registry.Metric("mig", "MIG", _mig, _mig_settings, training_flag="mig", ground_truth=True,
                sampled=True, postprocessed=True, logged=_mig_logged, describe=_describe_mig))
registry.register(registry.Metric("shape_accuracy", "shape acc.", _shape_accuracy,
                lambda cfg, stage: {"num_points": registry.MIG_NUM_POINTS}, ground_truth=True,
                sampled=True, describe=_describe_accuracy))
registry.register(registry.Metric("information", "total correlation (nats)", _information,
                lambda cfg, stage: {"num_samples": registry.INFORMATION_SAMPLES},
                training_flag="information", sampled=True, tabulated=False,
                logged=_information_logged,
                describe=lambda m: (f"{m['estimator']}, {m['num_points']} points, "
                                    f"{m['num_samples']} samples")))
registry.register(registry.Metric("accuracy", "accuracy", _accuracy, training_flag="cluster_accuracy",
                logged=lambda m: {"accuracy": m["one_to_one"],
                                  "accuracy_many_to_one": m["many_to_one"]},
                describe=_describe_accuracy))


# -- PartedVAE's accuracies and factor score ----------------------------------------------------

def _describe_direct(m):
  return (f"identity mapping, {m['num_examples']} labelled examples ({m['points']}), "
          f"{m['num_skipped']} without label skipped")


def _describe_variables(m):
  per = ", ".join(f"{n} {a:.4f}" if a is not None else f"{n} -"
                  for n, a in m["accuracy"].items())
  return f"identity mapping per variable ({m['points']}): {per}"


def _describe_partedvae_score(m):
  setting = m.get("num_points_setting")
  read = "every image" if setting == "all" else f"eval.num_points = {setting}"
  return (f"partedvae: {m['num_points']} points ({read}; {m['points_source']}), groups of "
          f"{m['batch_size']} per factor value ({m['num_votes']} votes), "
          f"std ddof 0, votes of dims with std < {m['prune_std']} zeroed (pruned "
          f"{m['pruned_dims']}), {m['num_votes_counted']} votes counted, no discrete code")


registry.register(registry.Metric("accuracy_direct", "accuracy (direct)", _accuracy_direct,
                training_flag="cluster_accuracy", describe=_describe_direct))
registry.register(registry.Metric("variable_accuracy", "accuracy per variable (mean)", _variable_accuracy,
                training_flag="cluster_accuracy",
                logged=lambda m: {"variable_accuracy": m["value"],
                                  **{f"variable_accuracy/{n}": a
                                     for n, a in m["accuracy"].items() if a is not None}},
                describe=_describe_variables))
registry.register(registry.Metric("shape_accuracy_direct", "shape acc. (direct)", _shape_accuracy_direct,
                lambda cfg, stage: {"num_points": registry.MIG_NUM_POINTS},
                ground_truth=True, sampled=True, describe=_describe_direct))
registry.register(registry.Metric("factor_score_partedvae", "score (PartedVAE)", _factor_score_partedvae,
                _partedvae_score_settings,
                training_flag="partedvae_score", ground_truth=True, sampled=True,
                describe=_describe_partedvae_score))
registry.register(registry.Metric("factor_score_no_discrete", "score (no d)", _factor_score_no_discrete,
                _factor_score_settings, training_flag="factor_score", ground_truth=True,
                sampled=True, describe=_describe_score))
