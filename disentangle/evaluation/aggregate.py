"""Tables over seeds in the papers' format: mean (std) / best of each metric beside the paper's.

Input: run directories evaluated by `evaluate_run.evaluate_run` (``results.json`` beside
``config.json``; a multi-seed workdir expands to its ``seed_<s>`` runs). Each run is matched to
the experiment config it reproduces, from ``config.json`` alone (nothing extra is stored by the
trainer): every ``(experiments/configs/<module>.py, variant)`` of the same method and dataset is
built with ``get_config(variant)`` and the variant differing from the run in the fewest
significant fields wins (fields in `IGNORED_FIELDS` never count: bookkeeping, seeds, evaluation
settings, exact-equivalent implementations). The differences are recorded and printed, so a run
with e.g. fewer steps is labelled with its nearest variant and flagged, never silently equated.

Runs are pooled into one row when their significant config fields, the data actually used
(``results.json``: dataset class and source) and the evaluated step are equal. Per metric the
row gives n, mean, standard deviation and best (max) over seeds, in percent as the papers. The
papers do not say which standard deviation they report; the table uses the population form
(``ddof=0``, numpy's default, what ``np.std`` over the seeds gives); the JSON has both ddof=0 and
ddof=1. The published numbers come from the config modules' ``PUBLISHED`` dicts; an entry may
give its mean alone (``{"mean": 95.0}``: PartedVAE publishes neither best nor, for MNIST, a std).

Beside each mean, the mean with outliers excluded (FFVAE App. E, Figs. 6-7: "Black dashed line
indicates mean (with outliers excluded)"). The caption does not say which values are outliers;
`outlier_excluded_mean` takes Tukey's fences, the box-plot convention: values outside
[Q1 - 1.5 IQR, Q3 + 1.5 IQR] (quartiles by linear interpolation, numpy's default) are left out.
It is in the JSON for every row and printed for rows of at least 4 values: with 3 or fewer the
fences hold every value, so it is the plain mean. The figures' dashed line is a mean over the
runs at one x value (Fig. 6a: over gamma at each alpha); `swept_means` gives it along each
field that varies between the rows (the grid of a sweep, `disentangle.train.runs`).

MIG states its factor set: each row records, per estimator, the factors its MIG averaged over
(``eval.mig_factors``, `disentangle.metrics.mig`: 'all' or Chen et al.'s without dSprites' shape)
under ``metric_settings``, and with ``eval.mig_estimator='both'`` (FFVAE) the sampled estimate's
figures beside the headline under ``metrics_by_estimator``; the markdown prints both per row.

Runs evaluated with a selected checkpoint (``eval.select``, `disentangle.train.selection`;
``results.json``'s ``"selected"`` block) get each metric twice, labelled: at the final checkpoint
and at the selected one (mean (std) / best over seeds each), and every table lists each seed's
two figures with the selected step and its selection value. Runs evaluated before selection
existed have no selected figures ("-").

UDR (`disentangle.metrics.dlib.udr`) is scored per row from the ``udr_sample`` of its runs, with
the correlation the runs' ``eval.udr_correlation`` names ('lasso', disentanglement_lib's default,
or 'spearman'); a row whose seeds name different ones gets no UDR and a warning.

The markdown (`markdown_table`) is compact by default: experiment, method, seeds, step and the
headline metrics (those the experiment's published numbers name; the factor score and MIG where
none) as mean (std) beside the published mean (std); ``columns='all'`` gives every tabulated
metric with the best seed's figure, at the final and the selected checkpoint (`table_columns`).
The JSON (`aggregate`'s dict) holds every number either way.

The metrics and their titles are the tabulated ones of the registry
(`disentangle.metrics.registry`). The library never imports the experiments: the caller
(``experiments/aggregate.py``) passes the config modules in (`config_candidates`).
"""
from __future__ import annotations

import json
import re
from typing import Callable, Container, Iterable, Optional, Sequence

import ml_collections
import numpy as np

