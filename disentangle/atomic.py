"""Atomic file writes: the one place that writes a file so that a kill never leaves half of it.

Every writer of the library (configs, metrics logs, evaluation JSON, reports, pictures, caches,
downloads) goes through :func:`write_text`, :func:`write_bytes` or :func:`replacing`: the content
goes to a temporary file in the target's folder, then ``os.replace`` renames it onto the target
(atomic on POSIX file systems), so a reader sees the old file or the new one, never a mix.
"""
from __future__ import annotations

import contextlib
import os
import pathlib
import tempfile
from typing import Iterator


@contextlib.contextmanager
def replacing(path: str | os.PathLike, suffix: str | None = None) -> Iterator[pathlib.Path]:
  """Yield a temporary path beside ``path``; on success rename it onto ``path``, else delete it.

  ``suffix`` (default: ``path``'s own) serves writers that pick a format by extension (PIL
  reads ``.png``). ``np.save`` appends ``.npy`` to a name without it: give it an open file.
  """
  path = pathlib.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                             suffix=path.suffix if suffix is None else suffix)
  os.close(fd)
  tmp = pathlib.Path(tmp)
  try:
    yield tmp
    os.replace(tmp, path)
  except BaseException:
    tmp.unlink(missing_ok=True)
    raise


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
  with replacing(path) as tmp:
    tmp.write_bytes(data)


def write_text(path: str | os.PathLike, text: str) -> None:
  with replacing(path) as tmp:
    tmp.write_text(text)
