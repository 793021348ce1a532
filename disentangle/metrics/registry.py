"""The one list of evaluation metrics: each registered once, read by every consumer.

A `Metric` names itself, says how to read its settings from ``config.eval``, and computes its
number from `Inputs` (the encodings the caller prepared). The in-training evaluator
(`disentangle.evaluation.evaluator`), the evaluation of a saved run (`disentangle.evaluation.evaluate_run`,
``python -m experiments.evaluate``), the report (`disentangle.evaluation.report`) and the tables over
seeds (`disentangle.evaluation.aggregate`, ``python -m experiments.aggregate``) all iterate `METRICS`;
a new metric (PartedVAE's direct accuracy, its factor-score protocol, FFVAE's fairness gaps) is
one `register` call and appears in all of them.

Two stages: ``"training"`` (eval steps: cheap monitors on the ``eval.num_points`` eval points,
each switched on by its ``config.eval`` flag) and ``"run"`` (`evaluate_run`: the papers'
protocols, every applicable metric). Every result is a dict holding ``value`` (the headline
number, a fraction for tabulated metrics) and every setting that produced it (protocol,
estimator, ``use_discrete``, points), so a number never leaves without its protocol.

Random streams: each metric draws from its own stream, `metric_rng` (the evaluation's seed
sequence, e.g. ``default_rng([seed, step])``, spawned with the metric's name and the repeat), as
disentanglement_lib hands each metric a fresh ``random_state``: adding, removing or reordering
metrics never moves another metric's number. ``eval.repeats`` = R > 1 runs every metric that
samples (``Metric.sampled``) R times from R such streams; its result is the first repeat's with
``value`` the mean, ``value_std`` the standard deviation (ddof 1) and ``values`` the R values.

Order: metrics run in registration order, except that the ground-truth metrics (which read the
whole dataset's encodings in the run stage) run first in ``"run"`` and last in ``"training"``.

Bad input (a ground-truth metric on data without factors, too few points for a split, NaN in a
representation): the metric raises `MetricInputError`; `run` logs one line naming the metric and
the cause, records it in ``errors`` and runs the others.
"""
from __future__ import annotations

import dataclasses
import logging
import zlib
from typing import Any, Callable, Optional

import numpy as np

from disentangle.metrics.accuracy import classification_accuracy, per_variable_accuracy
from disentangle.metrics.clustering import cluster_accuracy
from disentangle.metrics.factor_vae import factor_vae_score
from disentangle.metrics.information import information_report
from disentangle.metrics.mig import ESTIMATORS as MIG_ESTIMATORS
from disentangle.metrics.mig import mig
from disentangle.metrics.representation import Representation, encode_factors
from disentangle.metrics.sampling import MetricInputError

STAGES = ("training", "run")
# ``eval.use_discrete``: whether a discrete code enters the metrics of continuous codes.
# 'protocol': as each metric's published protocol (CascadeVAE's score: yes; MIG: no).
USE_DISCRETE = ("protocol", "include", "exclude")
# Papers' settings used by the run stage (overridable per call, e.g. ``experiments.evaluate``).
PAPER_NUM_VOTES = 800        # CascadeVAE supplement C: M votes ...
PAPER_VOTE_BATCH = 100       # ... of L examples
MIG_NUM_POINTS = 10_000      # disentanglement_lib's MIG: 10,000 points, 20 bins
MIG_NUM_BINS = 20
INFORMATION_SAMPLES = 1000   # samples of the information estimates
PARTEDVAE_VOTE_BATCH = 100   # PartedVAE's score (authors' utils/metrics.py): groups of L = 100,
PARTEDVAE_PRUNE_STD = 0.1    # votes of dimensions with std < 0.1 zeroed


def metric_rng(base: np.random.Generator, name: str, repeat: int = 0) -> np.random.Generator:
  """The stream of metric ``name`` (repeat ``repeat``) derived from ``base``'s seed sequence.

  ``SeedSequence(entropy=base's entropy, spawn_key=base's spawn key + (crc32(name), repeat))``:
  independent of every other metric and of how many streams were drawn before.
  """
  seq = getattr(base.bit_generator, "seed_seq", None)
  if not isinstance(seq, np.random.SeedSequence):
    raise ValueError("metric streams need a Generator made by np.random.default_rng(seed)")
  key = tuple(seq.spawn_key) + (zlib.crc32(name.encode()), int(repeat))
  return np.random.default_rng(np.random.SeedSequence(seq.entropy, spawn_key=key))


