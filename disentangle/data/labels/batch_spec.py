"""What a method asks of its batches: images, plus side information named by the dataset.

A method declares a :class:`BatchSpec` (``Method.batch_spec(config)``, a classmethod, so the
pipeline is built before the method). The input pipeline then yields

- ``{"image"}`` for image-only methods (today's batch, bit for bit);
- ``"targets"``: int32 ``[B, K]`` class columns named by ``targets`` (-1 = unknown), read through
  the dataset's ``targets_of(indices, names)``;
- ``"attributes"``: int32 ``[B, A]`` binary columns named by ``attributes``, read through
  ``attributes_of(indices, names)``;
- with ``labelled`` set, a second stream ``{"labelled_image", "labelled_targets"}``: B_l distinct
  members of a labelled subset per step (:class:`LabelledSpec`);
- with ``pairs`` set, a second observation of each example, ``"image_pair"``, that shares all its
  ground-truth factors but a few, and ``"changed"``: int32 ``[B, K]``, 1 where a factor was
  redrawn (:class:`PairSpec`, `disentangle.data.labels.pairs`).

Datasets name what they carry: ``target_names`` and ``target_sizes`` (class counts per name),
``attribute_names``. An unknown name is a ``ConfigError`` naming the config field and listing the
valid names, raised before anything compiles.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class LabelledSpec:
  """The semi-supervised stream: ``batch_size`` distinct members of a labelled subset per step.

  ``rule`` picks the subset of ``num_labelled`` examples: ``"first"`` (indices 0..n-1),
  ``"random"``, ``"balanced"`` (equal counts per class of the first target), or a stratified rule
  over a grid of factor cells (``"dsprites_stratified"``). ``seed`` is the subset's own seed
  (not the run seed), so that runs of different seeds share the subset and differ in training
  only. ``field`` is the config prefix named in error messages; ``fields`` maps "rule",
  "num_labelled", "batch_size" or "seed" to the exact config field that set it (e.g.
  ``(("batch_size", "parted.labelled_batch_size"),)``); unmapped ones read ``<field>.<name>``.

  The labelled stream's targets are the columns named by ``BatchSpec.targets``; the "balanced"
  rule balances the first of them.
  """
  rule: str
  num_labelled: int
  batch_size: int
  seed: int = 0
  field: str = "labelled"
  fields: tuple[tuple[str, str], ...] = ()

  def field_of(self, name: str) -> str:
    """The config field behind ``name`` ("rule", "num_labelled", "batch_size", "seed")."""
    return dict(self.fields).get(name, f"{self.field}.{name}")


@dataclasses.dataclass(frozen=True)
class PairSpec:
  """Pairs of observations sharing all factors but k (Locatello et al. 2020, Sec. 3 and 5).

  ``k``: the number of factors that change per pair, or -1: drawn per pair uniformly from
  1 ... K - 1 (K: the factors of more than one value), disentanglement_lib's ``dynamics.k = -1``.
  ``dynamics``: ``"paper"`` (exactly k factors change, each to one of its other values) or
  ``"dlib"`` (disentanglement_lib's ``simple_dynamics``: 1 or k factors with equal odds, each
  redrawn from all its values, so it may keep its value); `disentangle.data.labels.pairs`.
  ``field`` is the config section named in error messages (``<field>.k``).
  """
  k: int
  dynamics: str = "paper"
  field: str = "pairs"

  def field_of(self, name: str) -> str:
    return f"{self.field}.{name}"


@dataclasses.dataclass(frozen=True)
class BatchSpec:
  """Images always; ``targets`` / ``attributes`` by name; an optional labelled stream; optional
  pairs of observations.

  ``fields`` maps "targets" / "attributes" to the config field that named them, for errors.
  """
  targets: tuple[str, ...] = ()
  attributes: tuple[str, ...] = ()
  labelled: LabelledSpec | None = None
  fields: tuple[tuple[str, str], ...] = ()
  pairs: PairSpec | None = None

  @property
  def images_only(self) -> bool:
    """Whether the batches carry images alone (no targets, attributes, labelled stream or
    pairs)."""
    return not (self.targets or self.attributes or self.labelled or self.pairs)

  def field(self, kind: str) -> str:
    """The config field that named ``kind`` ("targets" or "attributes"); unmapped: ``kind``."""
    return dict(self.fields).get(kind, kind)


IMAGES_ONLY = BatchSpec()
