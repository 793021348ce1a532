"""A reproduced table from its evaluated runs: ``table.json`` (`tabulate`) and ``table.md``
(`markdown`), both pure.

Each table line is a row of the paper (or one grid point of a figure's sweep); its cells give,
per metric, mean (std) and best over the seeds, in percent, at the final checkpoint and, where
the protocol selects one, at the selected checkpoint, beside the published cell. ``table.md``
opens with the compact form of `aggregate.markdown_table` (`compact_table`): the headline metrics
(those the published cells name; the factor score and MIG where none) as mean (std) beside the
published mean (std); every column follows it. The statistics
are `aggregate.summarize`'s: the population standard deviation (ddof 0; ddof 1 in the JSON) and
the best = max over seeds. A line is "not comparable" when its runs' data are (rendered dSprites,
a data override; ``results.json``'s ``dataset.comparable_with_published``).
"""
from __future__ import annotations

import fractions
from typing import Mapping, Optional, Sequence

from disentangle.evaluation import aggregate
from disentangle.metrics import postprocess
from disentangle.metrics import registry
from disentangle.reproduce import plan as plan_lib


def comparable_words(flags: Sequence, sources: Sequence) -> tuple[object, str]:
  """(True / False / None, words) over a line's runs' ``comparable_with_published``."""
  if not flags:
    return None, "-"
  if any(f is False for f in flags):
    if any(s == "render" for s in sources):
      return False, "not comparable (rendered images)"
    return False, "not comparable (data override)"
  if any(f is None for f in flags):
    return None, "unknown (generated stand-ins possible)"
  return True, "yes"


def _value(result: Optional[dict], column: str) -> Optional[float]:
  """The value of a cell's key (`plan.Table.columns`: a metric on the mean, or
  ``metric:sampled``) in a run's ``metrics``."""
  metric, representation = plan_lib.column_of(column)
  return postprocess.value_of((result or {}).get(metric), representation)


def column_titles(table: plan_lib.Table) -> dict:
  """{cell key: title}; under ``eval.representation`` 'sampled' / 'both' each title names its
  representation ('MIG [mean]', 'MIG [sampled]')."""
  titles = registry.titles()
  out = {}
  for key in table.columns:
    metric, representation = plan_lib.column_of(key)
    title = titles.get(metric, metric)
    out[key] = title if table.representation == "mean" else f"{title} [{representation}]"
  return out


def _line_key(spec: plan_lib.RunSpec) -> tuple:
  return (spec.row, spec.point)


def tabulate(table: plan_lib.Table, programs: Sequence[plan_lib.Program],
             records: Mapping[str, dict], published: Mapping[int, object], meta: dict) -> dict:
  """The table as JSON-serialisable data.

  Args:
    table: the table; ``programs``: its plan (`plan.plan_table`).
    records: ``{run_dir relative to the workdir: record}`` of the evaluated runs, each record as
      `aggregate.load_runs` gives it (``{"run_dir", "config", "results"}``).
    published: ``{row index: published cells}`` (`plan.published_of`).
    meta: command, seeds, fraction, device, wall time, workdir: copied to the top level.
  """
  specs = {}  # line key -> [RunSpec]
  program_of = {}
  for p in programs:
    for spec in p.runs:
      specs.setdefault(_line_key(spec), []).append(spec)
      program_of[_line_key(spec)] = p
  lines = []
  for i, row in enumerate(table.rows):
    keys = [k for k in specs if k[0] == i] or [(i, ())]
    for key in keys:
      lines.append(_line(table, row, key, specs.get(key, []), program_of.get(key), records,
                         published.get(i)))
  f = fractions.Fraction(meta.get("fraction", 1))
  return dict(meta, swept_means=swept_means(table, lines), table=table.name, title=table.title,
              paper=table.paper, protocol=table.protocol, metrics=list(table.columns),
              titles=column_titles(table), representation=table.representation,
              selected=table.selected, fraction=str(f), fraction_value=float(f),
              units="percent", std_ddof=aggregate.STD_DDOF, best="max over seeds",
              programs=[{"name": p.name, "directory": p.directory, "configs": list(p.args),
                         "sweep": p.config.sweep, "num_steps": p.num_steps,
                         "runs": len(p.runs), "scaled": p.scaled} for p in programs],
              run_steps=plan_lib.run_steps(programs), lines=lines)