from disentangle import config as config_lib
from disentangle import errors
from disentangle import paths as paths_lib
from disentangle.evaluation import evaluate_run
from disentangle.metrics import registry
from disentangle.metrics.dlib import udr as udr_lib

STD_DDOF = 0
# Fields that do not change what a run computes: seeds, logging, checkpointing, evaluation, the
# data location and download policy, devices, profiling, the exact solvers (``cascade.solver``),
# and every field resolved when a run is set up (`config.RESOLVED_FIELDS`: the backend's and the
# run layout's choices, implementations with identical numbers) with what was asked of them.
IGNORED_FIELDS = ("seed", "num_seeds", "log_every", "eval_every", "checkpoint_every",
                  "keep_checkpoints", "progress_bar", "dataset.data_dir", "dataset.allow_download",
                  "dataset.synthetic_if_missing", "dataset.source", "cascade.solver", "sweep",
                  *config_lib.RESOLVED_FIELDS)
IGNORED_PREFIXES = ("eval.", "mesh.", "distributed.", "profile.", f"{config_lib.REQUESTED}.")


def significant_fields(config) -> dict:
  """Flattened config without `IGNORED_FIELDS` (tuples as lists); a saved run's config is read
  as the run it was (`config.drop_retired`)."""
  flat = dict(config_lib.flatten(config_lib.drop_retired(ml_collections.ConfigDict(config))))
  return {k: (list(v) if isinstance(v, tuple) else v) for k, v in sorted(flat.items())
          if k not in IGNORED_FIELDS and not k.startswith(IGNORED_PREFIXES)}


def config_candidates(modules: Iterable) -> list[dict]:
  """Every (module, variant) of the given config modules: config, published numbers and path.

  A module's optional ``PROTOCOL_VARIANTS`` are variants that change how a published row is
  trained and scored without leaving the paper's setting (``best_validation``: the paper's
  50,000 training images and a checkpoint kept on held-out data): each is also combined with
  every ``PUBLISHED`` row (``"m4,best_validation"``), which keeps that row's published numbers.
  Each candidate's ``headline`` names the metrics of its published numbers, or those of every
  ``PUBLISHED`` row of its module for a variant without numbers (a smoke run of a paper's
  experiment): the metric columns of the compact table (`table_columns`).

  Args:
    modules: config modules (``get_config(arg)``, ``PUBLISHED``, optional ``VARIANTS`` and
      ``PROTOCOL_VARIANTS``); the caller imports them (``experiments/aggregate.py`` imports
      ``experiments.configs.*``).
  """
  out = []
  for module in modules:
    if not hasattr(module, "get_config") or not hasattr(module, "PUBLISHED"):
      continue
    name = module.__name__.rpartition(".")[2]
    file = module.__name__.replace(".", "/") + ".py"
    # A protocol variant applied to a published row keeps that row's numbers: first, so that
    # e.g. ``best_validation`` alone (the default row with it) is named ``m10,best_validation``.
    protocols = getattr(module, "PROTOCOL_VARIANTS", ())
    variants = [(f"{row},{protocol}", module.PUBLISHED[row])
                for row in module.PUBLISHED for protocol in protocols]
    variants += [(v, module.PUBLISHED.get(v, {})) for v in getattr(module, "VARIANTS", ())]
    named = list(dict.fromkeys(m for row in module.PUBLISHED.values() for m in row))
    seen = set()
    for variant, published in variants + [(None, {})]:
      fields = significant_fields(module.get_config(variant))
      key = json.dumps(fields, sort_keys=True, default=str)
      if key in seen:  # the default equals a named variant
        continue
      seen.add(key)
      out.append({"module": name, "variant": variant or "default", "file": file,
                  "fields": fields, "published": published, "headline": list(published) or named})
  return out


