"""Model selection: which checkpoint is reported beside the final one.

``config.eval.select``:

- ``"final"``: no selection; the final checkpoint is the result (the default).
- ``"best_validation"``: every ``eval_every`` steps the in-training evaluator encodes the held-out
  validation split (`data.VALIDATION_SPLITS`; MNIST / Fashion-MNIST ``'valid10k'``, the last
  10,000 of the 60,000 training images) instead of the test split, and the checkpoint with the
  best ``eval.select_metric`` on it is kept in ``<run_dir>/checkpoints_best``. The run must train
  on the rest of the training file (``dataset.train_split = 'train50k'``, the paper's 50,000),
  set explicitly: a config that would train on the validation images is a `ConfigError`. The
  test split is never read during training.
- ``"best_metric"``: the checkpoint with the best ``eval.select_metric`` on the evaluated data
  itself (dSprites: the dataset, which has no held-out part), as the authors' CascadeVAE code
  keeps its best checkpoint; labelled as such, and refused where a held-out split exists (it
  would select on the test data).

The metric is a registered one (`disentangle.metrics.registry`) computed at eval steps (its
``config.eval`` flag on, e.g. ``eval.cluster_accuracy`` for ``"accuracy"``); higher is better
unless the metric says ``higher_is_better = False``; ties keep the earlier step; a NaN never
wins. The kept slot is one orbax step folder written through `checkpoint.Checkpointer` with a
JSON record (rule, metric, step, value, data, points) beside the state, atomically, so the
best-so-far value survives a kill and a resumed run compares against it. `evaluate_run` evaluates
the final and the selected checkpoint and labels both.
"""
from __future__ import annotations

import math
from typing import Callable, Optional

from disentangle import config as config_lib
from disentangle import data as data_lib
from disentangle.metrics import registry
from disentangle.train import checkpoint

SUBDIR = "checkpoints_best"
# Splits that are not training data: best_metric may not select on them.
_TRAINING_SPLITS = ("train", "all")


def rule(config) -> str:
  """``config.eval.select``."""
  return config.eval.select


def metric_name(config) -> str:
  return config.eval.select_metric


def higher_is_better(name: str) -> bool:
  return bool(getattr(registry.METRICS[name], "higher_is_better", True))


def _eval_split(config) -> tuple[str, str]:
  """(evaluated set, split) the in-training evaluator reads without selection (as
  `evaluator.eval_data_names`)."""
  d = config.dataset
  name = d.eval_name or d.name
  split = d.eval_split
  if split not in data_lib.SPLITS.get(name, (split,)):
    split = "train"
  return name, split


def training_eval_data(config) -> Optional[dict]:
  """{'trained_on', 'evaluated_on', 'split'} of the in-training evaluation under
  ``best_validation`` (the validation split), else None (the configured evaluation data)."""
  if rule(config) != "best_validation":
    return None
  name = config.dataset.name
  return {"trained_on": name, "evaluated_on": name, "split": data_lib.VALIDATION_SPLITS[name][1]}


