"""What a method asks of its batches: images, plus side information named by the dataset.

A method declares a :class:`BatchSpec` (``Method.batch_spec(config)``, a classmethod, so the
pipeline is built before the method). The input pipeline then yields

- ``{"image"}`` for image-only methods (today's batch, bit for bit);
- ``"targets"``: int32 ``[B, K]`` class columns named by ``targets`` (-1 = unknown), read through
  the dataset's ``targets_of(indices, names)``;
- ``"attributes"``: int32 ``[B, A]`` binary columns named by ``attributes``, read through
  ``attributes_of(indices, names)``;
- with ``labelled`` set, a second stream ``{"labelled_image", "labelled_targets"}``: B_l distinct
  members of a labelled subset per step (:class:`LabelledSpec`).

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
class BatchSpec:
  """Images always; ``targets`` / ``attributes`` by name; an optional labelled stream.

  ``fields`` maps "targets" / "attributes" to the config field that named them, for errors.
  """
  targets: tuple[str, ...] = ()
  attributes: tuple[str, ...] = ()
  labelled: LabelledSpec | None = None
  fields: tuple[tuple[str, str], ...] = ()

  @property
  def images_only(self) -> bool:
    return not (self.targets or self.attributes or self.labelled)

  def field(self, kind: str) -> str:
    return dict(self.fields).get(kind, kind)


IMAGES_ONLY = BatchSpec()