def match_experiment(config, candidates: Sequence[dict]) -> Optional[dict]:
  """The nearest candidate of the same method and dataset, with the differing fields."""
  fields = significant_fields(config)
  best = None
  for cand in candidates:
    other = cand["fields"]
    if other.get("method") != fields.get("method") or \
        other.get("dataset.name") != fields.get("dataset.name"):
      continue
    diff = {k: [fields.get(k), other.get(k)] for k in sorted(set(fields) | set(other))
            if fields.get(k) != other.get(k)}
    rank = (len(diff), not cand["published"], cand["variant"] == "default")
    if best is None or rank < best[0]:
      best = (rank, dict(cand, differences=diff))
  if best is None:
    return None
  match = {k: v for k, v in best[1].items() if k != "fields"}
  match["exact"] = not match["differences"]
  return match


class NotEvaluated(errors.UserError, FileNotFoundError):
  """A run to aggregate has no ``results.json`` (``python -m experiments.evaluate`` first)."""


def load_runs(paths: Iterable) -> list[dict]:
  """Per-seed records {run_dir, config, results} of run dirs or multi-seed workdirs."""
  records = []
  for path in map(paths_lib.as_path, paths):
    res_path = path / "results.json"
    if not res_path.is_file():
      raise NotEvaluated(f"{res_path} not found: run `python -m experiments.evaluate "
                              f"--workdir={path}` first")
    results = json.loads(res_path.read_text())
    for seed_result in results.get("seeds", [results]):
      run_dir = paths_lib.as_path(seed_result["run_dir"])
      if not run_dir.is_dir():  # moved since evaluation: resolve relative to `path`
        run_dir = path if "seeds" not in results else path / run_dir.name
      config = evaluate_run.load_config(run_dir / "config.json").to_dict()
      records.append({"run_dir": str(run_dir), "config": config, "results": seed_result})
  return records


OUTLIER_FENCE = 1.5  # Tukey's fences: outside [Q1 - 1.5 IQR, Q3 + 1.5 IQR]
OUTLIER_RULE = ("Tukey's fences: values outside [Q1 - 1.5 IQR, Q3 + 1.5 IQR] (linear quartiles) "
                "left out; FFVAE Figs. 6-7 say 'mean (with outliers excluded)' without a rule")
OUTLIER_MIN_PRINTED = 4  # with 3 values or fewer the fences hold every value


def outlier_excluded_mean(values: Sequence[float], fence: float = OUTLIER_FENCE) -> dict:
  """Mean of ``values`` without the outliers of Tukey's fences (see the module doc).

  Returns {'mean', 'n_kept', 'excluded' (the values left out), 'low', 'high' (the fences)};
  for no values, mean None.
  """
  v = np.asarray(values, np.float64)
  if not len(v):
    return {"mean": None, "n_kept": 0, "excluded": [], "low": None, "high": None}
  q1, q3 = np.percentile(v, [25.0, 75.0])
  low, high = q1 - fence * (q3 - q1), q3 + fence * (q3 - q1)
  kept = (v >= low) & (v <= high)
  return {"mean": float(v[kept].mean()), "n_kept": int(kept.sum()),
          "excluded": v[~kept].tolist(), "low": float(low), "high": float(high)}


def summarize(values: Sequence[float]) -> dict:
  """n, mean, std (ddof 0 and 1), best and worst of fractions, in percent; the mean without
  outliers (`outlier_excluded_mean`)."""
  v = 100.0 * np.asarray(values, np.float64)
  trimmed = outlier_excluded_mean(v)
  return {"n": int(len(v)), "values": v.tolist(), "mean": float(v.mean()),
          "std": float(v.std(ddof=STD_DDOF)),
          "std_ddof1": float(v.std(ddof=1)) if len(v) > 1 else None,
          "best": float(v.max()), "worst": float(v.min()),
          "mean_outliers_excluded": trimmed["mean"], "outliers_excluded": trimmed["excluded"]}


def factor_sets_of(result: dict) -> dict:
  """{estimator: {'factor_set', 'factor_names'}} of one run's MIG result."""
  outs = result.get("by_estimator") or {result.get("estimator", "?"): result}
  return {e: {"factor_set": o.get("factor_set", "not recorded"),
              "factor_names": o.get("factor_names", o.get("factors_used"))}
          for e, o in outs.items()}


