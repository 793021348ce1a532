"""Orbax checkpoints in ``<workdir>/checkpoints``: atomic saves, automatic resume, read-only use.

Orbax writes each step into a temporary folder and renames it when complete, so a kill during a
save leaves the previous checkpoint intact and the partial one is ignored (and cleaned) on the
next start. Restores use the target state's shardings, so a run resumes on any mesh.

``Checkpointer(workdir, read_only=True)`` (`disentangle.evaluation.evaluate_run`) never saves, deletes
or cleans anything and creates no folder, so a running run can be evaluated: the latest complete
checkpoint is read.

``Checkpointer(run_dir, subdir="checkpoints_best", with_record=True, keep=1)`` is the kept slot
of model selection (`disentangle.train.selection`): each step is saved with a JSON record (the
selection rule, the metric and its value) in the same orbax step folder, so the state and its
record appear together, atomically, and survive a kill.
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
    workdir: the run directory; checkpoints live in ``workdir/<subdir>``.
    keep: checkpoints kept (older ones are deleted on save); ignored when read-only.
    read_only: open an existing ``<subdir>/`` for reading only (FileNotFoundError if absent).
    subdir: ``"checkpoints"`` (the run's) or ``"checkpoints_best"`` (the selected one).
    with_record: every step also holds a JSON record (`save`'s ``record``, `record`).
    single_process: only this process writes (the selected slot, written by process 0 in a
      multi-process run).
  """

  def __init__(self, workdir, *, keep: int = 2, read_only: bool = False,
               subdir: str = "checkpoints", with_record: bool = False,
               single_process: bool = False):
    self.directory = pathlib.Path(workdir).resolve() / subdir
    self.read_only = read_only
    self.with_record = with_record
    extra = {}
    if single_process and jax.process_count() > 1:
      extra["multiprocessing_options"] = ocp.options.MultiprocessingOptions(
          primary_host=jax.process_index(), active_processes={jax.process_index()})
    if read_only:
      if not self.directory.is_dir():
        raise FileNotFoundError(f"{self.directory} does not exist: the run has no checkpoint yet")
      options = ocp.CheckpointManagerOptions(read_only=True, create=False, max_to_keep=None,
                                             save_interval_steps=0, **extra)
    else:
      options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True,
                                             enable_async_checkpointing=False, **extra)
    self._manager = ocp.CheckpointManager(self.directory, options=options)

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def all_steps(self) -> list[int]:
    """Steps of every complete checkpoint, ascending."""
    return sorted(int(s) for s in self._manager.all_steps())

  def save(self, step: int, state, record: dict | None = None) -> None:
    """Save ``state`` at ``step`` (with ``record`` when ``with_record``). A slot with records
    first drops its steps >= ``step`` (a resumed run replacing a step it had gone past)."""
    if self.read_only:
      raise ReadOnlyError(f"{self.directory} is open read-only: not saving step {step}")
    if self.with_record:
      if record is None:
        raise ValueError(f"{self.directory} keeps a record with each step: give one")
      for s in self.all_steps():
        if s >= step:
          self._manager.delete(s)
      args = ocp.args.Composite(state=ocp.args.StandardSave(state),
                                record=ocp.args.JsonSave(record))
    else:
      args = ocp.args.StandardSave(state)
    self._manager.save(step, args=args)
    self._manager.wait_until_finished()

  def restore(self, target, step: int | None = None):
    """Restore ``step`` (default latest) into arrays shaped and sharded like ``target`` (arrays
    or `jax.ShapeDtypeStruct` leaves)."""
    step = self._manager.latest_step() if step is None else step
    abstract = jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, target)
    if self.with_record:
      return self._manager.restore(
          step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract))).state
    return self._manager.restore(step, args=ocp.args.StandardRestore(abstract))

  def record(self, step: int | None = None) -> dict | None:
    """The JSON record saved with ``step`` (default latest); None when there is no step."""
    step = self._manager.latest_step() if step is None else step
    if step is None:
      return None
    return dict(self._manager.restore(
        step, args=ocp.args.Composite(record=ocp.args.JsonRestore())).record)

  def close(self) -> None:
    self._manager.close()
