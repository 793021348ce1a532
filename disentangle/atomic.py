"""Atomic file writes: the one place that writes a file so that a kill never leaves half of it.

Every writer of the library (configs, metrics logs, evaluation JSON, reports, pictures, caches,
downloads) goes through :func:`write_text`, :func:`write_bytes` or :func:`replacing`: the content
goes to a temporary file in the target's folder, then ``os.replace`` renames it onto the target
(atomic on POSIX file systems), so a reader sees the old file or the new one, never a mix.

A write that fails with an ``OSError`` (a full disk: ``ENOSPC``; a quota, a read-only or lost
file system) raises :class:`WriteError`, one line naming the path and the cause; the target keeps
its old content and no temporary is left. The run's other writers (``train.writers``, the
checkpoints) raise the same error, which the command line prints as one line.
"""
from __future__ import annotations

import contextlib
import errno
import os
import pathlib
import tempfile
from typing import Iterator


class WriteError(OSError):
  """A file of the run could not be written: one line naming the path and the cause."""


def write_error(path, e: BaseException) -> WriteError:
  """The `WriteError` of a failed write of ``path`` (``e``: the error that stopped it)."""
  code = getattr(e, "errno", None)
  if code:
    cause = f"{os.strerror(code)} ({errno.errorcode.get(code, code)})"
  else:
    cause = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
  err = WriteError(f"cannot write {path}: {cause}; the files written before are intact, the "
                   "same command resumes once the cause is fixed")
  err.errno = code
  return err


@contextlib.contextmanager
def replacing(path: str | os.PathLike, suffix: str | None = None) -> Iterator[pathlib.Path]:
  """Yield a temporary path beside ``path``; on success rename it onto ``path``, else delete it.

  ``suffix`` (default: ``path``'s own) serves writers that pick a format by extension (PIL
  reads ``.png``). ``np.save`` appends ``.npy`` to a name without it: give it an open file.
  """
  path = pathlib.Path(path)
  try:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                               suffix=path.suffix if suffix is None else suffix)
    os.close(fd)
  except OSError as e:
    raise write_error(path, e) from e
  tmp = pathlib.Path(tmp)
  try:
    yield tmp
    os.replace(tmp, path)
  except BaseException as e:
    tmp.unlink(missing_ok=True)
    if isinstance(e, OSError) and not isinstance(e, WriteError):
      raise write_error(path, e) from e
    raise


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
  with replacing(path) as tmp:
    tmp.write_bytes(data)


def write_text(path: str | os.PathLike, text: str) -> None:
  with replacing(path) as tmp:
    tmp.write_text(text)