def aggregate(records: Sequence[dict], candidates: Sequence[dict]) -> dict:
  """Groups per-seed records into table rows; see the module doc. JSON-serialisable."""
  groups = {}
  for rec in records:
    res = rec["results"]
    match = match_experiment(rec["config"], candidates)
    data = res["dataset"]
    selected = res.get("selected")
    rule = (selected or {}).get("rule")
    key = json.dumps([significant_fields(rec["config"]), data["class"], data["source"],
                      res["checkpoint"]["step"], rule], sort_keys=True, default=str)
    group = groups.setdefault(key, {
        "experiment": match, "method": res["method"], "latent_dim": res["latent_dim"],
        "dataset": data["name"], "data_class": data["class"], "data_source": data["source"],
        "comparable_with_published": data["comparable_with_published"],
        "step": res["checkpoint"]["step"], "num_steps": res["checkpoint"]["num_steps"],
        "final": res["checkpoint"]["final"], "selection_rule": rule, "runs": [], "seeds": [],
        "per_seed": [], "_values": {}, "_selected": {}, "_repeat_std": {}, "_udr": [],
        "_udr_correlation": [],
        "_by_estimator": {}, "_settings": {}, "_fields": significant_fields(rec["config"])})
    group["runs"].append(rec["run_dir"])
    group["seeds"].append(res["seed"])
    seed_row = {"seed": res["seed"], "run_dir": rec["run_dir"],
                "final_step": res["checkpoint"]["step"], "final": {}, "selected": None}
    for name in registry.tabulated():
      if isinstance(res["metrics"].get(name), dict) and "value" in res["metrics"][name]:
        group["_values"].setdefault(name, []).append(res["metrics"][name]["value"])
        seed_row["final"][name] = res["metrics"][name]["value"]
        if res["metrics"][name].get("value_std") is not None:  # eval.repeats > 1
          group["_repeat_std"].setdefault(name, []).append(res["metrics"][name]["value_std"])
    mig = res["metrics"].get("mig")
    if isinstance(mig, dict) and "value" in mig:
      group["_settings"].setdefault("mig", []).append(factor_sets_of(mig))
      for e, o in (mig.get("by_estimator") or {}).items():
        group["_by_estimator"].setdefault("mig", {}).setdefault(e, []).append(o["value"])
    group["_udr"].append((res["seed"], res["metrics"].get("udr_sample")))
    group["_udr_correlation"].append(udr_correlation_of(rec["config"]))
    if selected is not None:
      seed_row.update(selected={}, selected_step=selected["step"],
                      selection_label=selected["label"],
                      selection_value=selected.get("selection_value"))
      for name in registry.tabulated():
        m = selected.get("metrics", {}).get(name)
        if isinstance(m, dict) and "value" in m:
          group["_selected"].setdefault(name, []).append(m["value"])
          seed_row["selected"][name] = m["value"]
    group["per_seed"].append(seed_row)
  rows = []
  for group in groups.values():
    values, selected = group.pop("_values"), group.pop("_selected")
    published = (group["experiment"] or {}).get("published", {})
    group["metrics"] = {name: dict(summarize(v), published=published.get(name))
                        for name, v in values.items()}
    for name, stds in group.pop("_repeat_std").items():  # sampling error, beside the seeds'
      if name in group["metrics"] and len(stds) == len(group["seeds"]):
        group["metrics"][name]["repeat_std"] = 100.0 * float(np.mean(stds))
    correlations = sorted(set(group.pop("_udr_correlation")))
    if len(correlations) == 1:
      group["udr"] = udr_of_row(group.pop("_udr"), correlation=correlations[0])
    else:
      group.pop("_udr")
      group["udr"] = None
      group["warning"] = f"the seeds' eval.udr_correlation differ ({correlations}): no UDR"
    group["metric_settings"] = {}
    for name, per_seed in group.pop("_settings").items():
      same = all(p == per_seed[0] for p in per_seed)
      group["metric_settings"][name] = per_seed[0] if same else per_seed
      if not same:
        group["warning"] = f"the seeds' {name} settings differ"
    group["metrics_by_estimator"] = {
        name: {e: summarize(v) for e, v in by.items() if len(v) == len(group["seeds"])}
        for name, by in group.pop("_by_estimator").items()}
    # The selected figures: only when every seed of the row has them (else not comparable).
    group["metrics_selected"] = {name: dict(summarize(v), published=published.get(name))
                                 for name, v in selected.items()
                                 if len(v) == len(group["seeds"])}
    if len(set(group["seeds"])) != len(group["seeds"]):
      group["warning"] = "the same seed appears more than once"
    rows.append(group)
  rows.sort(key=lambda g: (str((g["experiment"] or {}).get("module")),
                           str((g["experiment"] or {}).get("variant")), g["step"]))
  swept = swept_means(rows)
  for row in rows:
    del row["_fields"]
  return {"units": "percent", "std_ddof": STD_DDOF, "best": "max over seeds",
          "outlier_rule": OUTLIER_RULE, "rows": rows, "swept_means": swept}


