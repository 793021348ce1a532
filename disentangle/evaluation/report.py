"""The written results of `evaluate_run`: ``results.json`` and a readable ``report.md``.

Both are written atomically (`disentangle.atomic`). The report's metric table lists the
registered metrics (`disentangle.metrics.registry`) that the results hold, each with its title
and its settings line (protocol, estimator, whether the discrete code entered). A run with a
selected checkpoint (``eval.select``, `disentangle.train.selection`) gets a second table: each
metric at the final and at the selected checkpoint, side by side, labelled with the rule, the
step and the validation value.
"""
from __future__ import annotations

import json
import pathlib

from disentangle import atomic
from disentangle import paths
from disentangle.evaluation.evaluator import to_json
from disentangle.metrics import registry


def write_json(path: pathlib.Path, value) -> None:
  atomic.write_text(path, json.dumps(value, indent=1, default=to_json, allow_nan=True))


def _seed_section(result: dict, base: pathlib.Path) -> list[str]:
  ck = result["checkpoint"]
  lines = [f"seed {result['seed']}, step {ck['step']} of {ck['num_steps']} "
           f"({'final checkpoint' if ck['final'] else 'NOT the final checkpoint'}; "
           f"{ck['selection']}; available {ck['available_steps']})", "",
           "| metric | value | settings |", "|---|---|---|"]
  for name, metric in registry.METRICS.items():
    m = result["metrics"].get(name)
    if isinstance(m, dict) and "value" in m:
      value = "-" if m["value"] is None else f"{m['value']:.4f}"
      if m.get("value_std") is not None:  # eval.repeats > 1: std across the repeats
        value += f" ({m['value_std']:.4f} over {m['repeats']} repeats)"
      lines.append(f"| {metric.title} | {value} | {metric.describe(m)} |")
  for line in result["metrics"].get("not_computed", {}).values():
    lines.append(f"| not computed | - | {line} |")
  info = result["metrics"].get("information")
  if info is not None:
    lines += ["", "| dim | KL_j | I(x; z_j) |", "|---|---|---|"]
    lines += [f"| z{j} | {k:.3f} | {i:.3f} |"
              for j, (k, i) in enumerate(zip(info["kl_per_dim"], info["mi_per_dim"]))]
    if "discrete_mi" in info:
      lines.append(f"| d | - | {info['discrete_mi']:.3f} |")
  lines.append("")
  lines += selection_lines(result)
  run_dir = paths.as_path(result["run_dir"])
  for kind, rel in result["images"].items():
    path = (run_dir / rel).relative_to(base) if run_dir.is_relative_to(base) else run_dir / rel
    lines.append(f"![{kind}]({path.as_posix()})")
  return lines + [""]


def selection_lines(result: dict) -> list[str]:
  """The final-vs-selected table of one seed ([] without a ``selected`` block)."""
  final, selected = result.get("final"), result.get("selected")
  if not final or "selected" not in result:
    return []
  if selected is None:
    return ["Selected checkpoint: none kept yet (eval.select); the final figures above are "
            "the only ones.", ""]
  lines = [f"Selected checkpoint: {selected['label']}.", "",
           f"| metric | final (step {final['step']}) | selected (step {selected['step']}) |",
           "|---|---|---|"]
  for name, metric in registry.METRICS.items():
    a, b = final["metrics"].get(name), selected.get("metrics", {}).get(name)
    if (isinstance(a, dict) and a.get("value") is not None and isinstance(b, dict)
        and b.get("value") is not None):
      lines.append(f"| {metric.title} | {a['value']:.4f} | {b['value']:.4f} |")
  return lines + [""]


def metric_values(metrics: dict) -> tuple[str, list[str]]:
  """("name value, ..." of the metrics with a per-run value, names of those without one)."""
  shown, without = [], []
  for name, m in metrics.items():
    if not isinstance(m, dict) or "value" not in m:
      continue
    if m["value"] is None:
      without.append(name)
    else:
      shown.append(f"{name} {m['value']:.4f}")
  return ", ".join(shown), without


