"""Evaluation of a saved run: `evaluate_run(workdir, step=None)` (``python -m experiments.evaluate``).

Restores a checkpoint read-only (`reading`, a `checkpoint.Checkpointer(read_only=True)`: never
saves, deletes or cleans, so a running run can be evaluated; the latest complete checkpoint, or
``step``; every seed of a multi-seed run) and runs every registered metric (`disentangle.metrics.registry`,
stage ``"run"``; or the ``metrics`` named, as a paper table's evaluation does) in the papers'
protocols:

- ``factor_score``: CascadeVAE supplement C (800 votes x 100 examples, global variances over the
  whole dataset, KL pruning at 0.1, the discrete code included unless ``eval.use_discrete`` says
  'exclude');
- ``mig``: MIG with ``eval.mig_estimator`` (default 'histogram': disentanglement_lib's, 10,000
  points, 20 bins) over the factors of ``eval.mig_factors`` (default 'protocol': every factor for
  the histogram estimator, Chen et al.'s, dSprites without shape, for the sampled one; each
  result names them) on the continuous means; the discrete code only with
  ``eval.use_discrete='include'`` (then not the published protocol; the result says which);
- ``shape_accuracy``: one-to-one accuracy of the discrete code against the shape factor over the
  whole dataset (dSprites, CascadeVAE Table 2);
- ``accuracy``: one-to-one accuracy of the discrete code against the labels of every example of
  the evaluation split (MNIST / Fashion-MNIST test set, CascadeVAE Tables 3-4);
- ``information``: KL_j, I(x; z_j), total correlation on ``config.eval.num_points`` points;
- PartedVAE's (every one labelled with its settings): ``factor_score_partedvae`` (the
  authors' protocol: std-normalised means of every example of the evaluation set, not the
  ``eval.num_points`` of eval steps (``num_points_setting: "all"``), groups of 100 per factor
  value, votes of dims with std < 0.1 zeroed), ``factor_score_no_discrete`` (CascadeVAE's protocol
  without the discrete code, beside ``factor_score``), ``accuracy_direct`` /
  ``shape_accuracy_direct`` (identity mapping) and ``variable_accuracy`` (each of K discrete
  codes against its target column, -1 skipped: CelebA); PartedVAE's pictures (z and u
  traversals, attribute transfer, prior components, samples) by `evaluator.save_pictures`;

and writes ``results.json`` (every number with its settings, the seed, the step, whether it is
the run's final checkpoint, and the data trained on and evaluated on; the top-level ``metrics``
are those of the evaluated checkpoint, also under ``"final"``, and ``"selected"`` holds the
checkpoint kept by ``eval.select`` (`disentangle.train.selection`: its rule, step and
validation value, then its metrics on the same evaluation data; the final one again, labelled,
under ``'final'``; null when the run has kept none yet)), ``report.md``
(`disentangle.evaluation.report`) and pictures ``images/evaluate_step_<n>_*.png``.

The evaluation data is ``dataset.eval_name`` at ``dataset.eval_split`` (`evaluator.load_eval_data`):
a run trained on one set (DSpritesUnfair) is evaluated on another (dSprites) and says so, without
being marked an override. Ground-truth data that can be enumerated (dSprites: 737,280 images) is
encoded once, streamed, and every ground-truth metric reads those encodings
(`disentangle.evaluation.encodings`): the authors' protocol, no image encoded twice. Labelled data is
encoded whole once for the accuracy; the information estimates and the pictures reuse those
encodings.

``eval.max_points`` = N > 0 (the ``smoke`` variants: `experiments.configs.common.SMOKE_MAX_POINTS`;
``experiments.evaluate --max_points``) sizes the evaluation to a short run: a ground truth larger
than N is replaced by at most N of its images (`encodings.part_of`: a complete grid by its
thinned grid, evenly spaced values of its largest factors in every combination, dSprites at
1,000: 720 images of 3x3x5x4x4; another set by a sample of its rows), encoded once, which every
ground-truth metric reads as the data set; the score's votes, MIG's, the suite's
(``eval.suite_points``) and the information estimates' points are at most N; a labelled split
larger than N is read on the eval points. The results say what was read (``encoded_part``) and
are marked not comparable with published numbers. 0 keeps the papers' protocols.

Before it starts, `evaluate_run` can say what it will cost (``log``: `estimate_seconds`, the
images it encodes at the time of one batch timed on this machine, plus the metrics' time of the
run's last evaluation with the same settings; then `planned_lines`, the points of each metric),
and as it goes a line per encoding and per metric.
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import numbers
import pathlib
import time
from typing import Callable, NamedTuple, Optional, Sequence

import jax
import ml_collections
import numpy as np

from disentangle import backend
from disentangle import config as config_lib
from disentangle import errors
from disentangle import methods
from disentangle import paths
from disentangle.evaluation import encodings
from disentangle.evaluation import evaluator as evaluator_lib
from disentangle.evaluation import report
from disentangle.metrics import registry
from disentangle.train import checkpoint
from disentangle.train import eval_duration as duration
from disentangle.train import host
from disentangle.train import preemption
from disentangle.train import seeds
from disentangle.train import selection


class NotARun(errors.UserError, FileNotFoundError):
  """The folder given is not a run directory, or the run holds no complete checkpoint yet."""


def load_config(path) -> ml_collections.ConfigDict:
  """A run's resolved config (``config.json``), with the fields added to the schema since it was
  written filled with their defaults (`config.fill_missing`); `NotARun` when the file is not
  one."""
  try:
    loaded = json.loads(paths.as_path(path).read_text())
  except json.JSONDecodeError as e:
    raise NotARun(f"{path} is not JSON ({e}): not a run's config") from e
  missing = [f for f in ("method", "num_seeds") if not isinstance(loaded, dict) or f not in loaded]
  if missing:
    raise NotARun(f"{path} has no field {missing[0]!r}: not a run's config")
  config = ml_collections.ConfigDict(loaded)
  return config_lib.fill_missing(config, methods.schema(config.method))


def trained_with(run_dir) -> dict:
  """The backend-dependent fields (`config.RESOLVED_FIELDS`) as the run trained with them
  (``config.json``; a run written before they were recorded: as `config.fill_missing` reads
  it), and under ``requested`` what was asked where the run recorded it."""
  path = paths.as_path(run_dir) / "config.json"
  config = load_config(path)
  out = {f: config_lib.get_field(config, f) for f in config_lib.RESOLVED_FIELDS
         if config_lib.has_field(config, f)}
  requested = json.loads(path.read_text()).get(config_lib.REQUESTED)
  return dict(out, **({config_lib.REQUESTED: requested} if requested else {}))


def locate_run(workdir) -> tuple[ml_collections.ConfigDict, list[pathlib.Path]]:
  """(config of the whole run, run directories) of a single- or multi-seed ``workdir``.

  A single run has ``config.json`` beside ``checkpoints/``; a multi-seed run has one
  ``seed_<s>/config.json`` per seed (``num_seeds = 1`` each) and the stacked checkpoints in
  ``workdir/checkpoints``: its config is the first seed's with ``num_seeds`` = the number of seeds.
  """
  workdir = paths.as_path(workdir)
  if (workdir / "config.json").is_file():
    config = load_config(workdir / "config.json")
    if config.num_seeds == 1 and not (workdir / "checkpoints").is_dir() and \
        (workdir.parent / "checkpoints").is_dir() and workdir.name.startswith("seed_"):
      raise NotARun(f"{workdir} is one seed of a multi-seed run: evaluate its parent "
                    f"{workdir.parent}, which holds the checkpoints")
    return config, [workdir]
  if (workdir / "runs.json").is_file():  # the runs of a sweep, in the checkpoint's order
    names = json.loads((workdir / "runs.json").read_text())["runs"]
    seeds = [workdir / name / "config.json" for name in names]
  else:
    seeds = sorted(workdir.glob("seed_*/config.json"), key=lambda p: int(p.parent.name[5:]))
  if not seeds:
    raise NotARun(f"{workdir} has no config.json (nor seed_*/config.json): not a run "
                  f"directory")
  config = load_config(seeds[0])
  config.num_seeds = len(seeds)
  return config, [p.parent for p in seeds]


class _ReadOnlyNotice(logging.Filter):
  """Drops orbax's notice, at warning level, that a manager opened read-only is read-only: the
  evaluation asks for it, once for the check before the data and once for the restore."""

  def filter(self, record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("Given directory is read only")


def reading(workdir, **kwargs) -> checkpoint.Checkpointer:
  """``checkpoint.Checkpointer(workdir, read_only=True, **kwargs)``, without orbax's notice."""
  quiet, absl_logger = _ReadOnlyNotice(), logging.getLogger("absl")  # orbax logs through absl
  absl_logger.addFilter(quiet)
  try:
    return checkpoint.Checkpointer(workdir, read_only=True, **kwargs)
  finally:
    absl_logger.removeFilter(quiet)


