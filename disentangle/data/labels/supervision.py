"""Named supervision of a dataset: integer target columns and binary attributes, asked for by name.

The protocol (see ``batch_spec``): a dataset has ``target_names`` (tuple), ``target_sizes`` (dict
name -> class count), ``targets_of(indices, names) -> int32 [n, K]`` (-1 = unknown),
``attribute_names`` (tuple) and ``attributes_of(indices, names) -> int32 {0, 1} [n, A]``.

:class:`Supervision` implements it from stored columns; every loader mixes it in (MNIST: "digit",
Fashion-MNIST: "class", dSprites: its five factors, CelebA: its 40 attributes, Chairs: nothing).
:func:`check_names` checks names asked for against a dataset before anything compiles
(``labelled.check_batch_spec`` checks a whole method's spec). Datasets without the protocol (any
object with ``get_images``) count as having no targets and no attributes.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from disentangle import config as config_lib


def _columns(table: Mapping[str, np.ndarray] | None, n: int, what: str,
             binary: bool) -> dict[str, np.ndarray]:
  out = {}
  for name, col in (table or {}).items():
    col = np.asarray(col)
    if col.shape != (n,) or not np.issubdtype(col.dtype, np.integer):
      raise ValueError(f"{what} {name!r} must be an int array [{n}], got {col.dtype} {col.shape}")
    if binary and not np.all((col == 0) | (col == 1)):
      raise ValueError(f"attribute {name!r} must hold 0 / 1")
    if not binary and col.min(initial=0) < -1:
      raise ValueError(f"target {name!r} must hold class indices or -1 (unknown)")
    out[str(name)] = col.astype(np.int32)
  return out


def _pick(columns: Mapping[str, np.ndarray], indices, names: Sequence[str], what: str,
          dataset: str) -> np.ndarray:
  names = tuple(names)
  missing = [n for n in names if n not in columns]
  if missing:
    raise KeyError(f"{dataset or 'the dataset'} has no {what} {missing}; valid names: "
                   f"{list(columns) or 'none'}")
  idx = np.asarray(indices, np.int64).reshape(-1)
  if not names:
    return np.zeros((len(idx), 0), np.int32)
  return np.stack([columns[n][idx] for n in names], axis=1)


class Supervision:
  """Mixin: named target columns and binary attribute columns held in memory.

  Subclasses call :meth:`_set_supervision` (or override the properties, as dSprites does).
  """

  _targets: dict[str, np.ndarray] = {}
  _target_sizes: dict[str, int] = {}
  _attributes: dict[str, np.ndarray] = {}

  def _set_supervision(self, n: int, targets: Mapping[str, np.ndarray] | None = None,
                       target_sizes: Mapping[str, int] | None = None,
                       attributes: Mapping[str, np.ndarray] | None = None) -> None:
    """``targets``: name -> int [n] (-1 unknown); ``target_sizes`` default to max + 1;
    ``attributes``: name -> int [n] in {0, 1}."""
    self._targets = _columns(targets, n, "target", binary=False)
    sizes = dict(target_sizes or {})
    unknown = sorted(set(sizes) - set(self._targets))
    if unknown:
      raise ValueError(f"target_sizes names {unknown}, which are not targets")
    self._target_sizes = {}
    for name, col in self._targets.items():
      size = int(sizes.get(name, col.max(initial=-1) + 1))
      if col.max(initial=-1) >= size:
        raise ValueError(f"target {name!r} holds class {col.max()} >= its size {size}")
      self._target_sizes[name] = size
    self._attributes = _columns(attributes, n, "attribute", binary=True)

  @property
  def target_names(self) -> tuple[str, ...]:
    return tuple(self._targets)

  @property
  def target_sizes(self) -> dict[str, int]:
    return dict(self._target_sizes)

  def targets_of(self, indices, names: Sequence[str]) -> np.ndarray:
    """int32 [n, K]: the target columns ``names`` of rows ``indices`` (-1 = unknown)."""
    return _pick(self._targets, indices, names, "target", getattr(self, "name", ""))

  @property
  def attribute_names(self) -> tuple[str, ...]:
    return tuple(self._attributes)

  def attributes_of(self, indices, names: Sequence[str]) -> np.ndarray:
    """int32 [n, A] in {0, 1}: the attribute columns ``names`` of rows ``indices``."""
    return _pick(self._attributes, indices, names, "attribute", getattr(self, "name", ""))


def target_names(dataset) -> tuple[str, ...]:
  return tuple(getattr(dataset, "target_names", ()))


def attribute_names(dataset) -> tuple[str, ...]:
  return tuple(getattr(dataset, "attribute_names", ()))


def _describe(dataset) -> str:
  return repr(getattr(dataset, "name", "") or type(dataset).__name__)


def check_names(dataset, names: Sequence[str], kind: str, field: str) -> None:
  """Raise ``ConfigError`` naming ``field`` unless every name is a ``kind`` of ``dataset``.

  ``kind``: "targets" or "attributes".
  """
  valid = target_names(dataset) if kind == "targets" else attribute_names(dataset)
  names = tuple(names)
  if not names:
    return
  if not valid:
    raise config_lib.ConfigError(
        f"config field {field!r} asks for {kind} {list(names)}, but the dataset "
        f"{_describe(dataset)} has no {kind}")
  unknown = [n for n in names if n not in valid]
  if unknown:
    raise config_lib.ConfigError(
        f"config field {field!r}: unknown {kind} {unknown} of the dataset "
        f"{_describe(dataset)}; valid names: {list(valid)}")
