"""A paper table as programs: its rows' configs at a budget fraction, grouped, with their runs.

Pure: configs are built and checked, nothing is trained or written. A row names a config module
and variant (``experiments/configs/<module>.py:<variant>``) and the published numbers it
reproduces; `plan_table` builds every row's config with ``num_seeds`` seeds, scales its schedule
by the budget fraction (the caller's ``scale``, ``common.scale_schedule`` with rounding), and
groups the rows into programs (`group_rows`): rows whose configs differ only in fields that may
vary between the runs of one program (`disentangle.train.runs.sweepable`: loss weights, learning
rates, schedule lengths), and whose values form a full grid, train as one program with those
fields as its sweep; every other row is its own program. A row whose config already sweeps (the
FFVAE figures' (alpha, gamma) grids) is one program whose table lines are its grid points.

Every run of every program is mapped back to its row, grid point and seed (`RunSpec`): the table
is read from the runs, never from guessing which config a run belongs to.
"""
from __future__ import annotations

import dataclasses
import fractions
import itertools
import json
import pathlib
from typing import Callable, Mapping, Optional, Sequence

import ml_collections

from disentangle import config as config_lib
from disentangle import data as data_lib
from disentangle import errors
from disentangle import methods
from disentangle.train import runs as runs_lib

RUNS_DIR = "runs"  # programs live in <workdir>/runs/<program name>


class BadInput(errors.UserError, ValueError):
  """A bad argument of the command: its message is one line naming the argument."""


@dataclasses.dataclass(frozen=True)
class Row:
  """One line of a paper table.

  Attributes:
    label: the method as the paper prints it, e.g. ``"CascadeVAE (beta_l = 1.0)"``.
    m: the paper's latent size column, as printed (``"5 (20)"``); empty if the table has none.
    config: the config module (``experiments/configs/<config>.py``) that reproduces the row;
      None: no config reproduces it (the table prints "no config" beside the published cell).
    variant: the ``get_config`` argument, e.g. ``"m10,best_validation"``.
    published_key: the config's ``PUBLISHED`` entry of the row (default: the first name of the
      variant that has one).
    published: the published cells of a row without a config, ``{metric: {"mean": ..}}``, or
      words for a figure (``"Fig. 6a (plotted, no table value)"``).
    model, hparam: a study's row: the model as its figures name it and ``(hyper-parameter
      name, value)``, e.g. ``("beta-VAE", ("beta", 4.0))``; a table with such rows gets
      Locatello et al. 2019's pictures beside ``table.md`` (`study_figures`).
  """
  label: str
  m: str = ""
  config: Optional[str] = None
  variant: str = ""
  published_key: Optional[str] = None
  published: object = None
  model: str = ""
  hparam: tuple = ()

  @property
  def arg(self) -> Optional[str]:
    if self.config is None:
      return None
    return f"{self.config}:{self.variant}" if self.variant else self.config


