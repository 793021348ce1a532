"""Orbax checkpoints in ``<workdir>/checkpoints``: atomic saves, automatic resume.

Orbax writes each step into a temporary folder and renames it when complete, so a kill during a
save leaves the previous checkpoint intact and the partial one is ignored (and cleaned) on the
next start. Restores use the target state's shardings, so a run resumes on any mesh.
"""
from __future__ import annotations

import pathlib

import jax
import orbax.checkpoint as ocp


class Checkpointer:

  def __init__(self, workdir, *, keep: int = 2):
    self.directory = pathlib.Path(workdir).resolve() / "checkpoints"
    options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True,
                                           enable_async_checkpointing=False)
    self._manager = ocp.CheckpointManager(self.directory, options=options)

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def save(self, step: int, state) -> None:
    self._manager.save(step, args=ocp.args.StandardSave(state))
    self._manager.wait_until_finished()

  def restore(self, target, step: int | None = None):
    """Restore ``step`` (default latest) into arrays shaped and sharded like ``target``."""
    step = self._manager.latest_step() if step is None else step
    abstract = jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, target)
    return self._manager.restore(step, args=ocp.args.StandardRestore(abstract))

  def close(self) -> None:
    self._manager.close()
