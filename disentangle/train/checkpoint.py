"""Orbax checkpoints in ``<workdir>/checkpoints``: atomic saves, automatic resume, read-only use.

Orbax writes each step into a temporary folder and renames it when complete, so a kill during a
save leaves the previous checkpoint intact and the partial one is ignored (and cleaned) on the
next start. Restores use the target state's shardings, so a run resumes on any mesh.

``Checkpointer(workdir, read_only=True)`` (`disentangle.train.evaluate_run`) never saves, deletes
or cleans anything and creates no folder, so a running run can be evaluated: the latest complete
checkpoint is read.
"""
from __future__ import annotations

import pathlib

import jax
import orbax.checkpoint as ocp


class ReadOnlyError(RuntimeError):
  """A read-only `Checkpointer` was asked to write."""


class Checkpointer:
  """The one wrapper of the run's orbax checkpoint manager.

  Args:
    workdir: the run directory; checkpoints live in ``workdir/checkpoints``.
    keep: checkpoints kept (older ones are deleted on save); ignored when read-only.
    read_only: open an existing ``checkpoints/`` for reading only (FileNotFoundError if absent).
  """

  def __init__(self, workdir, *, keep: int = 2, read_only: bool = False):
    self.directory = pathlib.Path(workdir).resolve() / "checkpoints"
    self.read_only = read_only
    if read_only:
      if not self.directory.is_dir():
        raise FileNotFoundError(f"{self.directory} does not exist: the run has no checkpoint yet")
      options = ocp.CheckpointManagerOptions(read_only=True, create=False, max_to_keep=None,
                                             save_interval_steps=0)
    else:
      options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True,
                                             enable_async_checkpointing=False)
    self._manager = ocp.CheckpointManager(self.directory, options=options)

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def all_steps(self) -> list[int]:
    """Steps of every complete checkpoint, ascending."""
    return sorted(int(s) for s in self._manager.all_steps())

  def save(self, step: int, state) -> None:
    if self.read_only:
      raise ReadOnlyError(f"{self.directory} is open read-only: not saving step {step}")
    self._manager.save(step, args=ocp.args.StandardSave(state))
    self._manager.wait_until_finished()

  def restore(self, target, step: int | None = None):
    """Restore ``step`` (default latest) into arrays shaped and sharded like ``target`` (arrays
    or `jax.ShapeDtypeStruct` leaves)."""
    step = self._manager.latest_step() if step is None else step
    abstract = jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, target)
    return self._manager.restore(step, args=ocp.args.StandardRestore(abstract))

  def close(self) -> None:
    self._manager.close()