@dataclasses.dataclass(frozen=True)
class Table:
  """A paper table: its rows, the metrics of its cells and how they are read.

  Attributes:
    name: the command's ``--table`` name.
    title, paper: what the table shows and where it is printed.
    metrics: registered metric names (`disentangle.metrics.registry`) of its cells.
    rows: the rows, in the paper's order.
    protocol: words on how the cells are computed (checkpoint, data, mapping, seeds).
    seeds: the paper's number of seeds (the default of ``--seeds``).
    selected: the protocol keeps a selected checkpoint (``eval.select``): cells at the final and
      at the selected checkpoint.
    estimators: ``eval.estimators`` of its runs (`disentangle.metrics.estimators`): 'study2019'
      for a table set beside Locatello et al.'s numbers (scikit-learn's classifiers as their
      study ran them), 'current' otherwise.
    representation: ``eval.representation`` of its runs (`disentangle.metrics.postprocess`):
      'both' for Locatello et al.'s study (disentanglement_lib scores the mean and the sampled
      representation); its cells then name the one each number is (`columns`).
    eval_fields: ``((field, value), ...)`` of ``config.eval`` its runs set, e.g.
      ``(("downstream", True),)`` for a table whose metrics are switched on by a ``run_flag``.
    recorded: registered metrics its evaluation computes beside its cells' and keeps in each
      run's ``results.json`` (the study's ``unsupervised`` scores); the evaluation computes
      these and ``metrics`` only (`evaluated`).
  """
  name: str
  title: str
  paper: str
  metrics: tuple
  rows: tuple
  protocol: str
  seeds: int = 10
  selected: bool = False
  estimators: str = "current"
  representation: str = "mean"
  eval_fields: tuple = ()
  recorded: tuple = ()

  @property
  def evaluated(self) -> tuple:
    """The registered metrics its evaluation computes: its cells' and ``recorded``."""
    return tuple(self.metrics) + tuple(m for m in self.recorded if m not in self.metrics)

  @property
  def columns(self) -> tuple:
    """The cells' keys: the metrics ('mean'), each as ``metric:sampled`` ('sampled'), or the
    metrics then each as ``metric:sampled`` ('both'); see `column_of`."""
    sampled = tuple(m + SAMPLED_SUFFIX for m in self.metrics)
    return {"mean": tuple(self.metrics), "sampled": sampled,
            "both": tuple(self.metrics) + sampled}[self.representation]


SAMPLED_SUFFIX = ":sampled"  # a cell of the sampled representation: ``<metric>:sampled``


def column_of(key: str) -> tuple[str, str]:
  """(metric, representation) of a cell's key (`Table.columns`)."""
  if key.endswith(SAMPLED_SUFFIX):
    return key[:-len(SAMPLED_SUFFIX)], "sampled"
  return key, "mean"


@dataclasses.dataclass(frozen=True)
class RunSpec:
  """One run of a program: its row, its grid point (a figure's own sweep) and its seed."""
  row: int
  point: tuple  # ((field, value), ...); () for a row that is one table line
  seed: int
  run_dir: str  # relative to the workdir


@dataclasses.dataclass
class Program:
  """The rows trained as one ``trainer.train`` call, in ``<workdir>/runs/<name>``."""
  name: str
  rows: tuple
  args: tuple            # ``module:variant`` of each row
  config: ml_collections.ConfigDict
  scaled: dict           # {field: [full schedule, scaled]} (first row's; rows share schedules)
  runs: list

  @property
  def directory(self) -> str:
    return f"{RUNS_DIR}/{self.name}"

  @property
  def num_steps(self) -> int:
    return int(self.config.num_steps)

  @property
  def run_steps(self) -> int:
    return self.num_steps * len(self.runs)


def parse_fraction(text) -> fractions.Fraction:
  """``--fraction``: a number in (0, 1], as a decimal (``0.02``) or a ratio (``1/50``)."""
  try:
    f = fractions.Fraction(str(text).strip()).limit_denominator(1_000_000)
  except (ValueError, ZeroDivisionError):
    raise BadInput(f"--fraction: expected a number in (0, 1], e.g. 0.02 or 1/50, got {text!r}") \
        from None
  if not 0 < f <= 1:
    raise BadInput(f"--fraction: must be in (0, 1] (a share of the paper's schedule), got {text}")
  return f


def parse_seeds(text) -> int:
  """``--seeds``: a whole number of seeds, at least 1."""
  try:
    n = int(str(text).strip())
  except ValueError:
    raise BadInput(f"--seeds: expected a whole number of seeds (at least 1), got {text!r}") \
        from None
  if n < 1:
    raise BadInput(f"--seeds: must be at least 1, got {n}")
  return n


