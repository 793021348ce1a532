"""Pictures of Locatello et al. 2019's study from its runs, as the paper draws them.

Pure functions from study records, ``(model, hyper-parameter value, seed, {metric: value})`` one
per run, to PNG files (matplotlib's Agg canvas, written atomically):

- `rank_correlation` / `correlation_png`: the Spearman rank correlation between every pair of
  metrics over all runs (the study's Fig. 2: a heat map with the coefficient in each cell); a
  pair uses the runs that have both values.
- `hparam_png`: for one model, each metric against its hyper-parameter (the study's Fig. 3
  centre and its per-data-set appendix figures): one point per seed, the median over seeds as a
  line; values sit at equally spaced positions labelled with the values (the study's grids are
  roughly geometric).
- `write_figures`: both kinds for a list of records, into a folder.

`records_of_table` reads the records from `render.tabulate`'s data and the table's rows
(``Row.model``, ``Row.hparam``).
"""
from __future__ import annotations

import math
import pathlib
import re
from typing import Mapping, Optional, Sequence

import numpy as np
import scipy.stats

from disentangle import atomic
from disentangle import paths

CORRELATION_PNG = "study_rank_correlation.png"
HPARAM_PNG = "study_{model}.png"  # model as a file name (`file_stem`)


def file_stem(model: str) -> str:
  """``'beta-VAE'`` -> ``'beta_vae'``: a model's name as a file name."""
  return re.sub(r"[^0-9a-z]+", "_", model.lower()).strip("_")


def _value(values: Mapping, metric: str) -> float:
  v = values.get(metric)
  return float(v) if v is not None and np.isfinite(v) else math.nan


def metric_matrix(records: Sequence[tuple], metrics: Sequence[str]) -> np.ndarray:
  """[runs, metrics] of the records' values (NaN where a run lacks one)."""
  return np.array([[_value(r[3], m) for m in metrics] for r in records],
                  dtype=np.float64).reshape(len(records), len(metrics))


