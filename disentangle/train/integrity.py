"""What a checkpoint is checked against before it is restored: its files' checksums, its values.

**Checksums.** Orbax writes a step's files into its folder and then marks the step complete: it
renames the temporary folder (on a disk) or writes ``commit_success.txt`` (on a bucket). The
temporary-path classes of `temporary_path_class` write ``checksums.json`` (`NAME`: each file's
size and SHA-256) between the two, atomically (`disentangle.atomic`), after orbax's last update
of the step's ``_CHECKPOINT_METADATA``: every complete step holds the size and digest of every
file it had when it was saved (the commit marker aside), and a kill before it leaves an
incomplete step, ignored as ever.

`verify` compares a step folder with its manifest before a restore and raises `Damaged` naming
the first file that is missing, has another size or other bytes (or a manifest that does not
read). Each save records in the step's ``_CHECKPOINT_METADATA`` that the manifest exists
(`CLAIM`, orbax's custom metadata), so a step whose manifest was deleted is damaged, while a
step saved before manifests existed (no manifest, no claim) is `LEGACY`: restored unchecked (the
restored state is still checked finite, `disentangle.train.checkpoint`).

Both run on disks and buckets (``gs://``, through fsspec: one listing of the step, each object
read once).

**Values.** `nonfinite_leaf` names the first floating leaf of a state that holds NaN/Inf: numpy
over arrays in the host's memory (the CPU backend), else one program over the state on its
devices and one small read back. The trainer saves finite states only, so a restored state that
is not comes from a damaged or foreign checkpoint.

What writing and checking cost beside a save: ``benchmarks/checkpoint_checks.py``.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import pathlib
import time

from etils import epath
import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from orbax.checkpoint._src.metadata import checkpoint as step_metadata

from disentangle import atomic
from disentangle import errors
from disentangle import paths

NAME = "checksums.json"
CLAIM = {"checksums": NAME}  # the step's custom metadata: its manifest was written
LEGACY = "legacy"            # `verify` of a step saved before manifests (nothing checked)
CHECKED = "checked"
_METADATA = "_CHECKPOINT_METADATA"  # orbax's step metadata (holds the claim)
_UNLISTED = {NAME, "commit_success.txt"}  # written after the manifest (the step's commit marker)
_CHUNK = 1 << 22


class Damaged(errors.UserError):
  """A step's files differ from its manifest: the message names the file and what differs."""


def _remote(folder) -> bool:
  return paths.is_remote(os.fspath(folder))


def _files(folder) -> dict[str, int]:
  """Size of every file under ``folder`` by its path relative to it (``/``-separated)."""
  if not _remote(folder):
    root = pathlib.Path(os.fspath(folder))
    return {p.relative_to(root).as_posix(): p.stat().st_size
            for p in root.rglob("*") if p.is_file()}
  fs, root = paths.filesystem(folder)
  fs.invalidate_cache(root)  # other processes write the bucket
  root = root.rstrip("/")
  return {key[len(root) + 1:]: int(info["size"])
          for key, info in fs.find(root, detail=True).items()
          if info.get("type", "file") == "file" and key.startswith(root + "/")}


def _open(folder, rel: str):
  if not _remote(folder):
    return open(pathlib.Path(os.fspath(folder)) / rel, "rb")
  fs, root = paths.filesystem(folder)
  return fs.open(f"{root.rstrip('/')}/{rel}", "rb")


def _digest(folder, rel: str) -> str:
  h = hashlib.sha256()
  with _open(folder, rel) as f:
    while chunk := f.read(_CHUNK):
      h.update(chunk)
  return h.hexdigest()


def _read(folder, rel: str) -> bytes:
  with _open(folder, rel) as f:
    return f.read()


def write(folder) -> dict:
  """Writes the manifest of every file now in step ``folder``; returns it."""
  files = {rel: {"size": size, "sha256": _digest(folder, rel)}
           for rel, size in sorted(_files(folder).items()) if rel not in _UNLISTED}
  record = {"format": 1, "files": files}
  atomic.write_text(f"{os.fspath(folder).rstrip('/')}/{NAME}", json.dumps(record, indent=1))
  return record


