"""The one path layer of a run: a local folder or a bucket URL (``gs://bucket/path``).

A workdir, a run directory, a ``reproduce`` or slot workdir and a data folder may be given as a
URL. `as_path` turns what a user typed into the path object every module then uses:

- a local path (no ``scheme://``, or ``file://``) stays a `pathlib.Path`, and every write goes
  through today's code (``disentangle.atomic``: a temporary beside the target, ``fsync``,
  ``os.replace``; ``fcntl`` for the workdir lock);
- a URL becomes an `etils.epath.Path` (what orbax and TFDS use): ``gs://`` through fsspec +
  gcsfs when TensorFlow is absent (gcsfs honours ``STORAGE_EMULATOR_HOST``), through
  ``tf.io.gfile`` when TensorFlow is installed. The checkpoints' arrays are written by orbax
  through tensorstore's own GCS client, which reads ``TENSORSTORE_GCS_HTTP_URL`` in place of
  ``STORAGE_EMULATOR_HOST``.

What a write promises on a bucket is said where it is made: `disentangle.atomic` (whole
objects), `disentangle.train.writers` (the metrics lines and TensorBoard's events, each object
rewritten whole), `disentangle.reproduce.run` (the workdir lock), `disentangle.train.checkpoint`
(orbax's commit marker). A bucket has no folders: ``mkdir`` of a URL creates nothing and a
folder exists once an object lies under it.
"""
from __future__ import annotations

import json
import os
import pathlib
import re
from typing import Union

from etils import epath

Path = Union[pathlib.Path, epath.Path]

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_remote(path) -> bool:
  """Whether ``path`` names an object store (``gs://...``; any ``scheme://`` but ``file://``)."""
  text = path if isinstance(path, str) else os.fspath(path)
  return bool(_SCHEME.match(text)) and not text.startswith("file://")


def as_path(path) -> Path:
  """``path`` as the path object of its place: `pathlib.Path` for a local path (``~`` is not
  expanded), `epath.Path` for a URL (a path object of that kind is returned as is)."""
  if isinstance(path, pathlib.Path):
    return path
  text = os.fspath(path)
  if is_remote(text):
    return path if isinstance(path, epath.Path) else epath.Path(text)
  return pathlib.Path(text[len("file://"):] if text.startswith("file://") else text)


def read_json(path):
  """The JSON value of the file at ``path`` (local or a URL); {} when it is missing, unreadable
  or not JSON (a record not written yet)."""
  try:
    return json.loads(as_path(path).read_text())
  except (OSError, ValueError):
    return {}


def filesystem(path):
  """(the fsspec file system, its path) of a URL: the calls epath does not offer (an
  exclusive create, a cache refresh)."""
  import fsspec  # pylint: disable=g-import-not-at-top
  return fsspec.core.url_to_fs(os.fspath(path))
