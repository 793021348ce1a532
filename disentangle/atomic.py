"""Atomic file writes: the one place that writes a file so that a kill never leaves half of it.

Every writer of the library (configs, metrics logs, evaluation JSON, reports, pictures, caches,
downloads) goes through :func:`write_text`, :func:`write_bytes` or :func:`replacing`: the content
goes to a temporary file in the target's folder, then ``os.replace`` renames it onto the target
(atomic on POSIX file systems), so a reader sees the old file or the new one, never a mix. The
temporary is flushed to the disk (``fsync``) before the rename and the folder after it, so that a
power cut or a kernel crash, not only a killed process, leaves the old or the new content and the
rename itself survives (what the flushes cost: ``benchmarks.atomic_writes``).

A file written here gets the mode `open()` would give it, 0o666 less the process's umask (under
umask 022: ``-rw-r--r--``), not the 0o600 of `tempfile.mkstemp`, so the files of a run are as
readable as the rest of its folder.

A process killed during a write (SIGKILL) leaves its temporary, a hidden
``.<name>.<pid>@<host>.XXXXXXXX<ext>`` beside the target, never read; the next write of that
target on the same host removes the temporaries of processes that no longer run.

A write that fails with an ``OSError`` (a full disk: ``ENOSPC``; a quota, a read-only or lost
file system) raises :class:`WriteError`, one line naming the path and the cause; the target keeps
its old content and no temporary is left. The run's other writers (``train.writers``, the
checkpoints) raise the same error, which the command line prints as one line. An error of the
user's that the block of :func:`replacing` raises itself (`errors.UserError`: a download that
failed, a checksum that differs) is not a write error and keeps its own message.

**On a bucket** (a ``gs://`` target, `disentangle.paths`) every write is one whole-object
upload: the content is made in a local temporary (:func:`replacing`; :func:`write_text` and
:func:`write_bytes` upload their bytes directly) and uploaded once it is complete. An object
upload is atomic: a reader sees the old object or the new one, never a part, and a process
killed before the upload ends leaves the old object and no temporary in the bucket (its local
temporary goes with the machine's temporary folder). There is no ``fsync`` to do: the store
acknowledges an upload once it is durable. A failed upload raises the same one-line
:class:`WriteError`, naming the URL. An object has no file mode: the local temporary lies in a
private folder (0o700) deleted after the upload, and a file copied from a bucket onto the local
disk (a data set cached by `disentangle.data.files`) is written by :func:`replacing` and takes
the umask like any other.
"""
from __future__ import annotations

import contextlib
import errno
import glob
import os
import pathlib
import re
import shutil
import socket
import tempfile
import threading
from typing import Iterator

from disentangle import errors
from disentangle import paths


class WriteError(errors.UserError, OSError):
  """A file of the run could not be written: one line naming the path and the cause."""


def write_error(path, e: BaseException) -> WriteError:
  """The `WriteError` of a failed write of ``path`` (``e``: the error that stopped it)."""
  code = getattr(e, "errno", None)
  if not code:  # tensorstore (orbax's arrays) names the system's error in its message
    found = re.search(r"os_error_code='(\d+)'", str(e))
    code = int(found.group(1)) if found else None
  if code:
    cause = f"{os.strerror(code)} ({errno.errorcode.get(code, code)})"
  else:
    cause = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
  err = WriteError(f"cannot write {path}: {cause}; the files written before are intact, the "
                   "same command resumes once the cause is fixed")
  err.errno = code
  return err