def open_checkpoints(workdir, step: Optional[int] = None):
  """(read-only `Checkpointer`, its complete steps, the step asked for or the newest): `NotARun`
  without a complete checkpoint, `CheckpointError` for a step it does not hold."""
  try:
    ckpt = reading(workdir)
  except FileNotFoundError as e:
    raise NotARun(str(e)) from e
  available = ckpt.all_steps()
  chosen = available[-1] if available and step is None else step
  if not available or chosen not in available:
    ckpt.close()
    if not available:
      raise NotARun(f"{ckpt.directory} holds no complete checkpoint yet")
    raise checkpoint.CheckpointError(f"no checkpoint at step {chosen} in {ckpt.directory}; "
                                     f"available steps: {available}")
  return ckpt, available, int(chosen)


def restore_params(workdir, config, method, step: Optional[int] = None) -> tuple[list, dict]:
  """Parameters of every seed at ``step`` (default: latest) and the checkpoint facts."""
  ckpt, available, chosen = open_checkpoints(workdir, step)
  try:
    n = config.num_seeds
    sharding = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    abstract = jax.tree_util.tree_map(
        lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding),
        jax.eval_shape(methods.init_fn(method, n), methods.seed_keys(config.seed, n)))
    # Without a step: the newest checkpoint that restores completely (newer ones are named in
    # a warning and left in place).
    state = ckpt.restore(abstract, step=None if step is None else chosen)
    chosen = ckpt.restored_step
  finally:
    ckpt.close()
  params = [seeds.take(state.params, i) if n > 1 else state.params for i in range(n)]
  facts = {"step": chosen, "num_steps": int(config.num_steps),
           "final": chosen == int(config.num_steps), "latest_step": available[-1],
           "available_steps": available, "selection": "latest" if step is None else "requested",
           "directory": str(ckpt.directory)}
  return params, facts