def table_named(tables: Mapping[str, Table], name,
                families: Optional[Mapping[str, str]] = None) -> Table:
  """The table called ``name``; BadInput listing the known names otherwise, or, for a name of a
  family (``families``: ``{prefix: what its suffix names}``, e.g. ``{"locatello2019_": "data
  sets"}``), the family's known suffixes."""
  if name in tables:
    return tables[name]
  for prefix, what in (families or {}).items():
    if str(name).startswith(prefix):
      known = [t[len(prefix):] for t in tables if t.startswith(prefix)]
      raise BadInput(f"--table: unknown {what[:-1] if what.endswith('s') else what} "
                     f"{str(name)[len(prefix):]!r} of {prefix}<{what.replace(' ', '_')[:-1]}>; "
                     f"known {what}: {', '.join(known)}")
  raise BadInput(f"--table: unknown table {name!r}; known tables: {', '.join(tables)}")


def published_of(row: Row, modules: Mapping) -> object:
  """The row's published cells: its config's ``PUBLISHED`` entry, or the row's own."""
  if row.config is None or row.published is not None:
    return row.published
  table = getattr(modules[row.config], "PUBLISHED", {})
  key = row.published_key or next((n for n in row.variant.split(",") if n in table), None)
  return table.get(key) if key else None


def _text(value) -> str:
  """A swept value as ``config.sweep`` spells it (``repr`` keeps floats exact)."""
  return repr(value) if isinstance(value, float) else str(value)


def _plain(value):
  return list(value) if isinstance(value, tuple) else value


def _flat(config, fields=None) -> dict:
  """{dotted field: value} of ``config`` (tuples as lists), of every field or of ``fields``."""
  if fields is not None:
    return {k: _plain(config_lib.get_field(config, k)) for k in fields}
  return {k: _plain(v) for k, v in config_lib.fields_of(config).items()}


def changed_fields(config) -> dict:
  """{dotted field: value} of ``config`` that differ from its method's defaults
  (``methods.schema``): what the config's variant sets, e.g. the study's networks. The swept
  fields, the seeds and the fields the schema lacks are left out."""
  base = _flat(methods.schema_fields(config.method))
  swept = {f for f, _ in runs_lib.parse_sweep(config.sweep)}
  flat = _flat(config)
  return {k: v for k, v in flat.items()
          if k in base and k not in swept | {"sweep", "seed", "num_seeds"} and base[k] != v}


def _sweepable_fields(config) -> set:
  return {k for k in methods.schema_fields(config.method) if runs_lib.sweepable(config, k)}


def group_rows(configs: Mapping[int, ml_collections.ConfigDict]) -> list[tuple[tuple, dict]]:
  """Rows trained together: ``[(row indices, {swept field: values in order}), ...]``.

  Rows whose configs agree on every field that cannot vary within a program (shapes, the
  method, data, the schedule's switch steps, bookkeeping) form a bucket; a bucket whose varying
  fields take values that form a full grid, one row per grid point, is one program sweeping
  those fields. Any other row, and every row whose config sweeps already, is a program alone.
  Groups come in the order of their first row.
  """
  sweepable, buckets, flat = {}, {}, {}
  for i, c in configs.items():
    if c.sweep:
      buckets[("alone", i)] = [i]
      continue
    if c.method not in sweepable:
      sweepable[c.method] = _sweepable_fields(c)
    flat[i] = _flat(c)
    fixed = {k: v for k, v in flat[i].items() if k not in sweepable[c.method]}
    buckets.setdefault(json.dumps(fixed, sort_keys=True, default=str), []).append(i)
  groups = []
  for members in buckets.values():
    flats = [flat[i] if i in flat else _flat(configs[i]) for i in members]
    varying = [k for k in sorted(flats[0]) if len({json.dumps(f[k]) for f in flats}) > 1]
    values = {k: list(dict.fromkeys(f[k] for f in flats)) for k in varying}
    points = [tuple(f[k] for k in varying) for f in flats]
    grid = list(itertools.product(*values.values()))
    if len(members) > 1 and varying and len(set(points)) == len(points) == len(grid):
      groups.append((tuple(members), values))
    else:
      groups.extend(((i,), {}) for i in members)
  return sorted(groups, key=lambda g: g[0][0])