@contextlib.contextmanager
def replacing(path: str | os.PathLike, suffix: str | None = None, *,
              sync: bool = True) -> Iterator[pathlib.Path]:
  """Yield a temporary path beside ``path``; on success rename it onto ``path``, else delete it.

  ``suffix`` (default: ``path``'s own) serves writers that pick a format by extension (PIL
  reads ``.png``). ``np.save`` appends ``.npy`` to a name without it: give it an open file.
  ``sync``: ``fsync`` the temporary before the rename and the folder after it (the default;
  ``False`` only to measure what it costs). On a bucket: a local temporary, uploaded whole
  on success (`_uploading`).
  """
  if paths.is_remote(path):
    with _uploading(paths.as_path(path), suffix) as tmp:
      yield tmp
    return
  path = pathlib.Path(path)
  try:
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}@{_HOST}.",
                               suffix=path.suffix if suffix is None else suffix)
    try:
      os.fchmod(fd, new_file_mode())  # mkstemp's 0o600 -> open()'s mode
    finally:
      os.close(fd)
  except OSError as e:
    raise write_error(path, e) from e
  tmp = pathlib.Path(tmp)
  try:
    yield tmp
    if sync:
      fsync(tmp)
    os.replace(tmp, path)
    if sync:
      fsync(path.parent)
  except BaseException as e:
    tmp.unlink(missing_ok=True)
    if isinstance(e, OSError) and not isinstance(e, errors.UserError):  # a write of the block
      raise write_error(path, e) from e
    raise


_HOST = socket.gethostname()
_UMASK_LOCK = threading.Lock()


def umask() -> int:
  """The process's umask, read without changing it (Linux: ``/proc/self/status``); elsewhere
  set and put back under a lock."""
  try:
    with open("/proc/self/status", encoding="ascii", errors="replace") as f:
      for line in f:
        if line.startswith("Umask:"):
          return int(line.split()[1], 8)
  except (OSError, ValueError, IndexError):
    pass
  with _UMASK_LOCK:
    mask = os.umask(0o077)
    os.umask(mask)
  return mask


def new_file_mode() -> int:
  """The mode `open()` gives a file it creates: 0o666 less the umask."""
  return 0o666 & ~umask()


@contextlib.contextmanager
def _uploading(path, suffix: str | None) -> Iterator[pathlib.Path]:
  """`replacing` of an object: a local temporary, uploaded whole onto ``path`` on success."""
  folder = pathlib.Path(tempfile.mkdtemp(prefix=".upload."))
  tmp = folder / ("object" + (path.suffix if suffix is None else suffix))
  try:
    yield tmp
    _upload(path, tmp.read_bytes())
  except OSError as e:
    if isinstance(e, errors.UserError):  # the block's own, already saying what failed
      raise
    raise write_error(path, e) from e
  finally:
    shutil.rmtree(folder, ignore_errors=True)


def _upload(path, data: bytes) -> None:
  """One whole-object write of ``data`` (`WriteError` when the store refuses it)."""
  try:
    path.write_bytes(data)
  except Exception as e:  # pylint: disable=broad-except  (the client's HTTP errors too)
    raise write_error(path, e) from e


def fsync(path: pathlib.Path) -> None:
  """Flush ``path`` (a file or a folder) to the disk."""
  fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if path.is_dir() else 0))
  try:
    os.fsync(fd)
  finally:
    os.close(fd)


def _remove_stale(path: pathlib.Path) -> None:
  """Delete the temporaries of ``path`` left by processes of this host that no longer run."""
  head = f".{path.name}."
  for tmp in path.parent.glob(glob.escape(head) + "*@" + glob.escape(_HOST) + ".*"):
    pid = tmp.name[len(head):].split("@", 1)[0]
    if pid.isdigit() and not running(int(pid)):
      tmp.unlink(missing_ok=True)


def running(pid: int) -> bool:
  """Whether process ``pid`` of this host runs."""
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # another user's process
    return True
  return True


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
  if paths.is_remote(path):
    return _upload(paths.as_path(path), data)
  with replacing(path) as tmp:
    tmp.write_bytes(data)


def write_text(path: str | os.PathLike, text: str) -> None:
  if paths.is_remote(path):
    return _upload(paths.as_path(path), text.encode())
  with replacing(path) as tmp:
    tmp.write_text(text)
