"""`score(represent, dataset)`: a representation that was not trained here, scored on a
ground-truth set by name as `evaluate_run` scores a run's checkpoint (the same encodings of the
set, whole or `encodings.part_of` it, the same registered metrics, settings and streams), its
estimate printed first; it returns what ``results.json`` holds. Guide: docs/scoring_a_model.md;
command line: ``python -m experiments.score``.
"""
from __future__ import annotations

import datetime
import types
from typing import Any, Callable, Optional, Sequence

import numpy as np

from disentangle import backend
from disentangle import config as config_lib
from disentangle import data
from disentangle import errors
from disentangle import metrics as metrics_lib
from disentangle.evaluation import encodings
from disentangle.evaluation import evaluate_run
from disentangle.evaluation import evaluator

# What the evaluation asks of a method, for a function of images: no labels name its code.
_FUNCTION = types.SimpleNamespace(config=None, num_discrete=0,
                                  batch_spec=lambda config: data.IMAGES_ONLY)


class ScoreError(errors.UserError, ValueError):
  """A representation or a data set that cannot be scored; the message names which."""


def checked(represent: Callable[[np.ndarray], Any]) -> Callable:
  """``represent`` as `evaluate_run` calls an encoder (``(params, images)``), its output read as
  a `metrics.Representation`; `ScoreError` for the wrong shape or a mean not finite."""
  def fn(_, images):
    images = np.asarray(images)
    out = represent(images)
    try:
      rep = metrics_lib.as_representation(out)
    except (ValueError, TypeError, KeyError) as e:
      raise ScoreError(f"representation: {e}") from None
    if rep.num_examples != len(images):
      raise ScoreError(f"representation: {len(images)} images gave means of shape "
                       f"{list(rep.mean.shape)}, expected [{len(images)}, m]")
    if not np.isfinite(rep.mean).all():
      raise ScoreError(f"representation: its means hold NaN or inf (dims "
                       f"{sorted(set(np.nonzero(~np.isfinite(rep.mean))[1].tolist()))})")
    return rep
  return fn


def score(represent: Callable[[np.ndarray], Any], dataset, *,
          metrics: Optional[Sequence[str]] = None, max_points: int = 0,
          seed: int | Sequence[int] = 0, source: str = "auto",
          encode_batch_size: Optional[int] = None, eval_overrides: Optional[dict] = None,
          log: Optional[Callable[[str], None]] = print) -> dict:
  """The registered metrics of ``represent`` on the ground-truth set ``dataset``.

  Args:
    represent: a function of numpy images [n, H, W, C] (float32 in [0, 1]) returning the means
      [n, m], or a `metrics.Representation`, or a dict (``mean``, ``logvar``, ``discrete``).
    dataset: the name of a set with ground-truth factors (`data.load_dataset`), or such a set.
    metrics: the registered metrics to compute; None: every one that applies.
    max_points: 0, the protocols' sizes (dSprites: its 737,280 images encoded); N >= 100, at
      most N images encoded (a thinned factor grid) and N points per metric.
    seed: as ``np.random.default_rng`` takes it: each metric's stream comes from it, the
      information points from its first number (`evaluate_run`: ``[run seed, step]``).
    source: a dSprites-based set's: 'auto' (the official file, else the renderer), 'file',
      'render'.
    encode_batch_size: images per ``represent`` call (None: `encodings.ENCODE_BATCH`).
    eval_overrides: ``config.eval`` / ``config.dataset`` fields, as `evaluate_run`'s.
    log: the estimate, the points of each metric, a line as each ends (None: silent).
  """
  named = isinstance(dataset, str)
  config = config_lib.base_config()
  config.seed, config.eval.max_points = int(np.ravel(seed)[0]), max_points
  config.dataset.source, config.dataset.name = source, dataset if named else "dsprites"
  evaluate_run.override(config, eval_overrides)
  config_lib.validate(config, config_lib.base_config())
  names = evaluate_run.registered(metrics)
  if named:
    dataset = evaluator.load_eval_data(config)
  config.dataset.name = config.dataset.name if named else type(dataset).__name__
  if not encodings.is_ground_truth(dataset):
    raise ScoreError(f"dataset: {config.dataset.name} has no ground-truth factors to score "
                     "against (labels are not factors); choose a set that has them: dsprites")
  settings = evaluate_run.sized(config, evaluate_run.RunSettings(
      encode_batch_size=encode_batch_size or encodings.ENCODE_BATCH, metrics=names))
  jitted = evaluate_run.Jitted(checked(represent), None, None)
  if log is not None:
    estimate = evaluate_run.estimate_seconds(config, _FUNCTION, None, dataset, dataset,
                                             settings, jitted, 1)
    log(f"estimate: {estimate.words()}; the metrics' own time on top")
    for line in evaluate_run.planned_lines(config, _FUNCTION, dataset, dataset, settings):
      log(line)
  result = {"seed": np.ravel(seed).tolist(), "evaluated_at": datetime.datetime.now().isoformat(),
            "dataset": evaluate_run.describe_dataset(dataset, config, not named,
                                                     capped=bool(max_points)),
            "settings": dict(evaluate_run.recorded_settings(config, settings, eval_overrides),
                             metric_rng="default_rng(seed)"),
            "environment": backend.describe()}
  return dict(result, **evaluate_run.evaluate_params(
      config, _FUNCTION, None, 0, dataset=dataset, ground_truth=dataset, run_dir=None,
      settings=settings, jitted=jitted, log=log, rng=np.random.default_rng(seed)))