def stream_of(base: np.random.Generator, name: str, repeat: int = 0) -> dict:
  """The words recorded beside a result for the stream `metric_rng` gave it."""
  seq = base.bit_generator.seed_seq
  entropy = seq.entropy if np.ndim(seq.entropy) == 0 else [int(e) for e in seq.entropy]
  return {"entropy": entropy, "spawn_key": [int(k) for k in seq.spawn_key],
          "metric": name, "repeat": int(repeat)}


@dataclasses.dataclass
class Inputs:
  """What a metric reads; prepared once per evaluation by the caller.

  Attributes:
    stage: 'training' or 'run'.
    rng: the evaluation's stream (``default_rng([seed, step])``); `run` hands each metric its
      own `metric_rng` of it, so inside ``compute`` this is the metric's stream.
    rep: encodings of the eval points (``eval.num_points`` of the evaluation data).
    labels: class labels of ``labelled_rep``'s rows (MNIST digits), or None.
    labelled_rep: encodings the label accuracies read (training: ``rep``; run: every example of
      the evaluation split).
    labelled_points: words for those rows, recorded with the accuracies.
    code_named: the method names its discrete code by labels (semi-supervised: its
      `BatchSpec.targets` is not empty, e.g. PartedVAE with labels), so the identity mapping
      means something; the ``*_direct`` accuracies are computed only then (an unsupervised
      code's class k is no more "digit k" than any other).
    targets: int label columns [n, K] of ``labelled_rep``'s rows (-1 unknown), named by
      ``target_names`` (the method's `BatchSpec.targets`), for the per-variable accuracy of K
      discrete codes (PartedVAE on CelebA), or None.
    target_names: names of those columns.
    ground_truth: ground-truth protocol object the disentanglement metrics sample from (the
      whole dataset's `encodings.EncodedGroundTruth`, or the dataset itself), or None.
    represent: its representation function (observations -> `Representation`).
    factors: factor rows [n, K] of ``factor_rep`` (for accuracies against a factor), or None
      (then sampled from ``ground_truth``).
    factor_rep: the encodings of those rows.
    factor_points: words for those rows.
    factor_names: names of the ground-truth factors.
    encode_batch_size: rows per ``represent`` call.
    whole_dataset_max: largest ground truth the score encodes whole (training: the eval points).
  """
  stage: str
  rng: np.random.Generator
  rep: Optional[Representation] = None
  labels: Optional[np.ndarray] = None
  labelled_rep: Optional[Representation] = None
  labelled_points: str = "the eval points"
  code_named: bool = False
  targets: Optional[np.ndarray] = None
  target_names: tuple = ()
  ground_truth: Any = None
  represent: Optional[Callable] = None
  factors: Optional[np.ndarray] = None
  factor_rep: Optional[Representation] = None
  factor_points: str = "the eval points"
  factor_names: tuple = ()
  encode_batch_size: int = 1000
  whole_dataset_max: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class Metric:
  """One metric.

  Attributes:
    name: key in ``results.json``'s ``metrics``, ``eval/step_<n>.json`` and the tables.
    title: column title of the tables and the report.
    compute: (inputs, settings) -> result dict with ``value``, or None when it does not apply.
    settings: (config.eval, stage) -> the settings dict passed to ``compute``.
    training_flag: the ``config.eval`` bool field that turns it on at eval steps; None: on
      whenever it applies; "" : never at eval steps.
    ground_truth: reads ``Inputs.ground_truth`` (ordering, see the module doc).
    sampled: its number depends on its random stream (``eval.repeats`` repeats it).
    tabulated: its ``value`` is a fraction for the tables over seeds (aggregate: in percent).
    logged: result -> the flat ``eval/...`` scalars logged at eval steps (default {name: value}).
    describe: result -> one line of settings for the report.
  """
  name: str
  title: str
  compute: Callable[[Inputs, dict], Optional[dict]]
  settings: Callable[[Any, str], dict] = lambda cfg, stage: {}
  training_flag: Optional[str] = None
  ground_truth: bool = False
  sampled: bool = False
  tabulated: bool = True
  logged: Optional[Callable[[dict], dict]] = None
  describe: Callable[[dict], str] = lambda result: ""

  def log_values(self, result: dict) -> dict:
    return self.logged(result) if self.logged else {self.name: result["value"]}

  def enabled(self, eval_config, stage: str) -> bool:
    if stage == "run" or self.training_flag is None:
      return True
    return bool(self.training_flag) and bool(_get(eval_config, self.training_flag, False))


