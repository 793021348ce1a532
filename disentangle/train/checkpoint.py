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

Every checkpoint is verifiable (`disentangle.train.integrity`): each save writes the checksums
of the step's files (``checksums.json``) before the step counts as complete, and each restore
first compares the files with them, then checks the restored state finite. A checkpoint saved
before checksums existed restores with the finiteness check alone.

A checkpoint that fails either check or cannot be restored completely (a file with other bytes,
truncated or missing, a missing item, a tree that does not match, NaN/Inf in the state) is
skipped: ``restore`` without a step falls back to the newest one that passes, warns in one line
naming the skipped ones, the first one's file and what failed and, when writable, moves them
aside to ``<subdir>_skipped/<step>`` (never deleted; the resumed run then saves those steps
afresh). When none passes, `CheckpointError` names the folder and what to do, and nothing is
moved. A run never trains from, and `experiments.evaluate` never evaluates, a checkpoint that
failed a check.

``Checkpointer(workdir, asynchronous=True)`` (the trainer's) only starts each save: `save` copies
the arrays to the host and returns while orbax writes them on its own threads; the next `save`,
`wait` and `close` wait for the save in flight first (the trainer waits before it stops at a
signal or the deadline and at the end). A save is complete only once orbax has renamed its
temporary folder (a bucket: written its commit marker); a kill before that leaves the previous
checkpoint as the newest, which is where the next start resumes. `all_steps` and `latest_step`
name complete checkpoints only, never the one in flight.

One save at a time in a process: a `save` first waits for the save in flight of every
Checkpointer (the run's asynchronous one when the selected slot saves), and saves and waits hold
one lock, so the selected slot's save on the background evaluation's thread never overlaps the
run's save on the main thread. Orbax numbers its save operations process-wide
(``OperationIdGenerator``) and keys the signals a save waits for by that number: a save of the
selected slot started while the run's was in flight has waited orbax's 300 s for the signal that
its step folder was created, and failed.

A save that fails (a full disk) raises `atomic.WriteError`, one line (an asynchronous one at the
next `save`, `wait` or `close`). Orbax's writer threads log the same error first
(``_SignalingThread.run() raised an exception``, with its traceback); tensorstore's writes still
in flight, once they end, call back into the closed event loop of the failed save (``Event loop
is closed``, one traceback each, through `sys.unraisablehook`); and asyncio reports the
unretrieved exceptions of its write tasks and of the future gathering them, or a task left
unfinished, when they are collected. A restore that fails (a truncated file) leaves its other
reads in flight the same way, and each read coroutine collected unfinished raises orbax's own
error as it is closed (``Exception ignored in: <coroutine ...>``). All of these repeat the one
error (a save's `atomic.WriteError`, a restore's skipped checkpoint, each one line) and are
dropped for a failed save or restore only (`_QuietFailure`); other logging and other
unraisable exceptions are untouched.

**On a bucket** (``gs://`` workdir, `disentangle.paths`) orbax writes each step straight into its
step folder (object stores have no atomic rename) and marks it complete with a
``commit_success.txt`` object written last; a step without it is incomplete and ignored (and
cleaned) like a temporary folder on a disk. The arrays go through tensorstore's own GCS client
(``TENSORSTORE_GCS_HTTP_URL`` points it at another endpoint, e.g. an emulator), the metadata
through epath. Setting a checkpoint aside (`restore`) copies its objects and deletes the old ones.
"""
from __future__ import annotations

import gc
import logging
import os
import re
import sys
import threading
import traceback
import weakref

import jax
import orbax.checkpoint as ocp

from disentangle import atomic
from disentangle import errors
from disentangle import paths
from disentangle.train import integrity


class ReadOnlyError(RuntimeError):
  """A read-only `Checkpointer` was asked to write."""


class CheckpointError(errors.UserError, ValueError):
  """No checkpoint of a folder (or not the one asked for) can be restored completely."""


class _NonFinite(errors.UserError):
  """A restored state holding NaN/Inf: the message names the leaf."""


def _cause(e: BaseException) -> str:
  """The first line of an exception, cut to a readable length (a failed check: its message)."""
  text = (str(e).strip().splitlines() or [type(e).__name__])[0]
  if isinstance(e, (integrity.Damaged, _NonFinite)):
    return text[:300]
  return f"{type(e).__name__}: {text[:200]}"


# The writable Checkpointers of this process: a save waits for each one's save in flight first.
_WRITERS: weakref.WeakSet = weakref.WeakSet()
_SAVING = threading.RLock()  # held by every save and wait, on whichever thread


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
    asynchronous: `save` starts the save and returns; it is complete after the next `save`,
      `wait` or `close` (module docstring).
  """

  def __init__(self, workdir, *, keep: int = 2, read_only: bool = False,
               subdir: str = "checkpoints", with_record: bool = False,
               single_process: bool = False, asynchronous: bool = False):
    workdir = paths.as_path(workdir)
    self.directory = (workdir if paths.is_remote(workdir) else workdir.resolve()) / subdir
    self.read_only = read_only
    self.with_record = with_record
    self.asynchronous = asynchronous and not read_only
    self._in_flight: int | None = None  # the step of the save started and not waited for
    self._quiet = None  # the `_QuietFailure` of that save
    self._failed = False  # an asynchronous save failed
    extra = {"temporary_path_class": integrity.temporary_path_class(self.directory)}
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
                                             enable_async_checkpointing=self.asynchronous,
                                             **extra)
    self._manager = ocp.CheckpointManager(self.directory, options=options)
    self.restored_step: int | None = None
    if not read_only:
      _WRITERS.add(self)

  def latest_step(self) -> int | None:
    """The newest complete checkpoint (not the one in flight), or None."""
    steps = self.all_steps()
    return steps[-1] if steps else None

  def last_good_step(self) -> int | None:
    """The newest complete checkpoint after the save in flight (if any) has ended, or None. For
    a run stopping on an error of its own: a save in flight that fails is left out (its
    `atomic.WriteError` dropped behind the error that stops the run)."""
    try:
      self.wait()
    except atomic.WriteError:
      pass
    return self.latest_step()

  def latest_intact_step(self) -> int | None:
    """The newest complete checkpoint whose files match their checksums (`integrity.verify`,
    nothing restored), or None."""
    for s in reversed(self.all_steps()):
      try:
        integrity.verify(self.directory / str(s))
      except integrity.Damaged:
        continue
      return s
    return None

  def all_steps(self) -> list[int]:
    """Steps of every complete checkpoint, ascending (not the one in flight)."""
    return sorted(int(s) for s in self._manager.all_steps() if s != self._in_flight)

  def save(self, step: int, state, record: dict | None = None) -> None:
    """Save ``state`` at ``step`` (with ``record`` when ``with_record``). A slot with records
    first drops its steps >= ``step`` (a resumed run replacing a step it had gone past).

    First waits for the save in flight of this and every other Checkpointer of the process
    (raising the `atomic.WriteError` of one that failed; module docstring). Synchronous:
    returns once the checkpoint is complete. Asynchronous: returns once ``state`` is copied to
    the host; the write goes on (complete after the next `save`, `wait` or `close`)."""
    if self.read_only:
      raise ReadOnlyError(f"{self.directory} is open read-only: not saving step {step}")
    with _SAVING:
      self._save(step, state, record)

  def _save(self, step: int, state, record: dict | None) -> None:
    self.wait()
    for other in list(_WRITERS):
      other.wait()
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
    # orbax writes into a temporary folder: a failed save leaves the older steps intact
    self._quiet, self._in_flight = _QuietFailure(), step
    try:
      self._manager.save(step, args=args, custom_metadata=integrity.CLAIM)
    except BaseException as e:
      self._end(e)
      if isinstance(e, ocp.checkpoint_manager.StepAlreadyExistsError):
        raise
      if isinstance(e, Exception):
        raise atomic.write_error(f"checkpoint {step} in {self.directory}", e) from e
      raise
    if not self.asynchronous:
      self.wait()

  def wait(self) -> None:
    """Waits for the save in flight (if any) to be complete; `atomic.WriteError` (one line)
    when it failed. Nothing in flight: returns at once."""
    with _SAVING:
      self._wait()

  def _wait(self) -> None:
    if self._in_flight is None:
      return
    step = self._in_flight
    try:
      self._manager.wait_until_finished()
      self._manager.check_for_errors()
    except BaseException as e:
      if isinstance(e, Exception):  # ENOSPC and other write failures
        error = atomic.write_error(f"checkpoint {step} in {self.directory}", e)
        _release_pending(e)
        self._failed = True
        self._end(e)
        raise error from None
      self._end(e)
      raise
    self._end(None)

  def _end(self, error: BaseException | None) -> None:
    """The save in flight has ended (``error``: it failed)."""
    quiet, self._quiet, self._in_flight = self._quiet, None, None
    if quiet is not None:
      quiet.end(failed=error is not None)

  def restore(self, target, step: int | None = None):
    """Restore ``step`` into arrays shaped and sharded like ``target`` (arrays or
    `jax.ShapeDtypeStruct` leaves); `restored_step` says which step came back.

    Each checkpoint tried is checked (module docstring): its files against their checksums
    before the restore, the state finite after it. Without ``step``: the newest checkpoint
    that passes and restores completely; newer ones that do not are skipped with a one-line
    warning (and moved aside unless read-only). `CheckpointError` when ``step`` (or, without
    it, every checkpoint) fails."""
    abstract = jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, target)
    if step is not None:
      try:
        state = self._restore_step(abstract, step)
      except Exception as e:  # pylint: disable=broad-except
        raise CheckpointError(f"checkpoint {step} in {self.directory} cannot be restored "
                              f"({_cause(e)})") from e
      self.restored_step = int(step)
      return state
    skipped = []
    for s in reversed(self.all_steps()):
      try:
        state = self._restore_step(abstract, s)
      except Exception as e:  # pylint: disable=broad-except  (truncated, missing, wrong tree)
        skipped.append((s, _cause(e)))
        continue
      if skipped:
        self._skip(skipped, s)
      self.restored_step = s
      return state
    if not skipped:
      raise CheckpointError(f"{self.directory} holds no complete checkpoint")
    raise CheckpointError(
        f"no checkpoint in {self.directory} can be restored (steps "
        f"{', '.join(str(s) for s, _ in skipped)}; step {skipped[0][0]}: {skipped[0][1]}); "
        f"nothing was changed: to start over, move {self.directory} aside or use a new workdir")

  def _restore_step(self, abstract, step: int):
    """``step`` checked and restored: `integrity.Damaged` (its files), `_NonFinite` (its state)
    or orbax's error; when the restore fails, its reads still in flight end quietly
    (`_QuietFailure`)."""
    integrity.verify(self.directory / str(step))
    with _QuietFailure():
      if self.with_record:
        state = self._manager.restore(
            step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract))).state
      else:
        state = self._manager.restore(step, args=ocp.args.StandardRestore(abstract))
    leaf = integrity.nonfinite_leaf(state)
    if leaf is not None:
      raise _NonFinite(f"the restored state holds NaN/Inf at {leaf}")
    return state

  def _skip(self, skipped: list[tuple[int, str]], used: int) -> None:
    """Warn about the checkpoints that did not restore; move them aside unless read-only."""
    aside = self.directory.parent / f"{self.directory.name}_skipped"
    moved = not self.read_only
    if moved:
      if jax.process_count() > 1:  # every process has tried them before one is moved
        ocp.multihost.sync_global_processes(f"skip_checkpoints_{used}")
      if jax.process_index() == 0:
        aside.mkdir(exist_ok=True)
        for s, _ in skipped:
          dest, k = aside / str(s), 1
          while dest.exists():
            dest, k = aside / f"{s}-{k}", k + 1
          (self.directory / str(s)).rename(dest)
      if jax.process_count() > 1:
        ocp.multihost.sync_global_processes(f"skipped_checkpoints_{used}")
      self._manager.reload()
    if jax.process_index() == 0:
      where = f"moved to {aside}" if moved else "left in place (read-only)"
      print(f"warning: checkpoint {', '.join(str(s) for s, _ in skipped)} in {self.directory} "
            f"cannot be restored ({skipped[0][1]}); {where}; using step {used}",
            file=sys.stderr, flush=True)

  def record(self, step: int | None = None) -> dict | None:
    """The JSON record saved with ``step`` (default: of the newest step whose record reads,
    skipping the others as `restore` does); None when there is no step."""
    def read(s):
      integrity.verify(self.directory / str(s))
      return dict(self._manager.restore(
          s, args=ocp.args.Composite(record=ocp.args.JsonRestore())).record)
    if step is not None:
      return read(step)
    skipped = []
    for s in reversed(self.all_steps()):
      try:
        record = read(s)
      except Exception as e:  # pylint: disable=broad-except
        skipped.append((s, _cause(e)))
        continue
      if skipped:
        self._skip(skipped, s)
      return record
    if skipped:
      raise CheckpointError(
          f"no record in {self.directory} can be read (steps "
          f"{', '.join(str(s) for s, _ in skipped)}; step {skipped[0][0]}: {skipped[0][1]}); "
          "nothing was changed")
    return None

  def close(self) -> None:
    """Waits for the save in flight (raising its error, after closing) and closes orbax's
    manager (its threads and event loops)."""
    try:
      self.wait()
    finally:
      self._manager.close()
      if self._failed:  # the writes of a failed save that ended since (`_release_pending`)
        gc.collect()