def not_converged(metrics: dict) -> list[str]:
  """``name: k of n fits (estimator settings)`` for each metric whose classifiers stopped at
  ``max_iter`` (`disentangle.metrics.estimators`), over its protocols."""
  out = []
  for name, m in metrics.items():
    if not isinstance(m, dict):
      continue
    records = [r["estimator"] for r in [m, *m.get("by_protocol", {}).values()]
               if isinstance(r.get("estimator"), dict)]
    if "by_protocol" in m and records:
      records = records[1:]  # the headline repeats its protocol's record
    fits = sum(r.get("fits", 0) for r in records)
    missed = sum(r.get("not_converged", 0) for r in records)
    if missed:
      r = records[0]
      out.append(f"{name}: {missed} of {fits} fits ({r['estimator']}, {r.get('solver', '-')}, "
                 f"max_iter {r.get('max_iter', '-')}, {r['estimators']})")
  return out


def summary_lines(results: dict) -> list[str]:
  """What ``experiments.evaluate`` prints: a line per run (and per selected checkpoint) with
  every metric that has a per-run value; the metrics without one (UDR's sample, scored across
  seeds by ``aggregate``), those not computed and fits that did not converge, named."""
  lines = []
  for run in results.get("seeds", [results]):
    metrics = run["metrics"]
    values, without = metric_values(metrics)
    lines.append(f"{run['run_dir']}: seed {run['seed']} step {run['checkpoint']['step']} "
                 f"(final: {run['checkpoint']['final']}): {values}")
    if without:
      lines.append(f"  no per-run value: {', '.join(without)} (scored across seeds: "
                   f"python -m experiments.aggregate)")
    for line in metrics.get("not_computed", {}).values():
      lines.append(f"  not computed: {line}")
    missed = not_converged(metrics)
    if missed:
      lines.append(f"  not converged: {'; '.join(missed)}")
    selected = run.get("selected")
    if selected is not None and selected["rule"] != "final":
      chosen, _ = metric_values(selected["metrics"])
      lines.append(f"  selected, step {selected['step']}: {chosen}  [{selected['label']}]")
  return lines


def write_report(results: dict, path) -> None:
  """A readable markdown report of `evaluate_run`'s results (one seed or several)."""
  path = paths.as_path(path)
  runs = results.get("seeds", [results])
  first = runs[0]
  ds = first["dataset"]
  trained = ds.get("trained_on", ds["name"])
  env = first.get("environment") or {  # results.json written before held "jax" alone
      "jax": first["jax"]["version"], "backend": first["jax"]["backend"], "device_count": "?",
      "device_kind": "?"}
  lines = [f"# Evaluation of {results.get('workdir', first['workdir'])}", "",
           f"- method {first['method']}, m = {first['latent_dim']}, trained on {trained}, "
           f"evaluated on {ds['name']} (split {ds.get('split', '-')}; {ds['class']}, source "
           f"{ds['source']}, {ds['num_examples']} examples), comparable with published "
           f"numbers: {ds['comparable_with_published']}",
           f"- settings: `{json.dumps(first['settings'])}`",
           f"- evaluated {first['evaluated_at']} with jax {env['jax']} ({env['backend']}, "
           f"{env['device_count']} x {env['device_kind']}); timings (s): "
           + ", ".join(f"{k} {v:.1f}" for k, v in first["timings_s"].items()), ""]
  if not first["checkpoint"]["final"]:
    lines += [f"**Warning**: step {first['checkpoint']['step']} is not the final step "
              f"({first['checkpoint']['num_steps']}): the run is unfinished or was stopped.", ""]
  for result in runs:
    lines += [f"## Seed {result['seed']}", ""] + _seed_section(result, path.parent)
  atomic.write_text(path, "\n".join(lines))