def swept_means(rows: Sequence[dict]) -> list[dict]:
  """Mean and outlier-excluded mean of each metric at each value of each swept field.

  The rows of one method and dataset that differ only in one or two config fields (a sweep's
  grid, e.g. FFVAE's ``ffvae.alpha`` x ``ffvae.gamma``) are pooled at each value of one field,
  every seed of every row at that value: FFVAE Fig. 6a's dashed line is the mean over gamma
  at each alpha (outliers excluded, `outlier_excluded_mean`). Values in percent.
  """
  out = []
  by_experiment = {}
  for row in rows:
    fields = row.get("_fields")
    if fields is not None:
      by_experiment.setdefault((row["method"], row["dataset"]), []).append(row)
  for (method, dataset), group in by_experiment.items():
    keys = sorted(set().union(*(r["_fields"] for r in group)))
    varying = [k for k in keys if len({json.dumps(r["_fields"].get(k)) for r in group}) > 1]
    if len(group) < 2 or not 1 <= len(varying) <= 2:
      continue
    for field in varying:
      # The tabulated metrics, and each estimator's beside a headline (``mig_sampled``).
      tables = [dict(r["metrics"], **{f"{n}_{e}": v for n, by in
                                      r.get("metrics_by_estimator", {}).items()
                                      for e, v in by.items()
                                      if v["values"] != r["metrics"].get(n, {}).get("values")})
                for r in group]
      for name in sorted({n for t in tables for n in t}):
        points = {}
        for r, t in zip(group, tables):
          if name in t:
            points.setdefault(r["_fields"][field], []).extend(t[name]["values"])
        for value in sorted(points, key=lambda x: (str(type(x)), x)):
          v = points[value]
          trimmed = outlier_excluded_mean(v)
          out.append({"method": method, "dataset": dataset, "field": field, "value": value,
                      "metric": name, "n": len(v), "mean": float(np.mean(v)),
                      "mean_outliers_excluded": trimmed["mean"],
                      "outliers_excluded": trimmed["excluded"]})
  return out


def cell_text(s: Optional[dict]) -> str:
  """``mean (std) / best`` of a summary (`summarize`; std '-' for one value), the mean std
  across ``eval.repeats`` in brackets where recorded, and ``‡`` the mean with outliers excluded
  where there are enough values for the fences."""
  if not s:
    return "-"
  std = "-" if s["n"] < 2 else f"{s['std']:.2f}"
  repeats = f" [{s['repeat_std']:.2f}]" if s.get("repeat_std") is not None else ""
  trimmed = (f" ‡{s['mean_outliers_excluded']:.2f}" if s["n"] >= OUTLIER_MIN_PRINTED and
             s.get("mean_outliers_excluded") is not None else "")
  return f"{s['mean']:.2f} ({std}) / {s['best']:.2f}{repeats}{trimmed}"


def udr_correlation_of(config: dict) -> str:
  """The run's ``eval.udr_correlation``; the field's default (`config.base_config`) for a run
  saved before the field existed."""
  default = config_lib.base_config().eval.udr_correlation
  return (config.get("eval") or {}).get("udr_correlation", default)