METRICS: dict[str, Metric] = {}


def register(metric: Metric) -> Metric:
  """Adds ``metric``; a name registered twice is an error."""
  if metric.name in METRICS:
    raise ValueError(f"metric {metric.name!r} is already registered")
  METRICS[metric.name] = metric
  return metric


def tabulated() -> tuple[str, ...]:
  """Names of the metrics the tables over seeds show, in registration order."""
  return tuple(name for name, m in METRICS.items() if m.tabulated)


def titles() -> dict[str, str]:
  return {name: m.title for name, m in METRICS.items()}


def ordered(stage: str) -> list[Metric]:
  """The metrics in the order a stage runs them (see the module doc)."""
  if stage not in STAGES:
    raise ValueError(f"unknown stage {stage!r}; choose from {list(STAGES)}")
  first = stage == "run"
  return sorted(METRICS.values(), key=lambda m: m.ground_truth != first)


def settings_of(eval_config, stage: str, overrides: Optional[dict] = None) -> dict:
  """{name: settings} of every metric from ``config.eval``, then ``overrides[name]`` on top."""
  out = {}
  for name, m in METRICS.items():
    out[name] = dict(m.settings(eval_config, stage), **(overrides or {}).get(name, {}))
  return out


def run(inputs: Inputs, eval_config, *, names=None, overrides: Optional[dict] = None,
        clock: Optional[Callable[[], float]] = None,
        errors: Optional[dict] = None) -> tuple[dict, dict]:
  """Every enabled, applicable metric (or only ``names``); ({name: result}, {name_s: seconds}).

  Each metric computes from its own stream (`metric_rng`), ``eval.repeats`` times if it samples
  (module doc). A metric raising `MetricInputError` is logged in one line and left out; its
  line goes into ``errors`` ({name: line}) when given.
  """
  import time  # pylint: disable=g-import-not-at-top
  clock = clock or time.perf_counter
  settings = settings_of(eval_config, inputs.stage, overrides)
  repeats = int(_get(eval_config, "repeats", 1))
  if repeats < 1:
    raise ValueError(f"eval.repeats must be at least 1, got {repeats}")
  results, timings = {}, {}
  for m in ordered(inputs.stage):
    if (names is not None and m.name not in names) or not m.enabled(eval_config, inputs.stage):
      continue
    t0 = clock()
    try:
      result = _repeated(m, inputs, settings[m.name], repeats if m.sampled else 1)
    except MetricInputError as e:
      line = f"{m.name}: {e}"
      logging.warning("metric not computed: %s", line)
      if errors is not None:
        errors[m.name] = line
      continue
    if result is not None:
      results[m.name] = result
      timings[f"{m.name}_s"] = clock() - t0
  return results, timings


def _repeated(m: Metric, inputs: Inputs, settings: dict, repeats: int) -> Optional[dict]:
  """``m`` on ``repeats`` streams of its own; the mean and std across them when more than one."""
  outs = []
  for r in range(repeats):
    own = dataclasses.replace(inputs, rng=metric_rng(inputs.rng, m.name, r))
    out = m.compute(own, settings)
    if out is None:
      return None
    outs.append(dict(out, stream=stream_of(inputs.rng, m.name, r)))
  if repeats == 1:
    return outs[0]
  values = [o["value"] for o in outs]
  ok = [v for v in values if v is not None and np.isfinite(v)]
  return dict(outs[0], value=float(np.mean(ok)) if ok else None,
              value_std=float(np.std(ok, ddof=1)) if len(ok) > 1 else None,
              values=values, repeats=repeats,
              stream=[o["stream"] for o in outs])


def resolve_use_discrete(eval_config, protocol_default: bool) -> bool:
  """``eval.use_discrete`` ('protocol' / 'include' / 'exclude'; a bool in Python calls) for one
  metric whose published protocol uses the discrete code iff ``protocol_default``."""
  choice = _get(eval_config, "use_discrete", "protocol")
  if isinstance(choice, bool):
    return choice
  if choice not in USE_DISCRETE:
    raise ValueError(f"eval.use_discrete must be one of {list(USE_DISCRETE)}, got {choice!r}")
  return protocol_default if choice == "protocol" else choice == "include"