def sweep_spec(values: Mapping[str, Sequence]) -> str:
  """``config.sweep`` of ``{field: values}``: ``'a.b=1.0|2.0;c=3'``."""
  return runs_lib.FIELD_SEP.join(
      f"{k}=" + runs_lib.VALUE_SEP.join(_text(v) for v in vs) for k, vs in values.items())


def program_name(rows: Sequence[Row]) -> str:
  """``<module>_<variant>[+<variant>...]`` with characters safe in a folder name."""
  tag = "+".join(r.variant for r in rows if r.variant)
  text = f"{rows[0].config}_{tag}" if tag else rows[0].config
  return "".join(ch if ch.isalnum() or ch in "-_=.+" else "_" for ch in text)


MIN_EVAL_POINTS = 100  # the fewest points a shrunk evaluation gives a metric (a vote batch)
# ``config.eval`` switches of the scores that cost more than the rest of the suite together
# (cross-validated classifiers per factor and training size): off in a shrunk evaluation.
COSTLY_RUN_FLAGS = ("downstream", "fairness_dlib", "unified_scores")


# ``--dataset_source`` of experiments.reproduce and experiments.slot: '' keeps each config's
# ``dataset.source``; 'render' trains the runs on dSprites and the sets drawn from it
# (``data.DSPRITES_BASED``) on the procedural renderer on purpose (`with_dataset_source`).
DATASET_SOURCES = ("", "render")


def parse_dataset_source(text) -> str:
  """``--dataset_source``: '' (None) or 'render'."""
  source = "" if text is None else str(text).strip()
  if source not in DATASET_SOURCES:
    raise BadInput(f"--dataset_source: expected 'render' (the dSprites runs on the procedural "
                   f"renderer, scores not comparable with published numbers) or nothing, got "
                   f"{text!r}")
  return source


def with_dataset_source(c, source: str) -> None:
  """``source`` ('render', `DATASET_SOURCES`) as ``c.dataset.source`` where ``c`` trains on a
  dSprites-based set; '' or another set: ``c`` unchanged."""
  if source and c.dataset.name in data_lib.DSPRITES_BASED:
    c.dataset.source = source


def parse_eval_points(text) -> int:
  """``--eval_points``: 0 (each metric's own number of points) or a whole number >= 100."""
  try:
    n = int(str(text).strip())
  except ValueError:
    raise BadInput(f"--eval_points: expected a whole number of points (0: each metric's own), "
                   f"got {text!r}") from None
  if n != 0 and n < MIN_EVAL_POINTS:
    raise BadInput(f"--eval_points: must be 0 (each metric's own) or at least {MIN_EVAL_POINTS}, "
                   f"got {n}")
  return n