def verify(folder) -> str:
  """`CHECKED` when every file of step ``folder``'s manifest is there with its size and digest,
  `LEGACY` for a step saved without one (module docstring); else `Damaged`, naming the file."""
  sizes = _files(folder)
  if NAME not in sizes:
    if _claims_manifest(folder, sizes):
      raise Damaged(f"{NAME} is missing (its {_METADATA} says it was written)")
    return LEGACY
  try:
    listed = json.loads(_read(folder, NAME))["files"]
    listed = {rel: (int(v["size"]), str(v["sha256"])) for rel, v in listed.items()}
  except (ValueError, KeyError, TypeError, AttributeError) as e:
    raise Damaged(f"{NAME} does not read as a manifest ({type(e).__name__})") from None
  for rel, (size, _) in sorted(listed.items()):
    if rel not in sizes:
      raise Damaged(f"{rel} is missing (listed in {NAME})")
    if sizes[rel] != size:
      raise Damaged(f"{rel} holds {sizes[rel]:,} bytes, {size:,} when saved")
  for rel, (_, digest) in sorted(listed.items()):
    if _digest(folder, rel) != digest:
      raise Damaged(f"{rel} differs from when saved (SHA-256 in {NAME})")
  return CHECKED


def _claims_manifest(folder, sizes: dict) -> bool:
  """Whether the step's orbax metadata records a manifest (`CLAIM`); False where it does not read
  (a step of an orbax that wrote none)."""
  if _METADATA not in sizes:
    return False
  try:
    custom = json.loads(_read(folder, _METADATA)).get("custom_metadata") or {}
  except (ValueError, AttributeError):
    return False
  return custom.get("checksums") == NAME


class _WritesManifest:
  """Mixed into orbax's temporary-path class of the checkpoint folder: the step folder's
  `finalize` writes the manifest after orbax's update of its metadata and before the step is
  marked complete. Its items' folders (``default``, ``state``, ``record``) are finalized as
  before, inside it."""

  async def finalize(self):
    if self.get_final().name.isdigit():  # a step (orbax's default step names), not an item
      store, self._checkpoint_metadata_store = self._checkpoint_metadata_store, None
      if store is not None:  # what orbax's finalize does first: the commit time, written
        await asyncio.to_thread(store.wait_until_finished)
        await asyncio.to_thread(
            store.update, file_path=step_metadata.step_metadata_file_path(self.get()),
            commit_timestamp_nsecs=time.time_ns())
        await asyncio.to_thread(store.wait_until_finished)
      await asyncio.to_thread(write, self.get())
    await super().finalize()


_CLASSES = {base: type(f"Manifest{base.__name__}", (_WritesManifest, base), {})
            for base in (ocp.path.atomicity.AtomicRenameTemporaryPath,
                         ocp.path.atomicity.CommitFileTemporaryPath)}


def temporary_path_class(directory) -> type:
  """The temporary-path class orbax would use for ``directory`` (a rename on a disk, a commit
  file on a bucket), writing the manifest before it marks a step complete."""
  base = ocp.path.atomicity_defaults.get_default_temporary_path_class(epath.Path(directory))
  return _CLASSES[base]


def nonfinite_leaf(state) -> str | None:
  """The path (``jax.tree_util.keystr``) of the first floating leaf of ``state``'s parameters
  holding NaN or Inf, or None when every one is finite (the optimiser state may hold an infinity
  by design: ``optax.contrib.reduce_on_plateau``'s best value)."""
  leaves = [(p, x) for p, x in jax.tree_util.tree_leaves_with_path(getattr(state, "params", state))
            if jnp.issubdtype(x.dtype, jnp.floating)]
  if not leaves:
    return None
  arrays = [x for _, x in leaves]
  if all(_on_host(x) for x in arrays):  # numpy reads them in place: nothing to compile
    finite = np.array([np.isfinite(np.asarray(x)).all() for x in arrays])
  else:
    sharding = getattr(arrays[0], "sharding", None)
    out = (jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec())
           if isinstance(sharding, jax.sharding.NamedSharding) else None)
    finite = np.asarray(jax.device_get(jax.jit(_finite_leaves, out_shardings=out)(arrays)))
  bad = np.flatnonzero(~finite)
  return jax.tree_util.keystr(leaves[bad[0]][0]) if bad.size else None


def _on_host(x) -> bool:
  """A numpy array, or a jax array wholly in this process's CPU memory."""
  if not isinstance(x, jax.Array):
    return True
  return x.is_fully_addressable and all(d.platform == "cpu" for d in x.sharding.device_set)


def _finite_leaves(arrays):
  return jnp.stack([jnp.all(jnp.isfinite(x)) for x in arrays])