def _get(eval_config, field: str, default):
  if eval_config is None:
    return default
  getter = getattr(eval_config, "get", None)
  return getter(field, default) if getter is not None else getattr(eval_config, field, default)


# -- the metrics ------------------------------------------------------------------------------

def _factor_score_settings(cfg, stage):
  training = stage == "training"
  return {"protocol": "cascadevae",
          "num_votes": int(_get(cfg, "factor_score_votes", PAPER_NUM_VOTES)) if training
                       else PAPER_NUM_VOTES,
          "batch_size": PAPER_VOTE_BATCH,
          "use_discrete": resolve_use_discrete(cfg, True)}


def _factor_score(inputs: Inputs, s: dict) -> Optional[dict]:
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
  return {"estimator": _get(cfg, "mig_estimator", "histogram"), "num_points": MIG_NUM_POINTS,
          "num_bins": MIG_NUM_BINS, "use_discrete": resolve_use_discrete(cfg, False)}


def _mig(inputs: Inputs, s: dict) -> Optional[dict]:
  """Chen et al.'s MIG; `metrics.mig` with ``eval.mig_estimator`` and ``eval.use_discrete``.

  ``estimator='both'`` (FFVAE App. E names Eq. 8, not the estimator): the histogram result is
  the headline (``value``), the sampled one sits beside it under ``by_estimator`` (both labelled,
  the sampled one computed after the histogram one from the same random stream).
  """
  if inputs.ground_truth is None:
    return None
  estimators = MIG_ESTIMATORS if s["estimator"] == "both" else (s["estimator"],)
  if any(e not in MIG_ESTIMATORS for e in estimators):
    raise ValueError(f"eval.mig_estimator must be one of {list(MIG_ESTIMATORS) + ['both']}, "
                     f"got {s['estimator']!r}")
  outs = {e: mig(inputs.ground_truth, inputs.represent, inputs.rng, num_points=s["num_points"],
                 num_bins=s["num_bins"], estimator=e, use_discrete=s["use_discrete"],
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


def _shape_rows(inputs: Inputs, num_points: int, rng: Callable[[], np.random.Generator]):
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


def _shape_accuracy(inputs: Inputs, s: dict) -> Optional[dict]:
  """One-to-one (Hungarian) accuracy of the discrete code against the shape factor (dSprites,
  CascadeVAE Table 2): on the rows of ``Inputs.factors``, else on ``num_points`` sampled ones."""
  rows = _shape_rows(inputs, s["num_points"], lambda: inputs.rng)
  if rows is None:
    return None
  shape, rep, where = rows
  acc = cluster_accuracy(shape, rep.discrete)
  return dict(acc, value=acc["one_to_one"], factor="shape", points=where,
              mapping="one_to_one (Hungarian)")


def _accuracy(inputs: Inputs, s: dict) -> Optional[dict]:
  """One-to-one (Hungarian) accuracy of the discrete code against the labels."""
  del s
  rep = inputs.labelled_rep
  if inputs.labels is None or rep is None or rep.discrete is None:
    return None
  acc = cluster_accuracy(np.asarray(inputs.labels), rep.discrete)
  return dict(acc, value=acc["one_to_one"], mapping="one_to_one (Hungarian)",
              points=inputs.labelled_points)


def _accuracy_direct(inputs: Inputs, s: dict) -> Optional[dict]:
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


def _variable_accuracy(inputs: Inputs, s: dict) -> Optional[dict]:
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


def _shape_accuracy_direct(inputs: Inputs, s: dict) -> Optional[dict]:
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


def _factor_score_partedvae(inputs: Inputs, s: dict) -> Optional[dict]:
  """PartedVAE's factor score (``protocol='partedvae'``, `metrics.factor_vae_score`): every
  example's [mu_z, mu_u], std-normalised, groups of L = 100 per factor value in a random order,
  votes of dims with std < 0.1 zeroed (Sec. 5.1, Tables 1-2; the authors' code)."""
  if inputs.ground_truth is None:
    return None
  score = factor_vae_score(inputs.ground_truth, inputs.represent, inputs.rng,
                           protocol="partedvae",
                           batch_size=s["batch_size"], prune_std=s["prune_std"],
                           encode_batch_size=inputs.encode_batch_size,
                           **({"whole_dataset_max": inputs.whole_dataset_max}
                              if inputs.whole_dataset_max is not None else {}))
  return dict(score, value=score["score"], points=inputs.factor_points)


def _factor_score_no_discrete(inputs: Inputs, s: dict) -> Optional[dict]:
  """The CascadeVAE score (supplement C) without the discrete dimension, beside ``factor_score``
  (which follows ``eval.use_discrete``); only for encoders with a discrete code."""
  if inputs.ground_truth is None:
    return None
  if inputs.factor_rep is not None and inputs.factor_rep.discrete is None:
    return None  # no discrete code: the same number as factor_score
  return _factor_score(inputs, dict(s, use_discrete=False))


def _information(inputs: Inputs, s: dict) -> Optional[dict]:
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


def _describe_mig(m):
  text = (f"{m['protocol']}: {m['estimator']}, {m['num_points']} points, {m['num_bins']} bins, "
          f"factors {m['factors_used']}, discrete code {'in' if m['use_discrete'] else 'out'}")
  others = [f"{e} {o['value']:.4f} ({o['protocol']})"
            for e, o in m.get("by_estimator", {}).items() if e != m["estimator"]]
  return text + (f"; also {', '.join(others)}" if others else "")


def _describe_accuracy(m):
  return (f"{m['mapping']}, {m['num_examples']} examples ({m['points']}), many-to-one "
          f"{m['many_to_one']:.4f}, {m['num_clusters']} clusters / {m['num_labels']} labels")


register(Metric("factor_score", "score", _factor_score, _factor_score_settings,
                training_flag="factor_score", ground_truth=True, sampled=True,
                describe=_describe_score))
register(Metric("mig", "MIG", _mig, _mig_settings, training_flag="mig", ground_truth=True,
                sampled=True, logged=_mig_logged, describe=_describe_mig))
register(Metric("shape_accuracy", "shape acc.", _shape_accuracy,
                lambda cfg, stage: {"num_points": MIG_NUM_POINTS}, ground_truth=True,
                sampled=True, describe=_describe_accuracy))
register(Metric("information", "total correlation (nats)", _information,
                lambda cfg, stage: {"num_samples": INFORMATION_SAMPLES},
                training_flag="information", sampled=True, tabulated=False,
                logged=_information_logged,
                describe=lambda m: (f"{m['estimator']}, {m['num_points']} points, "
                                    f"{m['num_samples']} samples")))
register(Metric("accuracy", "accuracy", _accuracy, training_flag="cluster_accuracy",
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
  return (f"partedvae: {m['num_points']} points ({m['points_source']}), groups of "
          f"{m['batch_size']} per factor value ({m['num_votes']} votes), "
          f"std ddof 0, votes of dims with std < {m['prune_std']} zeroed (pruned "
          f"{m['pruned_dims']}), {m['num_votes_counted']} votes counted, no discrete code")


register(Metric("accuracy_direct", "accuracy (direct)", _accuracy_direct,
                training_flag="cluster_accuracy", describe=_describe_direct))
register(Metric("variable_accuracy", "accuracy per variable (mean)", _variable_accuracy,
                training_flag="cluster_accuracy",
                logged=lambda m: {"variable_accuracy": m["value"],
                                  **{f"variable_accuracy/{n}": a
                                     for n, a in m["accuracy"].items() if a is not None}},
                describe=_describe_variables))
register(Metric("shape_accuracy_direct", "shape acc. (direct)", _shape_accuracy_direct,
                lambda cfg, stage: {"num_points": MIG_NUM_POINTS},
                ground_truth=True, sampled=True, describe=_describe_direct))
register(Metric("factor_score_partedvae", "score (PartedVAE)", _factor_score_partedvae,
                lambda cfg, stage: {"batch_size": PARTEDVAE_VOTE_BATCH,
                                    "prune_std": PARTEDVAE_PRUNE_STD},
                training_flag="partedvae_score", ground_truth=True, sampled=True,
                describe=_describe_partedvae_score))
register(Metric("factor_score_no_discrete", "score (no d)", _factor_score_no_discrete,
                _factor_score_settings, training_flag="factor_score", ground_truth=True,
                sampled=True, describe=_describe_score))