def restore_selected(run_dir, config, method, step: int):
  """Parameters of the kept (selected) checkpoint of one run directory (one seed), read-only."""
  ckpt = reading(run_dir, subdir=selection.SUBDIR, with_record=True)
  try:
    sharding = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    abstract = jax.tree_util.tree_map(
        lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding),
        jax.eval_shape(methods.init_fn(method, 1), methods.seed_keys(config.seed, 1)))
    return ckpt.restore(abstract, step=step).params, str(ckpt.directory)
  finally:
    ckpt.close()


def read_selection_record(run_dir) -> Optional[dict]:
  """The record of ``run_dir``'s kept checkpoint (read-only), or None when it has none."""
  try:
    ckpt = reading(run_dir, subdir=selection.SUBDIR, with_record=True)
  except FileNotFoundError:
    return None
  try:
    return ckpt.record()
  finally:
    ckpt.close()


def selection_blocks(config, result: dict, evaluate_selected: Callable) -> tuple[dict, dict]:
  """(``final``, ``selected``) blocks of one seed's results (see the module doc).

  ``evaluate_selected(step)`` evaluates the kept checkpoint at ``step`` (called only when it is
  not the evaluated one) and returns `evaluate_params`' dict and the kept slot's directory.
  """
  facts = result["checkpoint"]
  final = {"label": "final checkpoint" if facts["final"] else
           f"latest checkpoint, step {facts['step']} of {facts['num_steps']} (NOT final)",
           "step": facts["step"], "checkpoint": facts, "metrics": result["metrics"]}
  chosen = selection.rule(config)
  if chosen == "final":
    return final, {"rule": "final", "label": selection.label(None), "step": facts["step"],
                   "same_checkpoint_as_final": True, "metrics": result["metrics"]}
  record = read_selection_record(result["run_dir"])
  if record is None:
    return final, None
  selected = {"rule": record["rule"], "metric": record["metric"], "label": record["label"],
              "step": record["step"], "selection_value": record["value"],
              "validation_value": record["value"] if record["rule"] == "best_validation"
                                  else None,
              "selected_on": {"dataset": record["evaluated_on"], "split": record["split"],
                              "num_points": record["num_points"]},
              "record": record, "same_checkpoint_as_final": record["step"] == facts["step"]}
  if selected["same_checkpoint_as_final"]:
    selected["metrics"] = result["metrics"]
  else:
    out, directory = evaluate_selected(record["step"])
    selected.update(out, checkpoint={"step": record["step"], "directory": directory})
  return final, selected


def describe_dataset(dataset, config, overridden: bool, capped: bool = False) -> dict:
  """What the numbers were computed on (trained-on and evaluated-on names), and whether they can
  sit beside published ones (not when ``capped``: ``eval.max_points`` set)."""
  source = getattr(dataset, "source", None)
  comparable = not overridden and not capped and source != "render"
  if comparable and config.dataset.synthetic_if_missing:
    comparable = None  # the loader may have used generated stand-ins (see its log)
  names = evaluator_lib.eval_data_names(config)
  return {"name": names["evaluated_on"], "trained_on": names["trained_on"],
          "evaluated_on": names["evaluated_on"], "split": names["split"],
          "class": type(dataset).__name__, "repr": repr(dataset)[:200], "source": source,
          "num_examples": int(dataset.num_examples), "override": overridden,
          "comparable_with_published": comparable}