def _is_thread_error(record: logging.LogRecord) -> bool:
  """orbax's record (through absl) of an exception in one of its save threads, or of the
  failed save it was waiting for (``wait_until_finished``)."""
  text = str(record.msg)
  return bool(record.exc_info) and (
      "_SignalingThread.run() raised" in text
      or ("[wait_until_finished]" in text and "failed" in text)
      or ("Failed to run" in text and "in background save thread" in text))


# A Task's or a _GatheringFuture's exception nobody retrieved; a Task collected unfinished.
_UNRETRIEVED = re.compile(r"\w+ exception was never retrieved|Task was destroyed but it is pending")


def _is_unretrieved_io(record: logging.LogRecord) -> bool:
  """asyncio's record of an orbax write task or of the future gathering them, or of a read of
  the checkpoint's OCDBT database (a failed restore's), that failed with nobody to retrieve its
  exception or never finished (logged when it is garbage-collected, which may be after the save
  or restore has returned)."""
  text = str(record.msg)
  return _UNRETRIEVED.match(text) is not None and ("orbax" in text or "OCDBT database" in text)


class _HeldThreadErrors(logging.Filter):
  """Holds back orbax's records of its save threads' exceptions and of its reads' and writes'
  unretrieved ones."""

  def __init__(self):
    super().__init__()
    self.held: list[logging.LogRecord] = []

  def filter(self, record: logging.LogRecord) -> bool:
    if _is_thread_error(record) or _is_unretrieved_io(record):
      self.held.append(record)
      return False
    return True