def check(config) -> None:
  """The cross-field rules of ``eval.select`` (`ConfigError` naming the field)."""
  chosen = rule(config)
  if chosen == "final":
    return
  name = metric_name(config)
  if name not in registry.METRICS:
    raise config_lib.ConfigError(f"config field 'eval.select_metric': unknown metric {name!r}; "
                                 f"registered metrics: {list(registry.METRICS)}")
  metric = registry.METRICS[name]
  if not metric.enabled(config.eval, "training"):
    raise config_lib.ConfigError(
        f"config field 'eval.select_metric': {name!r} is not computed at eval steps; set "
        f"eval.{metric.training_flag}=True (eval.select={chosen!r} selects on it)")
  d = config.dataset
  if chosen == "best_validation":
    if d.name not in data_lib.VALIDATION_SPLITS:
      raise config_lib.ConfigError(
          f"config field 'eval.select': {d.name} has no held-out validation split (datasets "
          f"with one: {sorted(data_lib.VALIDATION_SPLITS)}); use 'best_metric' (selects on the "
          f"reported metric itself, as the authors' dSprites code) or 'final'")
    train_part, valid_part = data_lib.VALIDATION_SPLITS[d.name]
    if d.train_split != train_part:
      raise config_lib.ConfigError(
          f"config field 'dataset.train_split' must be {train_part!r} with "
          f"eval.select='best_validation' (got {d.train_split!r}): the validation split "
          f"{valid_part!r} is cut from {d.name}'s training file and may not be trained on")
    if (d.eval_name or d.name) != d.name:
      raise config_lib.ConfigError(
          f"config field 'dataset.eval_name' ({d.eval_name!r}): eval.select='best_validation' "
          f"selects on {d.name}'s own validation split; leave it '' or {d.name!r}")
    if d.source == "tfds":
      raise config_lib.ConfigError(
          f"config field 'dataset.source': the held-out split {train_part!r} / {valid_part!r} is "
          f"cut from the IDX files; use 'auto' or 'file' with eval.select='best_validation'")
  if chosen == "best_metric":
    evaluated, split = _eval_split(config)
    if evaluated in data_lib.VALIDATION_SPLITS or split not in _TRAINING_SPLITS:
      raise config_lib.ConfigError(
          f"config field 'eval.select': 'best_metric' would select on {evaluated} split "
          f"{split!r}, held-out data that is reported; use 'best_validation'"
          + (f" ({evaluated} has a validation split)" if evaluated in data_lib.VALIDATION_SPLITS
             else ""))


def label(record: Optional[dict]) -> str:
  """Words for a selection record (report, tables)."""
  if not record:
    return "final checkpoint (no selection)"
  value = f"{record['metric']} {record['value']:.4f}"
  points = "" if record.get("num_points") is None else f", {record['num_points']} points"
  where = f"{record['evaluated_on']} {record['split']}{points}"
  if record["rule"] == "best_validation":
    return (f"best validation {record['metric']} at step {record['step']} ({value} on {where}; "
            f"test data never used to select)")
  return (f"best {record['metric']} on the evaluated data itself at step {record['step']} "
          f"({value} on {where}; the authors' protocol, no held-out data)")


def is_better(value: float, best: Optional[float], higher: bool) -> bool:
  """Strictly better than ``best`` (None: anything finite is); NaN never is."""
  if math.isnan(value):
    return False
  if best is None or math.isnan(best):
    return True
  return value > best if higher else value < best


class Selector:
  """Keeps the best checkpoint of one run directory (one seed) in ``<run_dir>/checkpoints_best``.

  On construction it reads the record of a kept checkpoint (a resumed run), so the best-so-far
  value and step survive a kill. `offer` is called after each in-training evaluation.
  """

  def __init__(self, config, run_dir):
    self.rule = rule(config)
    self.metric = metric_name(config)
    self.higher = higher_is_better(self.metric)
    names = training_eval_data(config)
    if names is None:
      evaluated, split = _eval_split(config)
      names = {"evaluated_on": evaluated, "split": split}
    self.names = names
    self.ckpt = checkpoint.Checkpointer(run_dir, keep=1, subdir=SUBDIR, with_record=True,
                                        single_process=True)
    self.best = self.ckpt.record()

  def offer(self, step: int, eval_result: dict, state_fn: Callable, *,
            num_points: Optional[int] = None) -> bool:
    """Keep the state ``state_fn()`` of ``step`` if ``eval_result['eval/<metric>']`` beats the
    best so far; True when it was kept."""
    key = f"eval/{self.metric}"
    if key not in eval_result:
      raise config_lib.ConfigError(
          f"config field 'eval.select_metric': the evaluation at step {step} gave no {key!r} "
          f"(the metric does not apply to this method or data); it gave {sorted(eval_result)}")
    value = float(eval_result[key])
    if not is_better(value, None if self.best is None else self.best["value"], self.higher):
      return False
    record = {"rule": self.rule, "metric": self.metric,
              "mode": "max" if self.higher else "min", "step": int(step), "value": value,
              "evaluated_on": self.names["evaluated_on"], "split": self.names["split"],
              "num_points": num_points}
    record["label"] = label(record)
    self.ckpt.save(step, state_fn(), record)
    self.best = record
    return True

  def close(self) -> None:
    self.ckpt.close()