@dataclasses.dataclass(frozen=True)
class RunSettings:
  """Settings of `evaluate_run`'s metrics (defaults: the papers' protocols)."""
  num_votes: int = registry.PAPER_NUM_VOTES      # M of the disentanglement score
  vote_batch: int = registry.PAPER_VOTE_BATCH    # L, examples per vote
  mig_points: int = registry.MIG_NUM_POINTS      # points of the MIG estimate
  encode_batch_size: int = encodings.ENCODE_BATCH  # images per encoder call
  # the largest ground truth encoded whole once (its metrics then look points up); a larger one,
  # or 0, has every metric encode the points it samples
  whole_dataset_max: int = encodings.WHOLE_DATASET_MAX
  variance_points: Optional[int] = None  # the score's global variances: None = its protocol's
  metrics: Optional[tuple] = None  # the registered metrics computed: None = every one
  # ``eval.max_points``: 0, the papers' protocols; N, at most N images encoded per set (of a
  # larger ground truth, `encodings.part_of`) and at most N points per metric
  max_points: int = 0

  def capped(self) -> "RunSettings":
    """These settings within ``max_points``: the votes, MIG's and the shape accuracy's points."""
    n = self.max_points
    if not n:
      return self
    return dataclasses.replace(self, num_votes=min(self.num_votes, max(1, n // self.vote_batch)),
                               mig_points=min(self.mig_points, n))

  def sampling(self) -> "RunSettings":
    """The settings of metrics that sample a ground truth not encoded: the global variances
    within ``max_points`` too."""
    n = self.max_points
    return dataclasses.replace(self, variance_points=min(self.variance_points or n, n)) if n \
        else self

  def overrides(self) -> dict:
    """Per-metric settings on top of `registry.settings_of` (``config.eval``)."""
    score = {"num_votes": self.num_votes, "batch_size": self.vote_batch}
    out = {"factor_score": score, "factor_score_no_discrete": score,
           "mig": {"num_points": self.mig_points},
           "shape_accuracy": {"num_points": self.mig_points},
           "shape_accuracy_direct": {"num_points": self.mig_points}}
    if self.variance_points is not None:  # a sample instead of the whole data set
      score["num_variance_points"] = int(self.variance_points)
      out["factor_score_partedvae"] = {"num_points": int(self.variance_points)}
    return out


def registered(names: Optional[Sequence[str]]) -> Optional[tuple]:
  """``names`` as a tuple (None: every metric); `ConfigError` naming any not registered."""
  if names is None:
    return None
  unknown = sorted(set(names) - set(registry.METRICS))
  if unknown:
    raise config_lib.ConfigError(f"metrics: {', '.join(map(repr, unknown))} not registered; "
                                 f"known: {', '.join(registry.METRICS)}")
  return tuple(names)


def override(config, overrides: Optional[dict]) -> None:
  """Sets ``config``'s ``eval.*`` / ``dataset.*`` fields named in ``overrides``."""
  for field, value in (overrides or {}).items():
    section, _, key = field.partition(".")
    if section not in ("eval", "dataset") or not key:
      raise config_lib.ConfigError(
          f"eval_overrides: {field!r} is not an eval.* or dataset.* field")
    config[section][key] = value


def sized(config, settings: RunSettings) -> RunSettings:
  """``settings`` within ``config.eval.max_points`` (`RunSettings.capped`), and the points of
  the information estimates and of disentanglement_lib's suite in ``config`` within it too."""
  cap = int(config.eval.max_points)
  if cap:
    config.eval.num_points = min(int(config.eval.num_points) or cap, cap)
    config.eval.suite_points = min(int(config.eval.suite_points) or cap, cap)
  return dataclasses.replace(settings, max_points=cap).capped()


def recorded_settings(config, settings: RunSettings, overrides: Optional[dict]) -> dict:
  """The settings written beside the metrics in ``results.json``."""
  points = settings.variance_points
  return dict(dataclasses.asdict(settings), score_protocol="cascadevae",
              information_points=int(config.eval.num_points),
              mig_estimator=config.eval.mig_estimator, mig_factors=config.eval.mig_factors,
              partedvae_score_points="all" if points is None else int(points),
              use_discrete=config.eval.use_discrete, representation=config.eval.representation,
              eval_overrides=dict(overrides or {}))


class Jitted(NamedTuple):
  represent: Callable
  decode: Callable
  reconstruct: Callable


def images_of_run(config, method, dataset, ground_truth, settings: RunSettings) -> int:
  """The images `evaluate_params` encodes for one checkpoint of one run: the ground truth whole
  (or the points its score and MIG sample), the labelled split whole, else the eval points."""
  images, rep_eval = 0, False
  if ground_truth is not None:
    grid = encoded_grid(ground_truth, settings)
    if grid is not None:
      images += grid[0]
      rep_eval = grid[1] and ground_truth is dataset
    else:
      sampled = settings.sampling()
      images += (settings.num_votes * settings.vote_batch + settings.mig_points
                 + (sampled.variance_points or 0))
  if labelled_whole(method, dataset, settings):
    images += int(dataset.num_examples)
    rep_eval = True
  if not rep_eval:
    images += len(evaluator_lib.eval_indices(config, dataset.num_examples))
  return images


def encoded_grid(ground_truth, settings: RunSettings) -> Optional[tuple]:
  """What `evaluate_params` encodes of ``ground_truth`` once (`encodings.encode_ground_truth`):
  (images, whether row i is example i, the `encodings.Part` encoded in its place or None);
  None when its metrics sample it instead."""
  rows, are_indices = encodings.enumerate_rows(ground_truth)
  if rows is None or len(rows) > settings.whole_dataset_max:
    return None
  part = encodings.part_of(rows, ground_truth.factor_sizes, settings.max_points)
  return (len(rows), are_indices, None) if part is None else (len(part.picked), False, part)


def labelled_whole(method, dataset, settings: RunSettings) -> bool:
  """Whether the label accuracies read every example of the evaluation split, encoded once: a
  discrete code, labels or target columns, and a split within ``max_points`` (beyond it they
  read the eval points)."""
  labelled = getattr(dataset, "labels", None) is not None or \
      evaluator_lib.target_names_of(method, dataset)
  fits = not settings.max_points or int(dataset.num_examples) <= settings.max_points
  return bool(labelled and method.num_discrete and fits)


def metric_seconds(result: dict) -> float:
  """The seconds of an `evaluate_run` result (one run or ``seeds``) spent outside encoding."""
  total = 0.0
  for r in result.get("seeds", [result]):
    timings = r.get("timings_s", {})
    encoding = timings.get("encode_total_s", 0.0) + timings.get("encode_labelled_s", 0.0)
    total += max(0.0, timings.get("total_s", 0.0) - encoding)
  return total


def previous_metric_seconds(path, settings: RunSettings, num_runs: int) -> float:
  """The metrics' seconds (`metric_seconds`) of the evaluation recorded in ``path`` (a run's
  ``results.json``) per run times ``num_runs``, when it had ``settings``' points; else 0."""
  previous = paths.read_json(path)
  same = previous.get("settings", {}).get("max_points", 0) == settings.max_points and \
      previous.get("settings", {}).get("metrics") == (
          None if settings.metrics is None else list(settings.metrics))
  return metric_seconds(previous) * num_runs if same else 0.0


def planned_lines(config, method, dataset, ground_truth, settings: RunSettings) -> list[str]:
  """What an evaluation will read, in words, before it starts: the images encoded and the
  points of each metric it runs (their settings' counts)."""
  lines = []
  if ground_truth is not None:
    grid = encoded_grid(ground_truth, settings)
    sizes = "x".join(str(int(n)) for n in ground_truth.factor_sizes)
    if grid is None:
      lines.append("ground truth: sampled by each metric (not encoded whole)")
    elif grid[2] is None:
      lines.append(f"ground truth: encoded whole once, {grid[0]:,} images ({sizes})")
    elif grid[2].record["kind"] == "thinned_grid":
      lines.append(f"ground truth: a thinned grid encoded once, {grid[0]:,} images "
                   f"({'x'.join(map(str, grid[2].factor_sizes))} of {sizes}; eval.max_points = "
                   f"{settings.max_points:,})")
    else:
      lines.append(f"ground truth: {grid[0]:,} of its {grid[2].record['of_rows']:,} images "
                   f"encoded once (not a complete grid; eval.max_points = "
                   f"{settings.max_points:,})")
  if labelled_whole(method, dataset, settings):
    lines.append(f"evaluation split: every example encoded once, {dataset.num_examples:,}")
  lines.append(f"eval points: {len(evaluator_lib.eval_indices(config, dataset.num_examples)):,}"
               " (information, pictures)")
  sampled = ground_truth is not None and encoded_grid(ground_truth, settings) is None
  used = settings.sampling() if sampled else settings
  chosen = registry.settings_of(config.eval, "run", used.overrides())
  for m in registry.ordered("run"):
    if (settings.metrics is not None and m.name not in settings.metrics) or \
        not m.enabled(config.eval, "run") or (m.ground_truth and ground_truth is None):
      continue
    counts = [f"{k} {v:,}" for k, v in chosen[m.name].items()
              if (k.startswith("num_") or k == "batch_size") and isinstance(v, int)
              and not isinstance(v, bool)]
    lines.append(f"  {m.name}: {', '.join(counts) if counts else 'the encodings above'}")
  return lines


def estimate_seconds(config, method, params, dataset, ground_truth, settings: RunSettings,
                     jitted, num_runs: int, metric_s: float = 0.0) -> duration.Estimate:
  """`evaluate_run`'s duration for ``num_runs`` runs, before it starts: `images_of_run` each,
  at the time of one batch encoded with ``params`` (`duration.time_batch`), plus ``metric_s``."""
  size = min(settings.encode_batch_size, int(dataset.num_examples))
  batch_s = duration.time_batch(encodings.host_fn(jitted.represent, params),
                                dataset.get_images(np.arange(size)))
  images = num_runs * images_of_run(config, method, dataset, ground_truth, settings)
  return duration.Estimate(images, size, batch_s, metric_s)


def evaluate_params(config, method, params, step: int, *, dataset, ground_truth, run_dir,
                    settings: RunSettings, jitted: Jitted,
                    log: Optional[Callable[[str], None]] = None, rng=None) -> dict:
  """Every registered metric of one seed's ``params`` (see the module doc) and its pictures
  (none without a ``run_dir``); ``log``: a line as the encoding and each metric end; ``rng``:
  the evaluation's stream (default ``default_rng([config.seed, step])``)."""
  log = log or (lambda line: None)
  represent, batch = jitted.represent, settings.encode_batch_size
  encode = lambda rows: encodings.encode_streamed(
      lambda a, b: dataset.get_images(rows[a:b]), len(rows), lambda x: represent(params, x),
      batch)[0]
  rng = np.random.default_rng([config.seed, step]) if rng is None else rng
  timings = {}
  indices = evaluator_lib.eval_indices(config, dataset.num_examples)
  inputs = registry.Inputs("run", rng, encode_batch_size=batch,
                           code_named=evaluator_lib.code_named_by_labels(method))
  rep_eval, encoded, sampled = None, None, False
  if ground_truth is not None:
    encoded, are_indices, enc_t = encodings.encode_ground_truth(
        ground_truth, represent, params, batch_size=batch,
        whole_dataset_max=settings.whole_dataset_max, max_rows=settings.max_points)
    timings.update({f"encode_{k}": v for k, v in enc_t.items() if k.endswith("_s")})
    inputs.factor_names = tuple(getattr(ground_truth, "factor_names", ()))
    if encoded is not None:
      inputs.ground_truth, inputs.represent = encoded, encoded.represent
      inputs.factors, inputs.factor_rep = encoded.factors, encoded.rep
      inputs.factor_points = "whole_dataset" if encoded.part is None else encoded.part["kind"]
      log(f"  encoded {encoded.num_examples:,} images of the ground truth in "
          f"{enc_t['total_s']:.1f} s")
    else:
      inputs.ground_truth, sampled = ground_truth, True
      inputs.represent = encodings.host_fn(represent, params)
    if encoded is not None and are_indices and ground_truth is dataset:
      rep_eval = encoded.rep.take(indices)  # row i is example i: no second encoding
  labels = getattr(dataset, "labels", None)
  target_names = evaluator_lib.target_names_of(method, dataset)
  if labelled_whole(method, dataset, settings):
    t0 = time.perf_counter()
    rep_all = encode(np.arange(dataset.num_examples))
    inputs.labels = None if labels is None else np.asarray(labels)
    inputs.labelled_rep = rep_all
    if target_names:  # K label columns of K discrete codes (PartedVAE on CelebA)
      inputs.targets = np.asarray(dataset.targets_of(np.arange(dataset.num_examples),
                                                     target_names))
      inputs.target_names = target_names
    inputs.labelled_points = "every example of the evaluation split"
    rep_eval = rep_all.take(indices)
    timings["encode_labelled_s"] = time.perf_counter() - t0
    log(f"  encoded the {dataset.num_examples:,} examples of the evaluation split in "
        f"{timings['encode_labelled_s']:.1f} s")
  if rep_eval is None:
    rep_eval = encode(indices)
  if inputs.labelled_rep is None and (labels is not None or target_names) and \
      method.num_discrete:  # the split beyond max_points: the accuracies on the eval points
    inputs.labels = None if labels is None else np.asarray(labels)[indices]
    inputs.labelled_rep = rep_eval
    if target_names:
      inputs.targets = np.asarray(dataset.targets_of(indices, target_names))
      inputs.target_names = target_names
    inputs.labelled_points = f"the {len(indices):,} eval points (eval.max_points)"
  inputs.rep = rep_eval
  errors = {}

  def progress(name, outcome, seconds):
    if isinstance(outcome, str):
      said = "not computed"
    elif outcome is None:
      said = "does not apply"
    else:
      value = outcome.get("value")
      said = f"{value:.4f}" if isinstance(value, numbers.Real) else "done"
    log(f"  {name}: {said} ({seconds:.1f} s)")

  used = settings.sampling() if sampled else settings
  out, metric_t = registry.run(inputs, config.eval, names=settings.metrics,
                               overrides=used.overrides(), errors=errors, progress=progress)
  timings.update(metric_t)
  if errors:
    out["not_computed"] = errors  # {metric: 'metric: cause'}
  if inputs.ground_truth is not None:
    out["encodings"] = ("sampled" if encoded is None else "whole_dataset_encoded_once"
                        if encoded.part is None else f"{encoded.part['kind']}_encoded_once")
    if encoded is not None and encoded.part is not None:
      out["encoded_part"] = encoded.part  # what of the set the metrics read (eval.max_points)
  if run_dir is None:
    return {"metrics": out, "timings_s": timings}
  prefix = f"evaluate_step_{step}_"
  images = dataset.get_images(indices[:config.eval.num_images])
  history = evaluator_lib.information_history(run_dir, step)
  if "information" in out:
    history.append((step, evaluator_lib.information_row(out["information"])))
  latent_dim = rep_eval.mean.shape[1]
  pictures = evaluator_lib.save_pictures(
      method, params, images, rep_eval.take(slice(0, len(images))), run_dir / "images",
      dataset_name=evaluator_lib.eval_data_names(config)["evaluated_on"], prefix=prefix,
      decode=jitted.decode, reconstruct=jitted.reconstruct,
      order=evaluator_lib.information_order(history[-1:] if "information" in out else [],
                                            latent_dim))
  if evaluator_lib.plot_information(run_dir / "images" / f"{prefix}information.png", history,
                                    latent_dim):
    pictures["information"] = run_dir / "images" / f"{prefix}information.png"
  return {"metrics": out, "timings_s": timings,
          "images": {k: str(p.relative_to(run_dir)) for k, p in pictures.items()}}


def evaluate_run(workdir, step: Optional[int] = None, *, dataset=None, ground_truth=None,
                 factor_score_votes: int = registry.PAPER_NUM_VOTES,
                 vote_batch: int = registry.PAPER_VOTE_BATCH,
                 mig_points: int = registry.MIG_NUM_POINTS,
                 encode_batch_size: Optional[int] = None,
                 whole_dataset_max: int = encodings.WHOLE_DATASET_MAX,
                 variance_points: Optional[int] = None,
                 conv_impl: Optional[str] = None, eval_overrides: Optional[dict] = None,
                 metrics: Optional[Sequence[str]] = None, write: bool = True,
                 selected_too: bool = True,
                 deadline: Optional[float] = None, metric_s: float = 0.0,
                 log: Optional[Callable[[str], None]] = None) -> dict:
  """Evaluates the checkpoint of ``workdir`` at ``step`` (default latest), read-only.

  Args:
    workdir: a run directory (``config.json`` + ``checkpoints/``) or a multi-seed workdir.
    step: checkpoint step; None takes the latest (recorded, with whether it is the final one).
    dataset: evaluation data (default: the config's ``dataset.eval_name`` at ``eval_split``, as
      at training eval steps); recorded as an override (numbers then marked not comparable with
      published ones).
    ground_truth: ground-truth data for the disentanglement metrics (default: ``dataset`` when it
      implements the protocol, e.g. dSprites).
    factor_score_votes: M of the disentanglement score (paper: 800).
    vote_batch: L, examples per vote (paper: 100).
    mig_points: points of the MIG estimate.
    encode_batch_size: images per encoder call (None: `encodings.ENCODE_BATCH`).
    whole_dataset_max: the largest ground truth encoded whole once; 0: every metric encodes the
      points it samples (cheaper when they are far fewer than the data set, e.g. a CPU budget).
    variance_points: points of the disentanglement score's global variances and of PartedVAE's
      score (None: the whole data set, or the score's sample of 100,000 where the data set is
      not encoded whole).
    conv_impl: override ``model.conv_impl`` ('flax' / 'fast': same parameters and outputs up to
      float rounding); recorded.
    eval_overrides: ``config.eval`` / ``config.dataset`` fields to change before evaluating,
      e.g. ``{"eval.mig_estimator": "sampled", "dataset.eval_name": "dsprites"}``; recorded.
    metrics: the registered metrics to compute (a paper table's cells, e.g.
      ``("factor_score",)``); None: every one that applies. Recorded.
    write: write ``results.json`` and ``report.md`` (per seed, plus a summary for several seeds).
    selected_too: also evaluate the checkpoint kept by ``eval.select`` (``checkpoints_best``) and
      write the labelled ``final`` / ``selected`` blocks.
    deadline: a `time.time()`: the evaluation is not started when its estimate
      (`estimate_seconds`, made once the parameters are restored) would end past it.
    metric_s: the metrics' seconds in that estimate (e.g. the previous evaluation's; 0: those
      of the run's ``results.json`` when it was evaluated with the same settings).
    log: progress lines (``experiments.evaluate``: print): first the estimate
      (`estimate_seconds`) and what each metric will read (`planned_lines`), then a line as the
      encoding and each metric end. None: silent.

  Raises:
    preemption.DeadlineReached: the evaluation would end past ``deadline``; nothing written.

  Returns:
    The results of a single run, or ``{"workdir", "checkpoint", "seeds": [per-seed results]}``.
  """
  metrics = registered(metrics)
  workdir = paths.as_path(workdir)
  config, run_dirs = locate_run(workdir)
  if conv_impl is not None:
    config.model.conv_impl = conv_impl
  override(config, eval_overrides)
  methods.validate(config)  # once, with the overrides, before data or compilation
  open_checkpoints(workdir, step)[0].close()  # a run without the checkpoint: before the data
  overridden = dataset is not None
  dataset = dataset if dataset is not None else evaluator_lib.load_eval_data(config)
  if ground_truth is None and encodings.is_ground_truth(dataset):
    ground_truth = dataset
  method = methods.build(config, dataset.image_shape)
  params, facts = restore_params(workdir, config, method, step)
  cap = int(config.eval.max_points)
  settings = sized(config, RunSettings(
      factor_score_votes, vote_batch, mig_points, encode_batch_size or encodings.ENCODE_BATCH,
      whole_dataset_max=int(whole_dataset_max), variance_points=variance_points, metrics=metrics))
  jitted = Jitted(encodings.jit_represent(method, config), host.jit(method.decode, config),
                  host.jit(method.reconstruct, config))
  if deadline is not None or log is not None:
    if not metric_s and (run_dirs[0] / "results.json").is_file():
      metric_s = previous_metric_seconds(run_dirs[0] / "results.json", settings,
                                         len(run_dirs))
    estimate = estimate_seconds(config, method, params[0], dataset, ground_truth, settings,
                                jitted, len(run_dirs), metric_s)
  if log is not None:
    unknown = "" if metric_s else ("; the metrics' own time on top, known once a first "
                                   "evaluation has run")
    log(f"estimate: {estimate.words()} for {len(run_dirs)} run(s) at step {facts['step']}"
        f"{unknown}")
    for line in planned_lines(config, method, dataset, ground_truth, settings):
      log(line)
  if deadline is not None:
    left = deadline - time.time()
    if estimate.seconds > left:
      raise preemption.DeadlineReached(
          f"its evaluation would take {estimate.words()}, {max(left, 0.0):.0f} s are left "
          "before the deadline: not started")
  recorded = dict(recorded_settings(config, settings, eval_overrides),
                  conv_impl=config.model.conv_impl, metric_rng="default_rng([seed, step])")
  runs = []
  for i, run_dir in enumerate(run_dirs):
    if config.sweep or (workdir / "runs.json").is_file():  # each run's own values
      config_i = load_config(run_dir / "config.json")
      config_i.model.conv_impl, config_i.eval, config_i.dataset = (
          config.model.conv_impl, config.eval, config.dataset)
    else:
      config_i = config_lib.copy(config)
      config_i.seed, config_i.num_seeds = config.seed + i, 1
    t0 = time.perf_counter()
    result = {"run_dir": str(run_dir), "workdir": str(workdir), "seed": int(config_i.seed),
              "seed_index": i, "num_seeds": int(config.num_seeds), "method": config.method,
              "latent_dim": int(config.model.latent_dim), "checkpoint": facts,
              "dataset": describe_dataset(dataset, config, overridden, capped=bool(cap)),
              "ground_truth": None if ground_truth is None else type(ground_truth).__name__,
              "settings": recorded, "trained_with": trained_with(run_dir),
              "evaluated_at": datetime.datetime.now().isoformat(),
              "environment": backend.describe()}
    if log is not None and len(run_dirs) > 1:
      log(f"{run_dir}:")
    result.update(evaluate_params(config_i, method, params[i], facts["step"], dataset=dataset,
                                  ground_truth=ground_truth, run_dir=run_dir,
                                  settings=settings, jitted=jitted, log=log))

    def evaluate_selected(step, config_i=config_i, run_dir=run_dir):
      kept, directory = restore_selected(run_dir, config_i, method, step)
      if log is not None:
        log(f"the checkpoint kept by eval.select, step {step}:")
      return evaluate_params(config_i, method, kept, step, dataset=dataset,
                             ground_truth=ground_truth, run_dir=run_dir, settings=settings,
                             jitted=jitted, log=log), directory

    if selected_too:
      result["final"], result["selected"] = selection_blocks(config_i, result, evaluate_selected)
    result["timings_s"]["total_s"] = time.perf_counter() - t0
    if write:
      report.write_json(run_dir / "results.json", result)
      report.write_report(result, run_dir / "report.md")
    runs.append(result)
  if len(runs) == 1:
    return runs[0]
  summary = {"workdir": str(workdir), "checkpoint": facts, "seeds": runs}
  if write:
    report.write_json(workdir / "results.json", summary)
    report.write_report(summary, workdir / "report.md")
  return summary
