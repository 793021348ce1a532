"""The representation disentanglement_lib's metrics score: the mean, a sample, or both.

disentanglement_lib postprocesses every trained model twice before its metrics run
(``postprocessing/postprocess.py``, the study's ``config/unsupervised_study_v1/
postprocess_configs/mean.gin`` and ``sampled.gin``), with the transforms of
``postprocessing/methods.py``: ``mean_representation`` (the encoder's mean) and
``sampled_representation`` (``tf.add(mean, tf.exp(logvar / 2) * tf.random_normal(tf.shape(mean),
0, 1))``: a fresh standard normal each time the exported representation function is called);
each metric then scores each of the two (the study's Fig. 1 total correlation is the sampled
one's). ``eval.representation``:

- ``'mean'`` (the default): the encoder's mean;
- ``'sampled'``: z = mu + sigma x eps (`sample`), with eps fresh on every call of the
  representation function and on each stored encoding read (the whole data set's, the eval
  points'), drawn from a stream fixed by the evaluation's seed, the metric and its repeat
  (`registry.metric_rng` of ``"sampled:" + metric``), so a number stays a function of the run's
  config and seed; the metric's own draws of points are the mean's (the same points);
- ``'both'``: each metric on the mean, and again on the sample.

Only the metrics of disentanglement_lib's suite (``Metric.postprocessed``) read the sample; the
others (the CascadeVAE / PartedVAE / FFVAE protocols) read the mean under every setting. The
sample has no log-variance (disentanglement_lib's sampled representation is a vector), so an
estimator that needs one (MIG's sampled estimator) reports that it cannot run.

In ``results.json`` (`label`): under 'sampled' a metric's result carries ``representation:
'sampled'``; under 'both' the mean's result carries ``representation: 'mean'`` and the sample's
result under ``sampled``; `value_of` reads either.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import numpy as np

from disentangle.metrics.representation import MetricInputError
from disentangle.metrics.representation import Representation
from disentangle.metrics.representation import as_representation

STREAM_PREFIX = "sampled:"  # the sample's stream: registry.metric_rng(base, prefix + metric, r)


def scored(choice: str) -> tuple[str, ...]:
  """The representations ``choice`` scores, in order: ('mean',), ('sampled',) or both."""
  return ("mean", "sampled") if choice == "both" else (choice,)


def sample(rep: Optional[Representation], rng: np.random.Generator) -> Optional[Representation]:
  """``rep`` with its mean replaced by mean + exp(logvar / 2) x eps, eps ~ N(0, 1) of the
  mean's shape drawn from ``rng`` (disentanglement_lib's ``sampled_representation``); no
  log-variance; the discrete codes unchanged. `MetricInputError` without a log-variance."""
  if rep is None:
    return None
  if rep.logvar is None:
    raise MetricInputError("eval.representation 'sampled' needs the encoder's log-variance; this "
                           "representation has none")
  eps = rng.standard_normal(rep.mean.shape)
  return rep._replace(mean=rep.mean + np.exp(rep.logvar / 2.0) * eps, logvar=None)


def sampled_fn(represent: Callable, rng: np.random.Generator) -> Callable:
  """``represent`` drawing a fresh sample (`sample`) on every call, eps from ``rng`` in call
  order."""
  def fn(x):
    return sample(as_representation(represent(x)), rng)
  return fn


def sampled_inputs(inputs, rng: np.random.Generator):
  """A copy of `registry.Inputs` that reads the sample: the stored encodings (``factor_rep``,
  ``rep``, ``labelled_rep``, in that order, each drawn once) and ``represent`` (fresh on each
  call), all from ``rng``."""
  stored = {name: sample(getattr(inputs, name), rng)
            for name in ("factor_rep", "rep", "labelled_rep")}
  represent = None if inputs.represent is None else sampled_fn(inputs.represent, rng)
  return dataclasses.replace(inputs, represent=represent, **stored)


def label(mean: Optional[dict], sampled: Optional[dict], choice: str) -> Optional[dict]:
  """The result recorded for ``choice`` from the results on the mean and on the sample."""
  if choice == "mean":
    return mean
  if choice == "sampled":
    return None if sampled is None else dict(sampled, representation="sampled")
  if mean is None:
    return None
  return dict(mean, representation="mean",
              sampled=None if sampled is None else dict(sampled, representation="sampled"))


def value_of(result: Optional[dict], representation: str = "mean") -> Optional[float]:
  """The ``value`` of ``result`` (a metric's entry of ``results.json``) on ``representation``;
  None where it was not scored on it."""
  if not isinstance(result, dict):
    return None
  own = result.get("representation", "mean")
  if own == representation:
    return result.get("value")
  other = result.get("sampled") if representation == "sampled" else None
  return other.get("value") if isinstance(other, dict) else None