class _DropUnretrievedIO(logging.Filter):
  """Drops asyncio's records of a failed save's writes and a failed restore's reads, whenever
  they are collected."""

  def filter(self, record: logging.LogRecord) -> bool:
    return not _is_unretrieved_io(record)


class _QuietFailure:
  """From its creation to `end` (a save or a restore), orbax's records of its threads' and
  tasks' exceptions and what its reads and writes raise late (`_is_late_io`: callbacks into a
  closed event loop, coroutines collected unfinished) are held back: dropped when it fails (a
  save's error is raised as one line, a restore's checkpoint skipped in one line), passed on as
  usual when it succeeds. After a failure, what its cancelled reads and writes raise and log
  later keeps being dropped (`_drop_late_io`, `_drop_unretrieved_io`). A save holds them from
  its start to the wait that ends it (`end`), a restore for its ``with`` block."""

  def __init__(self):
    self._loggers = [logging.getLogger("absl"), logging.getLogger("asyncio")]  # orbax: absl
    self._held = _HeldThreadErrors()
    for logger in self._loggers:
      logger.addFilter(self._held)
    self._previous = previous = sys.unraisablehook
    self._callbacks = callbacks = []
    self._ended = False
    # Once ended, a hook still chained below a later one (two saves overlapping) passes through.
    sys.unraisablehook = self._hook = lambda u: (
        callbacks.append(u) if not self._ended and _is_late_io(u) else previous(u))

  def __enter__(self):
    return self

  def __exit__(self, kind, error, tb) -> None:
    """Around a synchronous operation (a restore): it ends with the block, failed when the block
    raises (its pending reads released first when it is an error, `_release_pending`)."""
    del kind, tb
    if isinstance(error, Exception):
      _release_pending(error)
    self.end(failed=error is not None)

  def end(self, failed: bool) -> None:
    self._ended = True
    if sys.unraisablehook is self._hook:
      sys.unraisablehook = self._previous
    for logger in self._loggers:
      logger.removeFilter(self._held)
    if failed:
      _drop_late_io()
      _drop_unretrieved_io()
      return
    for record in self._held.held:  # it succeeded: whatever was held is not about it
      logging.getLogger(record.name).handle(record)
    for unraisable in self._callbacks:
      self._previous(unraisable)