def udr_of_row(samples: Sequence[tuple], correlation: str = "lasso") -> Optional[dict]:
  """UDR (`metrics.dlib.udr`, Duan et al. 2020) across the seeds of one row, from the ``udr_sample``
  each run wrote (the same points for every seed), with the runs' ``eval.udr_correlation``
  (``correlation``: 'lasso' or 'spearman'); None with fewer than two such runs."""
  usable = [(seed, s) for seed, s in samples if isinstance(s, dict) and s.get("means") is not None]
  keys = {(s["num_points"], s["points_seed"], s.get("factors_checksum")) for _, s in usable}
  if len(usable) < 2 or len(keys) != 1:
    return None
  out = udr_lib.udr([np.asarray(s["means"]) for _, s in usable],
                    [None if s.get("kl_per_dim") is None else np.asarray(s["kl_per_dim"])
                     for _, s in usable], correlation=correlation)
  scores = out["model_scores"]
  return {"per_seed": {str(seed): v for (seed, _), v in zip(usable, scores)},
          "mean": float(np.mean(scores)), "std": float(np.std(scores, ddof=STD_DDOF)),
          "correlation": out["correlation"], "num_points": out["num_points"],
          "kl_threshold": out["kl_threshold"], "pairwise": out["pairwise"].tolist()}


COMPACT, ALL = "compact", "all"  # the column sets of `table_columns`
HEADLINE_DEFAULT = ("factor_score", "mig")  # the compact table's metrics where none is published


class UnknownColumn(errors.UserError, ValueError):
  """A column asked of `table_columns` that the table has not."""


def headline(keys: Sequence[str], named: Container[str],
             metric_of: Callable[[str], str] = str) -> list[str]:
  """The metric columns of a compact table, in the order of ``keys`` (the full table's): those
  whose metric (``metric_of(key)``) ``named`` holds (the metrics the published numbers name);
  where none, the factor score and MIG (`HEADLINE_DEFAULT`); where neither, the first two."""
  for wanted in (named, HEADLINE_DEFAULT):
    chosen = [k for k in keys if metric_of(k) in wanted]
    if chosen:
      return chosen
  return list(keys[:2])


def compact_cell(s: Optional[dict]) -> str:
  """``mean (std)`` of a summary (`summarize`; std '-' for one value) or of a published entry
  (std '-' where not published)."""
  if not s or s.get("mean") is None:
    return "-"
  std = s.get("std") if s.get("n", 2) >= 2 else None
  return f"{s['mean']:.2f} ({'-' if std is None else f'{std:.2f}'})"


def _step_text(row: dict) -> str:
  return f"{row['step']}" + ("" if row["final"] else f" of {row['num_steps']} (not final)")


_BASE_COLUMNS = {"experiment": lambda row, label: label,
                 "method": lambda row, label: row["method"],
                 "m": lambda row, label: str(row["latent_dim"]),
                 "seeds": lambda row, label: str(len(row["seeds"])),
                 "step": lambda row, label: _step_text(row)}


def _tabulated_in(rows: Sequence[dict]) -> list[str]:
  return [n for n in registry.tabulated() if any(n in r["metrics"] for r in rows)]