def shrink_evaluation(c, eval_points: int) -> None:
  """``eval_points`` > 0: every metric of ``c``'s runs on at most that many points: the suite
  (``eval.suite_points``: N train / N / 2 test points, the downstream sizes up to N) and the eval
  steps' points (``eval.num_points``, the score's votes of 100); the costly scores
  (`COSTLY_RUN_FLAGS`: the downstream tasks, ...) are switched off. 0 leaves every metric's own
  numbers."""
  if eval_points:
    c.eval.suite_points = int(eval_points)
    c.eval.num_points = min(int(c.eval.num_points) or int(eval_points), int(eval_points))
    c.eval.factor_score_votes = max(1, int(eval_points) // MIN_EVAL_POINTS)
    for flag in COSTLY_RUN_FLAGS:
      if flag in c.eval:
        c.eval[flag] = False


def evaluate_kwargs(eval_points: int, metrics: Sequence[str] = ()) -> dict:
  """`evaluate_run`'s arguments for a table's evaluation: only ``metrics`` (the table's cells;
  the runs' other metrics are ``experiments.evaluate``'s), and for ``eval_points`` > 0 the run
  stage's own numbers of points (MIG's points, the disentanglement score's votes of 100 examples
  and its variance points; the data set is not encoded whole, each metric encodes the points it
  samples)."""
  out = {"metrics": tuple(metrics)} if metrics else {}
  if not eval_points:
    return out
  return {**out, "mig_points": int(eval_points), "variance_points": int(eval_points),
          "factor_score_votes": max(1, int(eval_points) // MIN_EVAL_POINTS),
          "whole_dataset_max": 0}


def row_configs(table: Table, modules: Mapping, *, seeds: int, fraction,
                scale: Callable, eval_points: int = 0,
                dataset_source: str = "") -> dict[int, tuple]:
  """{row index: (config with ``num_seeds = seeds``, scaled fields)} of the rows with a config
  (``eval_points``: `shrink_evaluation`; ``dataset_source``: `with_dataset_source`)."""
  out = {}
  for i, row in enumerate(table.rows):
    if row.config is None:
      continue
    if row.config not in modules:
      raise config_lib.ConfigError(f"table {table.name!r}: row {row.label!r} names config "
                                   f"{row.config!r}, which is not a config module")
    c = modules[row.config].get_config(row.variant or None)
    c = config_lib.copy(c)
    scaled = scale(c, fraction) if fraction != 1 else {}
    c.num_seeds = seeds
    c.eval.estimators = table.estimators
    c.eval.representation = table.representation
    for field, value in table.eval_fields:
      if field not in c.eval:
        raise config_lib.ConfigError(f"table {table.name!r}: eval.{field} is not a config field")
      c.eval[field] = value
    shrink_evaluation(c, eval_points)
    with_dataset_source(c, dataset_source)
    out[i] = (c, scaled)
  return out


def plan_table(table: Table, modules: Mapping, *, seeds: int, fraction=1,
               scale: Callable, eval_points: int = 0,
               dataset_source: str = "") -> list[Program]:
  """The programs of ``table`` with ``seeds`` seeds each at ``fraction`` of the schedule.

  Args:
    table: the table.
    modules: ``{config module name: module}`` (``get_config(variant)``, ``PUBLISHED``).
    seeds: seeds per row (``seed, ..., seed + seeds - 1`` of each row's config).
    fraction: the share of every schedule (1: the paper's).
    scale: ``(config, fraction) -> {field: [before, after]}``, shortening the config in place.
    eval_points: 0, or at most that many points per metric (`shrink_evaluation`).
    dataset_source: '' (each config's), or 'render': the dSprites runs on the procedural
      renderer (`with_dataset_source`).

  Raises:
    ConfigError: a row's config cannot be built or its runs are invalid.
  """
  built = row_configs(table, modules, seeds=seeds, fraction=fraction, scale=scale,
                      eval_points=eval_points, dataset_source=dataset_source)
  programs, names = [], set()
  for rows, values in group_rows({i: c for i, (c, _) in built.items()}):
    config = config_lib.copy(built[rows[0]][0])
    if values:
      config.sweep = sweep_spec(values)
    name = program_name([table.rows[r] for r in rows])
    while name in names:
      name += "+"
    names.add(name)
    methods.validate(config)  # where a table's configs enter: once, before anything runs
    cfgs = runs_lib.run_configs(config)
    own = [f for f, _ in runs_lib.check_sweep(config)] if not values else []
    runs = []
    row_flats = {r: _flat(built[r][0], values) for r in rows} if values else {}
    for cfg, d in zip(cfgs, runs_lib.run_dirs(config, pathlib.PurePosixPath(RUNS_DIR, name),
                                               cfgs)):
      flat = _flat(cfg, [*values, *own])
      row = rows[0] if not values else next(
          r for r in rows if all(row_flats[r][k] == flat[k] for k in values))
      runs.append(RunSpec(row=row, point=tuple((f, flat[f]) for f in own), seed=int(cfg.seed),
                          run_dir=str(d)))
    programs.append(Program(name=name, rows=rows, args=tuple(table.rows[r].arg for r in rows),
                            config=config, scaled=built[rows[0]][1], runs=runs))
  return programs


def run_steps(programs: Sequence[Program]) -> int:
  """The estimated run-steps: every program's ``num_steps`` times its runs."""
  return sum(p.run_steps for p in programs)


def _seed_words(seeds: Sequence[int]) -> str:
  seeds = sorted(set(seeds))
  if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
    return f"{seeds[0]}-{seeds[-1]}"
  return ", ".join(map(str, seeds))


def evaluation_words(eval_points: int) -> str:
  """How the runs are evaluated, in words (``table.md``, the dry run)."""
  only = "the table's metrics only (a run's others: python -m experiments.evaluate), "
  if not eval_points:
    return only + "each on its own number of points"
  kw = evaluate_kwargs(eval_points)
  return (only + f"shrunk (--eval_points={eval_points}): the suite on {eval_points} train / "
          f"{max(1, eval_points // 2)} test points (downstream sizes up to {eval_points}), MIG "
          f"on {kw['mig_points']} points, the disentanglement score on "
          f"{kw['factor_score_votes']} vote(s) and {kw['variance_points']} variance points; the "
          "data set is not encoded whole (each metric encodes the points it samples); the "
          f"costly scores off ({', '.join(f'eval.{f}' for f in COSTLY_RUN_FLAGS)}: no downstream "
          "tasks)")


def describe(table: Table, programs: Sequence[Program], *, seeds: int, fraction,
             workdir: Optional[str] = None, eval_points: int = 0) -> str:
  """The dry run: every program (config, variants, seeds, settings beside the method's defaults
  (`changed_fields`), steps, sweep values) and the total."""
  f = fractions.Fraction(fraction)
  lines = [f"{table.name}: {table.title} ({table.paper})",
           f"seeds: {seeds} per row; budget: "
           + ("the paper's whole schedule" if f == 1 else f"{f} of every schedule")
           + f"; protocol: {table.protocol}", f"evaluation: {evaluation_words(eval_points)}",
           "eval settings: " + ", ".join(
               f"eval.{k}={v!r}" for k, v in (("estimators", table.estimators),
                                               ("representation", table.representation),
                                               *table.eval_fields))]
  for i, row in enumerate(table.rows):
    if row.config is None:
      lines.append(f"  row {row.label!r}: no config (published cell only)")
  for k, p in enumerate(programs, 1):
    where = f"{workdir}/{p.directory}" if workdir else p.directory
    labels = "; ".join(table.rows[r].label + (f" (m = {table.rows[r].m})" if table.rows[r].m
                                              else "") for r in p.rows)
    points = len(p.runs) // max(1, seeds)
    lines += [f"program {k}: {', '.join(p.args)} -> {where}", f"  rows: {labels}",
              f"  runs: {len(p.runs)} = {points} point(s) x {seeds} seed(s) "
              f"({_seed_words([r.seed for r in p.runs])}); method {p.config.method}, "
              f"dataset {p.config.dataset.name}"]
    if p.config.sweep:
      for field, vals in runs_lib.parse_sweep(p.config.sweep):
        lines.append(f"  sweep {field}: {', '.join(vals)}")
    settings = changed_fields(p.config)
    if settings:
      lines.append("  settings (beside the method's defaults): "
                   + ", ".join(f"{k}={v}" for k, v in sorted(settings.items())))
    scaled = ", ".join(f"{k} {a} -> {b}" for k, (a, b) in p.scaled.items())
    lines.append(f"  steps: {p.num_steps}" + (f" (scaled: {scaled})" if scaled else "")
                 + f"; run-steps {p.run_steps:,}")
  lines.append(f"estimated run-steps: {run_steps(programs):,} in {len(programs)} program(s)")
  return "\n".join(lines)


def listing(tables: Mapping[str, Table]) -> str:
  """``--list``: every table with its rows (config and variant, or "no config")."""
  lines = []
  for t in tables.values():
    lines.append(f"{t.name}: {t.title} ({t.paper}); {t.seeds} seeds; metrics "
                 f"{', '.join(t.metrics)}")
    for row in t.rows:
      m = f", m = {row.m}" if row.m else ""
      lines.append(f"  - {row.label}{m}: {row.arg or 'no config'}")
  return "\n".join(lines)