def _release_pending(e: BaseException) -> None:
  """Lets the writes of a failed asynchronous save, or the reads of a failed restore, go now:
  the frames of ``e``'s tracebacks (orbax keeps ``e`` on its threads) hold their coroutines,
  still waiting on tensorstore, which would otherwise be collected when the interpreter shuts
  down and print one ``Exception ignored`` traceback each. Collected here, while the records
  and late callbacks are held (and dropped)."""
  seen = set()
  while e is not None and id(e) not in seen:
    seen.add(id(e))
    traceback.clear_frames(e.__traceback__)
    e = e.__cause__ or e.__context__
  gc.collect()


def _is_closed_loop_callback(unraisable) -> bool:
  """``RuntimeError('Event loop is closed')`` raised by ``call_soon_threadsafe``."""
  e, tb = unraisable.exc_value, unraisable.exc_traceback
  return isinstance(e, RuntimeError) and str(e) == "Event loop is closed" and tb is not None \
      and any(f.name == "call_soon_threadsafe" for f in traceback.extract_tb(tb))


def _is_collected_orbax_coroutine(unraisable) -> bool:
  """An orbax coroutine collected unfinished (a read of a failed restore) that raises its own
  error as it is closed (``Exception ignored in: <coroutine ...>``)."""
  code = getattr(unraisable.object, "cr_code", None)
  return code is not None and f"{os.sep}orbax{os.sep}" in code.co_filename


def _is_late_io(unraisable) -> bool:
  """What the reads and writes of a failed save or restore raise after it has returned."""
  return _is_closed_loop_callback(unraisable) or _is_collected_orbax_coroutine(unraisable)


def _drop_unretrieved_io() -> None:
  """From now on, asyncio's records of orbax's write tasks that failed unobserved are dropped
  (the writes of a failed save, collected after it returned). Installed once."""
  logger = logging.getLogger("asyncio")
  if not any(isinstance(f, _DropUnretrievedIO) for f in logger.filters):
    logger.addFilter(_DropUnretrievedIO())


def _drop_late_io() -> None:
  """From now on, `sys.unraisablehook` drops what the reads and writes of a failed save or
  restore raise after it returned (`_is_late_io`); every other unraisable exception goes to the
  hook in place before. Installed once."""
  previous = sys.unraisablehook
  if getattr(previous, "drops_late_io", False):
    return

  def hook(unraisable):
    if not _is_late_io(unraisable):
      previous(unraisable)
  hook.drops_late_io = True
  sys.unraisablehook = hook