def table_columns(table: dict, columns=COMPACT) -> list[tuple[str, str, Callable]]:
  """The columns of `markdown_table`: ``(key, title, cell of (row, its label))``.

  Args:
    table: `aggregate`'s.
    columns: 'compact': experiment, method, seeds, step and the experiments' headline metrics
      (`headline` of the candidates' ``headline``) as mean (std), at the final checkpoint and,
      for runs that kept a selected one (``eval.select``), at that one, each beside the
      published mean (std). 'all': also ``m`` and every tabulated metric a row has, as mean
      (std) / best. Or a sequence (or a comma-separated string) of the keys of 'all', cells as
      there: ``experiment``, ``method``, ``m``, ``seeds``, ``step`` and per metric its name (the
      final checkpoint's figures), ``<name>:selected`` (where the runs kept a selected
      checkpoint) and ``<name>:paper``; `UnknownColumn` names a key the table has not, with
      those it has.
  """
  titles, rows = registry.titles(), table["rows"]
  both = any(r.get("metrics_selected") for r in rows)  # final and selected columns
  present = _tabulated_in(rows)
  if columns == COMPACT:  # selected columns where a checkpoint was selected ('final': none)
    both = any(r.get("metrics_selected") and r.get("selection_rule") != "final" for r in rows)
    named = {n for r in rows for n in (r["experiment"] or {}).get("headline", ())}
    keys = [n for n in registry.tabulated() if n in present or n in named]
    names, cell, paper = headline(keys, named), compact_cell, compact_cell
    base = ("experiment", "method", "seeds", "step")
  else:
    names, cell, paper = present, cell_text, published_cell
    base = tuple(_BASE_COLUMNS)
  out = [(k, k, _BASE_COLUMNS[k]) for k in base]
  for n in names:
    out.append((n, f"{titles[n]} (final)" if both else titles[n],
                lambda row, _, n=n: cell(row["metrics"].get(n))))
    if both:
      out.append((f"{n}:selected", f"{titles[n]} (selected)",
                  lambda row, _, n=n: cell(row.get("metrics_selected", {}).get(n))))
    out.append((f"{n}:paper", f"{titles[n]} (paper)", lambda row, _, n=n: paper(
        ((row["experiment"] or {}).get("published") or {}).get(n))))
  if columns in (COMPACT, ALL):
    return out
  if isinstance(columns, str):
    columns = [key.strip() for key in columns.split(",") if key.strip()]
  by_key = {c[0]: c for c in out}
  unknown = [k for k in columns if k not in by_key]
  if unknown:
    raise UnknownColumn(f"--columns: {', '.join(map(repr, unknown))} not in this table; its "
                        f"columns: {', '.join(by_key)}")
  return [by_key[k] for k in columns]


def markdown_table(table: dict, columns=COMPACT) -> str:
  """The papers' format: a line per row with ours beside the published numbers (``columns``:
  `table_columns`'), then what the marks mean, each row's notes and each seed's figures."""
  cols = table_columns(table, columns)
  lines = ["| " + " | ".join(title for _, title, _ in cols) + " |", "|" + "---|" * len(cols)]
  notes = []
  for i, row in enumerate(table["rows"], 1):
    exp = row["experiment"]
    label = f"{exp['module']}:{exp['variant']}" if exp else "(no matching config)"
    marks = ""
    if exp and not exp["exact"]:
      marks += f" [{i}]"
      diff = ", ".join(f"{k} {a!r} (variant {b!r})" for k, (a, b) in exp["differences"].items())
      notes.append(f"[{i}] differs from {label}: {diff}")
    if row["comparable_with_published"] is not True:
      marks += " †"
    lines.append("| " + " | ".join(cell(row, label + marks) for _, _, cell in cols) + " |")
  if columns == COMPACT:
    footer = ["", f"Values in percent: mean (std) over seeds, std with ddof={table['std_ddof']} "
              "(population), beside the config modules' PUBLISHED mean (std). The metrics: "
              "those the experiments' published numbers name (the factor score and MIG where "
              "none); every column, with the best seed's: --columns=all."]
  else:
    footer = ["", "Values in percent: mean (std) / best over seeds; std with "
              f"ddof={table['std_ddof']} (population); best = max. Published numbers: the "
              "config modules' PUBLISHED."]
  footer.append("† data not comparable with the papers' (rendered dSprites, a stand-in or an "
                "override; see results.json 'dataset').")
  if any(key.endswith(":selected") for key, _, _ in cols):
    footer.append("(final): the final checkpoint; (selected): the checkpoint kept by "
                  "eval.select (rule per row below; test data never selects).")
  figures = lines + mig_lines(table, column=any(key == "mig" for key, _, _ in cols))
  if any(re.search(r"\) / [-\d.]+ \[", line) for line in figures):  # `cell_text`'s marks
    footer.append("[x]: the mean over seeds of the std across eval.repeats (sampling error).")
  if any("‡" in line for line in figures):
    footer.append(f"‡: the mean with outliers excluded ({OUTLIER_RULE}).")
  footer += figures[len(lines):]
  for i, row in enumerate(table["rows"], 1):
    if row.get("udr"):
      u = row["udr"]
      per = ", ".join(f"seed {k} {v:.3f}" for k, v in u["per_seed"].items())
      footer.append(f"UDR row {i} ({u['correlation']}, {u['num_points']} points): mean "
                    f"{u['mean']:.3f} ({u['std']:.3f}); {per}")
  per_seed = per_seed_lines(table, _tabulated_in(table["rows"]))
  return "\n".join(lines + footer + notes + per_seed) + "\n"