def spearman(x, y) -> float:
  """The rank correlation of two samples (`scipy.stats.spearmanr`, ties averaged); NaN with
  fewer than 3 pairs or a constant sample."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  if len(x) < 3 or np.all(x == x[0]) or np.all(y == y[0]):
    return math.nan
  return float(scipy.stats.spearmanr(x, y).statistic)


def rank_correlation(records: Sequence[tuple], metrics: Sequence[str]) -> np.ndarray:
  """[metrics, metrics] Spearman rank correlations over the runs that have both values."""
  values = metric_matrix(records, metrics)
  k = len(metrics)
  out = np.full((k, k), math.nan)
  for i in range(k):
    for j in range(i, k):
      both = np.isfinite(values[:, i]) & np.isfinite(values[:, j])
      out[i, j] = out[j, i] = spearman(values[both, i], values[both, j])
  return out


def _figure(width: float, height: float, dpi: int):
  from matplotlib.backends.backend_agg import FigureCanvasAgg  # pylint: disable=g-import-not-at-top
  from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top
  fig = Figure(figsize=(width, height), dpi=dpi)
  FigureCanvasAgg(fig)
  return fig


def _save(fig, path) -> pathlib.Path:
  path = paths.as_path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  with atomic.replacing(path, suffix=".png") as tmp:
    fig.savefig(tmp, format="png")
  return path


def correlation_png(records: Sequence[tuple], metrics: Sequence[str], path, *,
                    titles: Optional[Mapping[str, str]] = None, title: str = "",
                    dpi: int = 100) -> pathlib.Path:
  """The rank-correlation heat map of ``metrics`` over ``records`` (in percent in each cell)."""
  corr = rank_correlation(records, metrics)
  names = [(titles or {}).get(m, m) for m in metrics]
  k = len(metrics)
  fig = _figure(1.6 + 0.75 * k, 1.2 + 0.65 * k, dpi)
  ax = fig.add_subplot(1, 1, 1)
  image = ax.imshow(np.ma.masked_invalid(corr), vmin=-1.0, vmax=1.0, cmap="RdBu_r")
  for i in range(k):
    for j in range(k):
      text = "-" if not np.isfinite(corr[i, j]) else f"{100 * corr[i, j]:.0f}"
      ax.text(j, i, text, ha="center", va="center", fontsize=8,
              color="white" if np.isfinite(corr[i, j]) and abs(corr[i, j]) > 0.6 else "black")
  ax.set_xticks(range(k), names, rotation=45, ha="right", fontsize=8)
  ax.set_yticks(range(k), names, fontsize=8)
  fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
  ax.set_title(title or f"Spearman rank correlation (%), {len(records)} runs", fontsize=9)
  fig.tight_layout()
  return _save(fig, path)


def hparam_png(records: Sequence[tuple], model: str, metrics: Sequence[str], path, *,
               hparam: str = "", titles: Optional[Mapping[str, str]] = None, title: str = "",
               dpi: int = 100) -> pathlib.Path:
  """For ``model``, one panel per metric: the value of every seed (points) and the median over
  seeds (line) at each hyper-parameter value."""
  mine = [r for r in records if r[0] == model]
  if not mine:
    raise ValueError(f"no records of model {model!r}")
  grid = sorted({float(r[1]) for r in mine})
  position = {v: i for i, v in enumerate(grid)}
  cols = min(4, len(metrics))
  rows = math.ceil(len(metrics) / cols)
  fig = _figure(3.0 * cols, 2.5 * rows + 0.4, dpi)
  for k, m in enumerate(metrics):
    ax = fig.add_subplot(rows, cols, k + 1)
    xs = np.array([position[float(r[1])] for r in mine], np.float64)
    ys = np.array([_value(r[3], m) for r in mine])
    jitter = 0.06 * (np.array([int(r[2]) for r in mine]) % 5 - 2)
    ax.scatter(xs + jitter, ys, s=10, alpha=0.6)
    medians = [np.nanmedian(ys[xs == i]) if np.isfinite(ys[xs == i]).any() else math.nan
               for i in range(len(grid))]
    ax.plot(range(len(grid)), medians, color="black", linewidth=1.2, label="median")
    ax.set_xticks(range(len(grid)), [f"{v:g}" for v in grid], fontsize=7)
    ax.set_title((titles or {}).get(m, m), fontsize=9)
    ax.set_xlabel(hparam or "hyper-parameter", fontsize=8)
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(alpha=0.3)
  fig.suptitle(title or f"{model}: each metric against {hparam or 'its hyper-parameter'} "
               f"({len(mine)} runs)", fontsize=10)
  fig.tight_layout()
  return _save(fig, path)


def write_figures(records: Sequence[tuple], folder, metrics: Sequence[str], *,
                  hparams: Optional[Mapping[str, str]] = None,
                  titles: Optional[Mapping[str, str]] = None,
                  subtitle: str = "") -> list[pathlib.Path]:
  """The correlation heat map and one hyper-parameter figure per model (in the records' order)
  in ``folder``, over the metrics that have a value in some record; the paths written. Nothing
  is written for no records."""
  values = metric_matrix(records, metrics)
  metrics = [m for k, m in enumerate(metrics) if np.isfinite(values[:, k]).any()]
  if not records or not metrics:
    return []
  folder = paths.as_path(folder)
  extra = f"\n{subtitle}" if subtitle else ""
  out = [correlation_png(records, metrics, folder / CORRELATION_PNG, titles=titles,
                         title=f"Spearman rank correlation (%), {len(records)} runs{extra}")]
  for model in dict.fromkeys(r[0] for r in records):
    hp = (hparams or {}).get(model, "")
    n = sum(r[0] == model for r in records)
    out.append(hparam_png(records, model, metrics,
                          folder / HPARAM_PNG.format(model=file_stem(model)), hparam=hp,
                          titles=titles,
                          title=f"{model}: each metric against {hp or 'its hyper-parameter'} "
                                f"({n} runs){extra}"))
  return out


def records_of_table(data: Mapping, rows: Sequence) -> list[tuple]:
  """``(model, value, seed, {metric: fraction})`` of every evaluated run of a tabulated table
  (`render.tabulate`) whose rows name a model and a hyper-parameter (``Row.model``,
  ``Row.hparam``); per-seed values come back from percent to fractions."""
  out = []
  for line in data.get("lines", ()):
    row = rows[line["row"]]
    if not getattr(row, "model", "") or not getattr(row, "hparam", ()):
      continue
    for s in line.get("per_seed", ()):
      out.append((row.model, float(row.hparam[1]), int(s["seed"]),
                  {m: v / 100.0 for m, v in s.get("final", {}).items()}))
  return out