def swept_means(table: plan_lib.Table, lines: Sequence[dict]) -> list[dict]:
  """Per figure row (a row with grid points), the mean and the outlier-excluded mean of each
  metric at each value of each swept field, over every seed of every grid point there (FFVAE
  Figs. 6-7's dashed line; `aggregate.swept_means`)."""
  out = []
  for i, row in enumerate(table.rows):
    points = [line for line in lines if line["row"] == i and line["point"]
              and any(c.get("final") for c in line["metrics"].values())]
    pseudo = [{"_fields": line["point"], "method": row.label, "dataset": table.name,
               "metrics": {m: c["final"] for m, c in line["metrics"].items() if c.get("final")},
               "metrics_by_estimator": {m: c["by_estimator"] for m, c in line["metrics"].items()
                                        if c.get("by_estimator")}} for line in points]
    out += [dict(entry, row=i) for entry in aggregate.swept_means(pseudo)]
  return out


def _line(table, row, key, specs, program, records, published) -> dict:
  point = dict(key[1])
  line = {"row": key[0], "label": row.label, "m": row.m, "config": row.arg, "point": point,
          "program": program.name if program else None, "published": published,
          "seeds": [], "per_seed": [], "metrics": {}}
  if row.config is None:
    line.update(status="no config", comparable=None, comparable_words="no config")
    return line
  found = [(s, records[s.run_dir]) for s in specs if s.run_dir in records]
  line["status"] = ("pending" if not found else
                    "evaluated" if len(found) == len(specs) else "partial")
  flags = [r["results"]["dataset"].get("comparable_with_published") for _, r in found]
  sources = [r["results"]["dataset"].get("source") for _, r in found]
  line["comparable"], line["comparable_words"] = comparable_words(flags, sources)
  finals, selecteds = {}, {}
  for spec, rec in sorted(found, key=lambda x: x[0].seed):
    res = rec["results"]
    sel = res.get("selected")
    seed = {"seed": spec.seed, "run_dir": spec.run_dir, "step": res["checkpoint"]["step"],
            "final_checkpoint": res["checkpoint"].get("final"), "final": {}, "selected": None}
    for m in table.columns:
      v = _value(res.get("metrics"), m)
      if v is not None:
        finals.setdefault(m, []).append(v)
        seed["final"][m] = 100.0 * v
      by = (res.get("metrics", {}).get(m) or {}).get("by_estimator")
      if by:
        seed.setdefault("by_estimator", {})[m] = {e: 100.0 * o["value"] for e, o in by.items()
                                                  if o.get("value") is not None}
    if table.selected and sel is not None:
      seed.update(selected={}, selected_step=sel.get("step"), selection=sel.get("label"))
      for m in table.columns:
        v = _value(sel.get("metrics"), m)
        if v is not None:
          selecteds.setdefault(m, []).append(v)
          seed["selected"][m] = 100.0 * v
    for m in table.columns:  # the factors a metric averaged over (MIG: eval.mig_factors)
      result = (res.get("metrics") or {}).get(m) or {}
      recorded = [o for o in [result, *(result.get("by_estimator") or {}).values()]
                  if isinstance(o, dict) and "factor_set" in o]
      if recorded:
        sets = aggregate.factor_sets_of(result)
        line.setdefault("factor_sets", {}).setdefault(m, [])
        if sets not in line["factor_sets"][m]:
          line["factor_sets"][m].append(sets)
    line["seeds"].append(spec.seed)
    line["per_seed"].append(seed)
  n = len(line["seeds"])
  for m in table.columns:
    cell = {"final": aggregate.summarize(finals[m]) if finals.get(m) else None,
            "published": (published or {}).get(m) if isinstance(published, dict) else None}
    if table.selected:  # only when every seed has it
      cell["selected"] = (aggregate.summarize(selecteds[m])
                          if len(selecteds.get(m, ())) == n and n else None)
    estimators = {}
    for s in line["per_seed"]:
      for e, v in s.get("by_estimator", {}).get(m, {}).items():
        estimators.setdefault(e, []).append(v / 100.0)
    if estimators:
      cell["by_estimator"] = {e: aggregate.summarize(v) for e, v in estimators.items()}
    line["metrics"][m] = cell
  return line


