"""Labelled subsets for semi-supervised training: which rows carry their labels (pure numpy).

A rule and its own seed pick ``n`` distinct rows of the training set; the subset does not depend
on the run seed, so runs of different seeds share it and differ in training only
(``LabelledSpec.seed``). The rules:

- ``"first"``: rows 0..n-1 (PartedVAE's MNIST set, the first 256 training images; authors' code).
- ``"random"``: n rows uniformly without replacement.
- ``"balanced"``: n / K rows of each of the K classes of the first target column, uniformly
  without replacement inside each class (an error when n is not a multiple of K or a class is
  too small).
- ``"dsprites_stratified"``: PartedVAE's dSprites stratification (the authors' ``good_indices``):
  144 cells = shape (3) x scale (6) x the halves of orientation (classes 0-19 / 20-39), pos_x
  (0-15 / 16-31) and pos_y (0-15 / 16-31), visited with shape fastest, then scale, then the
  orientation, x and y halves; the i-th labelled row lies in cell ``i mod 144``, so every cell
  is covered once before any repeats. Inside a cell the row is uniform (on the full grid: a
  uniform orientation, x and y class inside each half), without replacement. The authors draw
  unseeded; we seed.

Every subset is returned sorted (a set of row indices).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from disentangle import config as config_lib
from disentangle.data.labels import supervision
from disentangle.data.labels.batch_spec import BatchSpec

RULES = ("first", "random", "balanced", "dsprites_stratified")
DSPRITES_FACTORS = (("shape", 3), ("scale", 6), ("orientation", 40), ("pos_x", 32), ("pos_y", 32))
NUM_STRATIFIED_CELLS = 3 * 6 * 2 * 2 * 2  # 144


def _default_field(name: str) -> str:
  return f"labelled.{name}"


def stratified_cells(factors: np.ndarray) -> np.ndarray:
  """dSprites factor classes [n, 5] -> cell in [0, 144): shape + 3 scale + 18 o + 36 x + 72 y,
  with o, x, y the upper-half indicators of orientation (>= 20), pos_x (>= 16), pos_y (>= 16)."""
  f = np.asarray(factors, np.int64)
  return (f[:, 0] + 3 * f[:, 1] + 18 * (f[:, 2] >= 20) + 36 * (f[:, 3] >= 16) +
          72 * (f[:, 4] >= 16))


def _stratified(dataset, n: int, rng: np.random.Generator, field_of) -> np.ndarray:
  names = supervision.target_names(dataset)
  sizes = dict(getattr(dataset, "target_sizes", {}))
  if any(name not in names or sizes.get(name) != size for name, size in DSPRITES_FACTORS):
    raise config_lib.ConfigError(
        f"config field {field_of('rule')!r}: 'dsprites_stratified' needs the dSprites targets "
        f"{dict(DSPRITES_FACTORS)}; the dataset has {sizes or 'no targets'}")
  factors = dataset.targets_of(np.arange(dataset.num_examples), [k for k, _ in DSPRITES_FACTORS])
  cells = stratified_cells(factors)
  order = np.argsort(cells, kind="stable")
  bounds = np.searchsorted(cells[order], np.arange(NUM_STRATIFIED_CELLS + 1))
  visits = n // NUM_STRATIFIED_CELLS + (np.arange(NUM_STRATIFIED_CELLS) < n % NUM_STRATIFIED_CELLS)
  out = []
  for cell in range(NUM_STRATIFIED_CELLS):
    rows = order[bounds[cell]:bounds[cell + 1]]
    if len(rows) < visits[cell]:
      raise config_lib.ConfigError(
          f"config field {field_of('num_labelled')!r}: 'dsprites_stratified' visits cell {cell} "
          f"{visits[cell]} times but the dataset has {len(rows)} rows in it")
    out.append(rows[rng.choice(len(rows), int(visits[cell]), replace=False)])
  return np.concatenate(out)


def _balanced(dataset, n: int, rng: np.random.Generator, target_names: Sequence[str],
              field_of) -> np.ndarray:
  if not target_names:
    raise config_lib.ConfigError(f"config field {field_of('rule')!r}: 'balanced' needs a target "
                                 f"column to balance, and the batch spec names none")
  name = target_names[0]
  num_classes = int(dataset.target_sizes[name])
  if n % num_classes:
    raise config_lib.ConfigError(
        f"config field {field_of('num_labelled')!r}: 'balanced' needs a multiple of the "
        f"{num_classes} classes of {name!r}, got {n}")
  per_class = n // num_classes
  y = dataset.targets_of(np.arange(dataset.num_examples), [name])[:, 0]
  out = []
  for k in range(num_classes):
    members = np.flatnonzero(y == k)
    if len(members) < per_class:
      raise config_lib.ConfigError(
          f"config field {field_of('num_labelled')!r}: 'balanced' needs {per_class} rows of "
          f"class {k} of {name!r}, the dataset has {len(members)}")
    out.append(members[rng.choice(len(members), per_class, replace=False)])
  return np.concatenate(out)


def labelled_subset(dataset, rule: str, n: int, seed: int, target_names: Sequence[str] = (), *,
                    batch_size: int = 1,
                    field_of: Callable[[str], str] = _default_field) -> np.ndarray:
  """The sorted int64 rows [n] of ``dataset`` chosen by ``rule`` with its own ``seed``.

  Args:
    dataset: the training set (``num_examples``; ``targets_of`` for "balanced" and
      "dsprites_stratified").
    rule: one of ``RULES``.
    n: subset size.
    seed: the subset's seed (not the run seed).
    target_names: the batch spec's targets; "balanced" balances the first.
    batch_size: the labelled batch size B_l; the subset must hold at least B_l rows.
    field_of: maps "rule" / "num_labelled" / "batch_size" to the config field, for errors.

  Raises:
    ConfigError: an unknown rule, n > the rows available, n < batch_size, an impossible balance.
  """
  if rule not in RULES:
    raise config_lib.ConfigError(f"config field {field_of('rule')!r}: unknown labelled-subset "
                                 f"rule {rule!r}; valid rules: {list(RULES)}")
  if batch_size < 1:
    raise config_lib.ConfigError(f"config field {field_of('batch_size')!r} must be > 0, got "
                                 f"{batch_size}")
  total = int(dataset.num_examples)
  if n > total:
    raise config_lib.ConfigError(f"config field {field_of('num_labelled')!r}: {n} labelled rows "
                                 f"asked, the training set has {total}")
  if n < batch_size:
    raise config_lib.ConfigError(
        f"config field {field_of('num_labelled')!r} ({n}) must be >= "
        f"{field_of('batch_size')!r} ({batch_size}): each step draws that many distinct members")
  rng = np.random.Generator(np.random.PCG64(seed))
  if rule == "first":
    rows = np.arange(n)
  elif rule == "random":
    rows = rng.choice(total, n, replace=False)
  elif rule == "balanced":
    rows = _balanced(dataset, n, rng, tuple(target_names), field_of)
  else:
    rows = _stratified(dataset, n, rng, field_of)
  return np.sort(np.asarray(rows, np.int64))


# (id(dataset), rule, n, seed, targets) -> (dataset, rows): seeds of one run share the subset.
_CACHE: dict[tuple, tuple[object, np.ndarray]] = {}


def subset_for(dataset, spec: BatchSpec) -> np.ndarray:
  """``labelled_subset`` of ``spec.labelled`` (errors name its config fields); cached."""
  lab = spec.labelled
  key = (id(dataset), lab.rule, lab.num_labelled, lab.seed, tuple(spec.targets), lab.batch_size)
  hit = _CACHE.get(key)
  if hit is not None and hit[0] is dataset:
    return hit[1]
  rows = labelled_subset(dataset, lab.rule, lab.num_labelled, lab.seed, spec.targets,
                         batch_size=lab.batch_size, field_of=lab.field_of)
  rows.setflags(write=False)
  if len(_CACHE) >= 2:
    _CACHE.pop(next(iter(_CACHE)))
  _CACHE[key] = (dataset, rows)
  return rows


def check_labelled(dataset, spec: BatchSpec) -> None:
  """A labelled stream needs target columns and a possible subset; raises ``ConfigError``."""
  if not spec.targets:
    raise config_lib.ConfigError(
        f"config field {spec.field('targets')!r}: the labelled stream "
        f"({spec.labelled.field_of('rule')!r}) needs target columns for 'labelled_targets', "
        f"and none are named")
  subset_for(dataset, spec)


def check_batch_spec(dataset, spec: BatchSpec) -> None:
  """Check a method's batch spec against ``dataset``; raises ``ConfigError`` naming the field.

  Called before anything compiles: unknown target / attribute names, a dataset without targets
  or attributes, a labelled stream without targets or with an impossible subset
  (`check_labelled`).
  """
  supervision.check_names(dataset, spec.targets, "targets", spec.field("targets"))
  supervision.check_names(dataset, spec.attributes, "attributes", spec.field("attributes"))
  if spec.labelled is not None:
    check_labelled(dataset, spec)
