"""Group-fairness gaps of binary predictions, and the flexibly-fair subgroups (FFVAE).

Creager et al. (2019) audit a classifier trained on a representation for demographic parity
(the main paper's ΔDP); equalised odds (Hardt et al. 2016) is reported beside it as our
addition (the shared appendix names parity only):

- ``demographic_parity_gap(pred, a)`` = |P(ŷ=1 | a=1) − P(ŷ=1 | a=0)|;
- ``equalized_odds_gap(pred, y, a)``  = max over y ∈ {0, 1} of |P(ŷ=1 | a=1, y) − P(ŷ=1 | a=0, y)|.

``subgroups(attributes, names)`` lists the groups the "flexibly fair" audit asks about: each
sensitive attribute a_i (the group a_i = 1 against the rest) and each pairwise conjunction with
each of the four sign patterns (a_i = s_i ∧ a_j = s_j against the rest). A gap whose groups
have no member is ``None`` with the counts, never 0: an empty group says nothing about fairness.

Everything is numpy on host and every result is a dict holding the number(s) and the counts and
rates behind them.
"""
from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np


def _binary(x, what: str) -> np.ndarray:
  x = np.asarray(x)
  if x.ndim != 1:
    raise ValueError(f"{what} must be a 1-d array, got shape {x.shape}")
  if x.size and not np.isin(x, (0, 1)).all():
    raise ValueError(f"{what} must hold 0/1 values only")
  return x.astype(bool)


def _rate(pred: np.ndarray, mask: np.ndarray) -> tuple[float | None, int]:
  count = int(mask.sum())
  return (float(pred[mask].mean()) if count else None), count


def _gap(pred: np.ndarray, group: np.ndarray) -> dict:
  r1, n1 = _rate(pred, group)
  r0, n0 = _rate(pred, ~group)
  gap = None if r1 is None or r0 is None else abs(r1 - r0)
  return {"gap": gap, "p_pred1_given_a1": r1, "p_pred1_given_a0": r0,
          "count_a1": n1, "count_a0": n0}


def demographic_parity_gap(pred, a) -> dict:
  """ΔDP = |P(ŷ=1 | a=1) − P(ŷ=1 | a=0)| (FFVAE main paper), with the rates and counts.

  Args:
    pred: binary predictions ŷ [n] (0/1).
    a: binary group membership [n] (0/1).

  ``gap`` is None when either group is empty.
  """
  pred, a = _binary(pred, "pred"), _binary(a, "a")
  if len(pred) != len(a):
    raise ValueError(f"pred has {len(pred)} rows but a has {len(a)}")
  return dict(_gap(pred, a), metric="demographic_parity_gap",
              definition="|P(pred=1 | a=1) - P(pred=1 | a=0)|", num_examples=len(pred))


def equalized_odds_gap(pred, y, a) -> dict:
  """ΔEO = max over y ∈ {0, 1} of |P(ŷ=1 | a=1, y) − P(ŷ=1 | a=0, y)| (Hardt et al. 2016).

  ``per_y[y]`` holds each conditional gap with its rates and counts. ``gap`` is None when any of
  the four (a, y) cells is empty (the maximum over a partly undefined set is not reported as a
  number); the defined per-y gaps are still returned.
  """
  pred, y, a = _binary(pred, "pred"), _binary(y, "y"), _binary(a, "a")
  if not len(pred) == len(y) == len(a):
    raise ValueError(f"pred, y, a have {len(pred)}, {len(y)}, {len(a)} rows")
  per_y = {}
  for value in (0, 1):
    keep = y == bool(value)
    per_y[value] = _gap(pred[keep], a[keep])
  gaps = [per_y[v]["gap"] for v in (0, 1)]
  gap = None if any(g is None for g in gaps) else max(gaps)
  return {"gap": gap, "per_y": per_y, "metric": "equalized_odds_gap",
          "definition": "max_y |P(pred=1 | a=1, y) - P(pred=1 | a=0, y)|, y in {0, 1}",
          "num_examples": len(pred)}


def subgroups(attributes, names: Sequence[str]) -> list[dict]:
  """The audited groups: each attribute, then each pair (i < j) with its four sign patterns.

  Args:
    attributes: binary sensitive attributes [n, A] (0/1), column j named ``names[j]``.
    names: the A column names.

  Returns:
    A list of dicts, in that order, each with ``name`` (e.g. ``"shape"``,
    ``"shape=1&pos_x=0"``), ``attributes`` (names), ``values`` (the required 0/1 values),
    ``indicator`` (bool [n]: member of the group), ``count`` and ``count_rest``. An empty
    group is listed with ``count`` 0; the gaps computed on it are None.
  """
  attributes = np.asarray(attributes)
  names = tuple(names)
  if attributes.ndim != 2 or attributes.shape[1] != len(names):
    raise ValueError(f"attributes must be [n, {len(names)}] for names {list(names)}, got shape "
                     f"{attributes.shape}")
  if len(set(names)) != len(names):
    raise ValueError(f"names must be distinct, got {list(names)}")
  if attributes.size and not np.isin(attributes, (0, 1)).all():
    raise ValueError("attributes must hold 0/1 values only")
  a = attributes.astype(bool)
  out = []

  def add(cols, values):
    indicator = np.all(a[:, cols] == np.asarray(values, bool), axis=1)
    label = (names[cols[0]] if len(cols) == 1 else
             "&".join(f"{names[c]}={v}" for c, v in zip(cols, values)))
    out.append({"name": label, "attributes": tuple(names[c] for c in cols),
                "values": tuple(values), "indicator": indicator,
                "count": int(indicator.sum()), "count_rest": int((~indicator).sum())})

  for i in range(len(names)):
    add([i], (1,))
  for i, j in itertools.combinations(range(len(names)), 2):
    for values in itertools.product((1, 0), repeat=2):
      add([i, j], values)
  return out


def subgroup_gaps(pred, y, attributes, names: Sequence[str]) -> list[dict]:
  """ΔDP and ΔEO of ``pred`` (target ``y``) for every group of ``subgroups``: group vs rest.

  Each row: the group's ``name``, ``attributes``, ``values``, ``count``, ``count_rest``, and the
  full ``demographic_parity`` and ``equalized_odds`` dicts (gaps None for an empty group).
  """
  rows = []
  for group in subgroups(attributes, names):
    rows.append({k: group[k] for k in ("name", "attributes", "values", "count", "count_rest")})
    rows[-1]["demographic_parity"] = demographic_parity_gap(pred, group["indicator"])
    rows[-1]["equalized_odds"] = equalized_odds_gap(pred, y, group["indicator"])
  return rows
