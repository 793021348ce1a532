"""The one list of evaluation metrics: each registered once, read by every consumer.

A `Metric` names itself, says how to read its settings from ``config.eval``, and computes its
number from `Inputs` (the encodings the caller prepared). The in-training evaluator
(`disentangle.evaluation.evaluator`), the evaluation of a saved run (`disentangle.evaluation.evaluate_run`,
``python -m experiments.evaluate``), the report (`disentangle.evaluation.report`) and the tables over
seeds (`disentangle.evaluation.aggregate`, ``python -m experiments.aggregate``) all iterate `METRICS`;
a new metric (PartedVAE's direct accuracy, its factor-score protocol, FFVAE's fairness gaps) is
one `register` call and appears in all of them. The metrics themselves are registered by
`papers` (the papers' protocols) and `dlib` (disentanglement_lib's suite, one module per family),
both imported by `disentangle.metrics`, in that order.

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

Representations (``eval.representation``, `postprocess`): in the run stage the metrics of
disentanglement_lib's suite (``Metric.postprocessed``) score the posterior mean ('mean', the
default), a sample of the posterior ('sampled') or both, as disentanglement_lib's ``mean.gin``
and ``sampled.gin`` postprocessing; the sample's noise has a stream of its own per metric and
repeat, the points are the mean's.

Order: metrics run in registration order, except that the ground-truth metrics (which read the
whole dataset's encodings in the run stage) run first in ``"run"`` and last in ``"training"``.

Bad input (a ground-truth metric on data without factors, too few points for a split, NaN in a
representation): the metric raises `MetricInputError`; `run` logs one line naming the metric and
the cause, records it in ``errors`` and runs the others.
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Any, Callable, Optional
import zlib

import numpy as np

from disentangle import config as config_lib
from disentangle.metrics import postprocess
from disentangle.metrics.representation import Representation
from disentangle.metrics.sampling import MetricInputError

STAGES = ("training", "run")
# The defaults of ``config.eval``'s fields: what `setting` reads where a caller's settings lack one.
_EVAL_DEFAULTS = config_lib.base_config().eval
_CONFIG_DEFAULT = object()
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
    run_flag: the ``config.eval`` bool field that turns it on in the run stage (metrics that
      cost more than the rest of the suite together: the downstream tasks, the fairness score,
      the unified scores); None: always on there.
    ground_truth: reads ``Inputs.ground_truth`` (ordering, see the module doc).
    sampled: its number depends on its random stream (``eval.repeats`` repeats it).
    postprocessed: one of disentanglement_lib's metrics, which score its postprocessed
      representations: in the run stage scored on each of ``eval.representation``
      (`postprocess`: the mean, a sample of the posterior, or both).
    tabulated: its ``value`` is a fraction for the tables over seeds (aggregate: in percent).
    logged: result -> the flat ``eval/...`` scalars logged at eval steps (default {name: value}).
    describe: result -> one line of settings for the report.
  """
  name: str
  title: str
  compute: Callable[[Inputs, dict], Optional[dict]]
  settings: Callable[[Any, str], dict] = lambda cfg, stage: {}
  training_flag: Optional[str] = None
  run_flag: Optional[str] = None
  ground_truth: bool = False
  sampled: bool = False
  postprocessed: bool = False
  tabulated: bool = True
  logged: Optional[Callable[[dict], dict]] = None
  describe: Callable[[dict], str] = lambda result: ""

  def log_values(self, result: dict) -> dict:
    """The flat ``eval/...`` scalars of ``result`` logged at eval steps (``logged``'s, or
    ``{name: value}``)."""
    return self.logged(result) if self.logged else {self.name: result["value"]}

  def enabled(self, eval_config, stage: str) -> bool:
    """Whether ``stage`` (``"training"`` or ``"run"``) computes the metric under ``eval_config``
    (its ``training_flag`` / ``run_flag``)."""
    if stage == "run":
      return self.run_flag is None or bool(setting(eval_config, self.run_flag, False))
    if self.training_flag is None:
      return True
    return bool(self.training_flag) and bool(setting(eval_config, self.training_flag, False))


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
        clock: Optional[Callable[[], float]] = None, errors: Optional[dict] = None,
        progress: Optional[Callable[[str, Any, float], None]] = None) -> tuple[dict, dict]:
  """Every enabled, applicable metric (or only ``names``); ({name: result}, {name_s: seconds}).

  Each metric computes from its own stream (`metric_rng`), ``eval.repeats`` times if it samples
  (module doc). A metric raising `MetricInputError` is logged in one line and left out; its
  line goes into ``errors`` ({name: line}) when given. ``progress(name, outcome, seconds)`` is
  called as each metric ends: its result, None (it does not apply) or its error's line.
  """
  import time  # pylint: disable=g-import-not-at-top
  clock = clock or time.perf_counter
  settings = settings_of(eval_config, inputs.stage, overrides)
  repeats = int(setting(eval_config, "repeats"))
  if repeats < 1:
    raise ValueError(f"eval.repeats must be at least 1, got {repeats}")
  choice = setting(eval_config, "representation")
  results, timings = {}, {}
  for m in ordered(inputs.stage):
    if (names is not None and m.name not in names) or not m.enabled(eval_config, inputs.stage):
      continue
    t0 = clock()
    n = repeats if m.sampled else 1
    try:
      if m.postprocessed and inputs.stage == "run" and choice != "mean":
        on = {r: _repeated(m, inputs, settings[m.name], n, representation=r)
              for r in postprocess.scored(choice)}
        result = postprocess.label(on.get("mean"), on.get("sampled"), choice)
      else:
        result = _repeated(m, inputs, settings[m.name], n)
    except MetricInputError as e:
      line = f"{m.name}: {e}"
      logging.info("metric not computed: %s", line)  # recorded below; the caller reports it
      if errors is not None:
        errors[m.name] = line
      if progress is not None:
        progress(m.name, line, clock() - t0)
      continue
    if result is not None:
      results[m.name] = result
      timings[f"{m.name}_s"] = clock() - t0
    if progress is not None:
      progress(m.name, result, clock() - t0)
  return results, timings


def _repeated(m: Metric, inputs: Inputs, settings: dict, repeats: int,
              representation: str = "mean") -> Optional[dict]:
  """``m`` on ``repeats`` streams of its own; the mean and std across them when more than one;
  ``representation='sampled'``: on a sample of the posterior (`postprocess.sampled_inputs`,
  eps from the stream of ``"sampled:" + name``), the points drawn as for the mean."""
  outs = []
  for r in range(repeats):
    own = dataclasses.replace(inputs, rng=metric_rng(inputs.rng, m.name, r))
    if representation == "sampled":
      own = postprocess.sampled_inputs(
          own, metric_rng(inputs.rng, postprocess.STREAM_PREFIX + m.name, r))
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
  metric whose published protocol uses the discrete code iff ``protocol_default`` ('protocol':
  as each metric's published protocol, CascadeVAE's score: yes; MIG: no)."""
  choice = setting(eval_config, "use_discrete")
  if isinstance(choice, bool):
    return choice
  return protocol_default if choice == "protocol" else choice == "include"


def setting(eval_config, field: str, default=_CONFIG_DEFAULT):
  """``eval_config.<field>`` (a ConfigDict, a dict, or None: a metric called without a config),
  else ``default``, by default the field's own (``config.base_config``)."""
  if default is _CONFIG_DEFAULT:
    default = _EVAL_DEFAULTS[field]
  if eval_config is None:
    return default
  getter = getattr(eval_config, "get", None)
  return getter(field, default) if getter is not None else getattr(eval_config, field, default)