def published_text(p, metric: str) -> str:
  """The published cell: ``mean (std) / best`` ('-' where not published) or the row's words."""
  return p if isinstance(p, str) else aggregate.published_cell((p or {}).get(metric))


def shared_published_words(lines) -> str | None:
  """The words every line publishes in place of cells (a figure plotted, no table value), when
  they are the same for all: the table states them once instead of a column per metric."""
  words = {line["published"] for line in lines if isinstance(line["published"], str)}
  every = all(isinstance(line["published"], str) for line in lines)
  return words.pop() if lines and every and len(words) == 1 else None


def _label(line: dict) -> str:
  point = ", ".join(f"{k.rpartition('.')[2]} = {v:g}" for k, v in line["point"].items())
  return line["label"] + (f" ({point})" if point else "")


def _factor_set_lines(data: dict) -> list[str]:
  """The factors each metric averaged over, per estimator (once when every line agrees)."""
  out = []
  for m in data["metrics"]:
    per_line = [(line, line.get("factor_sets", {}).get(m)) for line in data["lines"]]
    per_line = [(line, sets) for line, sets in per_line if sets]
    if not per_line:
      continue
    distinct = []
    for _, sets in per_line:
      for s in sets:
        if s not in distinct:
          distinct.append(s)
    def words(s):
      return "; ".join(f"{e}: {v['factor_set']} ({', '.join(v.get('factor_names') or [])})"
                       for e, v in s.items())
    title = data["titles"].get(m, m)
    if len(distinct) == 1:
      out += ["", f"{title} factors, every line: {words(distinct[0])}."]
    else:
      out += ["", f"{title} factors:"] + [f"- {_label(line)}: " + " | ".join(map(words, sets))
                                          for line, sets in per_line]
  return out


def _ours(line: dict, cell: dict, selected: bool, fmt) -> list[str]:
  """A line's cells of one metric (final, and selected where the protocol selects): ``fmt`` of
  each summary, or the line's status words where it has no figures."""
  if line["status"] in ("no config", "pending"):
    return [line["status"]] * (2 if selected else 1)
  return [fmt(cell.get(k)) for k in (("final", "selected") if selected else ("final",))]


def compact_table(data: dict, figure: str | None) -> list[str]:
  """The compact table: method, m, seeds and the headline metrics (`aggregate.headline` of the
  metrics the published cells name) as mean (std), beside the published mean (std) unless every
  line publishes the same words (``figure``); a line whose data are not comparable marked †."""
  titles, selected = data["titles"], data["selected"]
  named = {m for line in data["lines"] if isinstance(line["published"], dict)
           for m in line["published"]}
  keys = aggregate.headline(data["metrics"], named, lambda k: plan_lib.column_of(k)[0])
  head = ["method", "m", "seeds"]
  for k in keys:
    head += [f"{titles[k]}, final", f"{titles[k]}, selected"] if selected else [titles[k]]
    head += [] if figure is not None else [f"{titles[k]}, paper"]
  out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for line in data["lines"]:
    mark = " †" if line["seeds"] and line["comparable"] is not True else ""
    cells = [_label(line) + mark, line["m"] or "-",
             str(len(line["seeds"])) if line["seeds"] else "-"]
    for k in keys:
      p = line["published"]
      cells += _ours(line, line["metrics"].get(k, {}), selected, aggregate.compact_cell)
      cells += [] if figure is not None else [
          p if isinstance(p, str) else aggregate.compact_cell((p or {}).get(k))]
    out.append("| " + " | ".join(cells) + " |")
  return out + ["", f"Percent: mean (std) over seeds (std with ddof={data['std_ddof']}); † data "
                "not comparable with the paper's (the comparable column below says why). Every "
                "column, with the best seed's:"]