def mig_lines(table: dict, column: bool = True) -> list[str]:
  """Per row with MIG: each estimator's factor set and figures (the headline estimator's are
  the MIG column's where the table has one, ``column``); then the swept means."""
  lines = []
  for i, row in enumerate(table["rows"], 1):
    settings = row.get("metric_settings", {}).get("mig")
    if not isinstance(settings, dict):
      continue
    by = row.get("metrics_by_estimator", {}).get("mig", {})
    mig_values = row["metrics"].get("mig", {}).get("values")
    parts = []
    for e, st in settings.items():
      names = ", ".join(map(str, st["factor_names"] or []))
      same = e not in by or by[e]["values"] == mig_values
      figures = (": the MIG column" if same and column else
                 f": {cell_text(row['metrics']['mig'] if same else by[e])}")
      parts.append(f"{e} estimator over {st['factor_set']} factors ({names}){figures}")
    lines.append(f"MIG row {i}: " + "; ".join(parts))
  swept = [s for s in table.get("swept_means", ()) if s["metric"].startswith("mig")]
  if swept:
    lines.append("MIG along each swept field (every seed of every row at that value, percent): "
                 "mean / mean with outliers excluded")
    for s in swept:
      trimmed = ("-" if s["mean_outliers_excluded"] is None
                 else f"{s['mean_outliers_excluded']:.2f}")
      lines.append(f"- {s['metric']}, {s['method']} {s['field']} = {s['value']}: "
                   f"{s['mean']:.2f} / {trimmed} (n = {s['n']}, excluded "
                   f"{', '.join(f'{x:.2f}' for x in s['outliers_excluded']) or 'none'})")
  return lines


def per_seed_lines(table: dict, names: Sequence[str]) -> list[str]:
  """Each seed's final and selected figures (percent), labelled with steps and the rule."""
  titles = registry.titles()
  lines = ["", "Per seed (percent): final checkpoint | selected checkpoint"]
  for row in table["rows"]:
    exp = row["experiment"]
    label = f"{exp['module']}:{exp['variant']}" if exp else "(no matching config)"
    for s in row.get("per_seed", ()):
      final = ", ".join(f"{titles[n]} {100 * s['final'][n]:.2f}" for n in names
                        if n in s["final"])
      text = f"- {label} seed {s['seed']}: final (step {s['final_step']}) {final or '-'}"
      if s.get("selected") is not None:
        sel = ", ".join(f"{titles[n]} {100 * s['selected'][n]:.2f}" for n in names
                        if n in s["selected"])
        text += f" | selected (step {s['selected_step']}) {sel or '-'}: {s['selection_label']}"
      else:
        text += " | selected: -"
      lines.append(text)
  return lines


def published_cell(p: Optional[dict]) -> str:
  """``mean (std) / best`` of a published entry; a missing std or best prints as ``-``."""
  if not p:
    return "-"
  def fmt(key):
    return "-" if p.get(key) is None else f"{p[key]:.2f}"
  return f"{fmt('mean')} ({fmt('std')}) / {fmt('best')}"


def aggregate_runs(paths: Iterable, *, candidates: Sequence[dict] = ()) -> dict:
  """`aggregate` of the runs at ``paths`` against ``candidates`` (`config_candidates`)."""
  return aggregate(load_runs(paths), candidates)