def markdown(data: dict) -> str:
  """``table.md``: the heading facts, one line per row (or grid point), the per-seed values."""
  titles, selected = data["titles"], data["selected"]
  f = fractions.Fraction(data["fraction"])
  budget = "the paper's whole schedule" if f == 1 else \
      f"{data['fraction']} of every schedule (--fraction)"
  seeds = data.get("seeds")
  out = [f"# {data['paper']}: {data['title']}", "",
         f"- protocol: {data['protocol']}",
         f"- budget: {budget}; estimated run-steps {data['run_steps']:,}",
         f"- seeds: {seeds} per row" if seeds is not None else "- seeds: -"]
  if data.get("evaluation"):
    out.append(f"- evaluation: {data['evaluation']}")
  if data.get("device"):
    d = data["device"]
    kind = d.get("device_kind", d.get("kind"))  # "kind", "count": records written before
    out.append(f"- device: {d.get('backend')} ({d.get('device_count', d.get('count', '?'))} x {kind}"
               + (f", jax {d['jax']}" if d.get("jax") else "") + "); "
               f"wall time {data.get('wall_s', 0.0) / 3600:.2f} h over every invocation")
  if data.get("command"):
    out.append(f"- command: `{data['command']}`")
  figure = shared_published_words(data["lines"])
  if figure is not None:
    out.append(f"- published: {figure}")
  out += [""] + compact_table(data, figure)
  head = ["method", "m"]
  for m in data["metrics"]:
    head += ([f"{titles[m]}, final", f"{titles[m]}, selected"] if selected else [titles[m]])
    head += [] if figure is not None else [f"{titles[m]}, paper"]
  head += ["seeds", "comparable"]
  out += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for line in data["lines"]:
    cells = [_label(line), line["m"] or "-"]
    for m in data["metrics"]:
      ours = _ours(line, line["metrics"].get(m, {}), selected, aggregate.cell_text)
      cells += ours + ([] if figure is not None else [published_text(line["published"], m)])
    cells += [str(len(line["seeds"])) if line["seeds"] else "-", line["comparable_words"]]
    out.append("| " + " | ".join(cells) + " |")
  out += ["", f"Percent: mean (std) / best over seeds; std with ddof={data['std_ddof']} "
          "(population), best = max." + (" The paper's cell: mean (std) / best as published ('-': "
                                         "not published)." if figure is None else "") + (" Selected: the checkpoint kept by eval.select (validation data; "
                           "the test set never selects)." if selected else "")]
  if any("‡" in line for line in out):
    out.append(f"‡: the mean with outliers excluded ({aggregate.OUTLIER_RULE}).")
  out += _factor_set_lines(data)
  if data.get("figures"):
    out += ["", "Pictures beside this file, from the evaluated runs: "
            + ", ".join(f"`{name}`" for name in data["figures"]) + "."]
  if data.get("swept_means"):
    out += ["", "Means along each swept field over every seed of every grid point there (the "
            "figures' dashed line), percent: mean, and without outliers (Tukey's fences):"]
    for e in data["swept_means"]:
      trimmed = e.get("mean_outliers_excluded")
      out.append(f"- {e['method']}: {e['field'].rpartition('.')[2]} = {e['value']:g}, "
                 f"{titles.get(e['metric'], e['metric'])}: {e['mean']:.2f}, "
                 + (f"{trimmed:.2f}" if trimmed is not None else "-")
                 + f" (n {e['n']}; excluded {len(e.get('outliers_excluded') or [])})")
  per_seed = [(line, s) for line in data["lines"] for s in line["per_seed"]]
  if per_seed:
    out += ["", "Per seed (percent):"]
    for line, s in per_seed:
      vals = ", ".join(f"{titles[m]} {v:.2f}" for m, v in s["final"].items())
      text = f"- {_label(line)}, m = {line['m'] or '-'}, seed {s['seed']}: final (step " \
             f"{s['step']}) {vals or '-'}"
      if s.get("selected") is not None:
        sel = ", ".join(f"{titles[m]} {v:.2f}" for m, v in s["selected"].items())
        text += f" | selected (step {s['selected_step']}) {sel or '-'}"
      for m, by in s.get("by_estimator", {}).items():
        text += " | " + ", ".join(f"{titles[m]} ({e}) {v:.2f}" for e, v in by.items())
      out.append(text)
  return "\n".join(out) + "\n"
