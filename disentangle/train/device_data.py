"""Training sets on the device: placed once in compact form, each batch gathered inside the step.

``config.dataset.placement`` (one of ``config.PLACEMENTS``, checked with the config's validation;
``'auto'`` resolved by ``config.resolve`` from the sizes this module measures):

- ``'device'``: the set's compact images (``dataset.compact_images()``: uint8; dSprites
  bit-packed, 377 MB for the 737,280 images; the renderer draws the whole set first) and the
  side-information tables the method asks for (targets, attributes: int tables of every row) are
  placed once, replicated over the mesh, and shared by every run of the program. Each step
  then receives only the row indices of its batch (``input_pipeline.RowSource``: "index",
  "labelled_index" and, for pairs, "pair_index" with the small "changed" mask, ``[B]`` or
  ``[runs, B]``, sharded like the batches were) and the compiled
  step gathers and converts them (:func:`gather`), bit for bit the batch of the host pipeline.
  A set drawn per sample (the colour, noisy and scream dSprites under
  ``dataset.variant_draw='per_sample'``) places dSprites' packed sprites (and the scream
  painting, float32) and the step paints them with the rows' keys ("image_key", ...,
  `input_pipeline`), the draw of ``dsprites_draws.paint`` in ``jax.numpy``, bit for bit the host's
  numpy one.
  A set without a compact form (TFDS, a dataset object without ``compact_images``) or one that
  does not fit in the device's free memory is a ``ConfigError`` naming the field and the sizes
  (one line and exit status 2 from the entry points), raised before anything is created.
- ``'host'``: the prefetch thread loads, converts and copies each batch (``input_pipeline``).
- ``'auto'`` (default; ``config.resolve``): the device when the compact set takes at most
  ``config.DEVICE_SHARE`` of a device's memory (``memory_stats()['bytes_limit']``), else the host.
  On the CPU backend the "device" is the host's memory (``memory_stats`` is None there): the
  budget is ``DEVICE_SHARE`` of the physical memory over the local devices (each holds a copy),
  and only sets already held in memory are placed; a set that would first be rendered or decoded whole (the dSprites
  renderer, image folders) stays on the lazy host pipeline, which a short CPU run does not
  wait for.

With several processes each one places the set on its own devices (the decision rests on the
local devices' memory, the same on every host of a homogeneous job).
"""
from __future__ import annotations

import dataclasses
import os

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
import numpy as np

from disentangle import config as config_lib
from disentangle.data.datasets import dsprites_draws
from disentangle.data.labels import batch_spec as batch_spec_lib
from disentangle.train import input_pipeline

_MB = 1 << 20


@dataclasses.dataclass(frozen=True)
class Layout:
  """What :func:`gather` needs to know besides the arrays (static in the compiled step)."""
  encoding: str                       # data.arrays.ENCODINGS
  image_shape: tuple[int, int, int]   # of the decoded stored rows
  targets: bool                       # the batch has "targets" (the table holds spec.targets)
  attributes: bool
  labelled: bool
  pairs: bool = False                 # the batch has "image_pair" and "changed" (rows carry them)
  paint: str = ""                     # a set drawn per sample: its name (dsprites_draws.NAMES)


@dataclasses.dataclass
class DeviceData:
  """The placed arrays (``placed``: "images"; "levels" for uint8 images, "rows" for a set read
  through a row map, the "targets" / "attributes" tables when asked for) and their
  :class:`Layout`."""
  placed: dict
  layout: Layout

  def compose(self, step, batch_sharding):
    """``step(state, batch, *rest)`` -> ``(state, rows, placed, *rest)``: the batch gathered
    from ``placed`` and laid out as ``batch_sharding`` first."""
    layout = self.layout

    def composed(state, rows, placed, *rest):
      batch = gather(placed, rows, layout)
      return step(state, jax.lax.with_sharding_constraint(batch, batch_sharding), *rest)

    return composed


def decode(x: jax.Array, encoding: str, batch_shape: tuple[int, ...],
           image_shape: tuple[int, ...], levels: jax.Array | None = None) -> jax.Array:
  """Compact rows ``[*batch_shape, *stored row]`` -> float32 images ``[*batch_shape, H, W, C]``:
  the values of the datasets' ``get_images`` (``data.arrays.ENCODINGS``).

  'uint8' looks each byte up in ``levels`` (the host conversion of the 256 levels) rather than
  computing it: XLA turns a division by a constant into a multiplication by its reciprocal,
  which moves the last bit of x / 255.
  """
  if encoding == "bits":  # np.packbits order: the first pixel in the most significant bit
    shifts = jnp.arange(7, -1, -1, dtype=jnp.uint8)
    x = ((x[..., None] >> shifts) & jnp.uint8(1)).astype(jnp.float32)
  elif encoding == "uint8":
    x = levels.at[x.astype(jnp.int32)].get(mode="promise_in_bounds")
  elif encoding != "float32":
    raise ValueError(f"unknown image encoding {encoding!r}")
  return x.reshape(tuple(batch_shape) + tuple(image_shape))


def gather(placed: dict, rows: dict, layout: Layout) -> dict:
  """The batch of ``rows`` (``input_pipeline`` sources' ``local_rows``) from the placed set:
  the keys and values of the host pipeline's batch."""

  def images(index, keys):
    if "rows" in placed:
      index = placed["rows"].at[index].get(mode="promise_in_bounds")
    x = placed["images"].at[index].get(mode="promise_in_bounds")
    x = decode(x, layout.encoding, index.shape, layout.image_shape, placed.get("levels"))
    if layout.paint:
      x = dsprites_draws.paint(jnp, layout.paint, x, keys, placed.get("painting"))
    return x

  def table(name, index):
    return placed[name].at[index].get(mode="promise_in_bounds").astype(jnp.int32)

  index = rows["index"]
  batch = {"image": images(index, rows.get("image_key"))}
  if layout.targets:
    batch["targets"] = table("targets", index)
  if layout.attributes:
    batch["attributes"] = table("attributes", index)
  if layout.labelled:
    lidx = rows["labelled_index"]
    batch["labelled_image"] = images(lidx, rows.get("labelled_key"))
    batch["labelled_targets"] = (table("targets", lidx) if layout.targets else
                                 jnp.zeros(lidx.shape + (0,), jnp.int32))
  if layout.pairs:
    batch["image_pair"] = images(rows["pair_index"], rows.get("pair_key"))
    batch["changed"] = rows["changed"]
  return batch


def _narrow(table: np.ndarray) -> np.ndarray:
  """An int table in the smallest signed type that holds its values (int32 again in the step)."""
  for dtype in (np.int8, np.int16):
    info = np.iinfo(dtype)
    if table.size == 0 or (table.min() >= info.min and table.max() <= info.max):
      return table.astype(dtype)
  return table.astype(np.int32)


def _tables(dataset, spec: batch_spec_lib.BatchSpec) -> dict[str, np.ndarray]:
  every = np.arange(dataset.num_examples)
  out = {}
  if spec.targets:
    out["targets"] = _narrow(np.asarray(dataset.targets_of(every, spec.targets)))
  if spec.attributes:
    out["attributes"] = _narrow(np.asarray(dataset.attributes_of(every, spec.attributes)))
  return out


def _table_bytes(dataset, spec) -> int:
  """An upper bound of the tables' size (int32 columns) before they are built."""
  return 4 * int(dataset.num_examples) * (len(spec.targets) + len(spec.attributes))


def memory_per_device(devices) -> tuple[int, int]:
  """(limit, free) bytes of one of ``devices``: ``memory_stats`` where the backend reports it,
  else the host's physical (available) memory shared by the local devices."""
  stats = devices[0].memory_stats() or {}
  if "bytes_limit" in stats:
    limit = int(stats["bytes_limit"])
    return limit, limit - int(stats.get("bytes_in_use", 0))
  share = max(1, len(devices))
  return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // share, _available() // share


def _available() -> int:
  """Bytes of host memory available to a new allocation (``MemAvailable``, else free pages)."""
  try:
    with open("/proc/meminfo", encoding="ascii") as f:
      for line in f:
        if line.startswith("MemAvailable:"):
          return int(line.split()[1]) * 1024
  except (OSError, ValueError, IndexError):
    pass
  return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def on_device(placement: str, dataset, compact, spec, devices) -> bool:
  """Whether the set goes to the device: ``placement`` (a validated ``dataset.placement``,
  `config.PLACEMENTS`) with ``'auto'`` resolved (module docstring); ConfigError for ``'device'``
  when it cannot."""
  if placement == "host":
    return False
  name = getattr(dataset, "name", "") or type(dataset).__name__
  if compact is None:
    if placement == "device":
      raise config_lib.ConfigError(
          f"config field 'dataset.placement' is 'device' but the training set {name} has no "
          f"compact in-memory form (TFDS is read from the host, a dSprites variant drawn per "
          f"image painted there): use 'auto' or 'host'")
    return False
  size = compact.nbytes + _table_bytes(dataset, spec)
  limit, free = memory_per_device(devices)
  if placement == "device":
    if size > free:
      raise config_lib.ConfigError(
          f"config field 'dataset.placement' is 'device' but the training set {name} takes "
          f"{size / _MB:.1f} MB in compact form, more than the {free / _MB:.1f} MB free on "
          f"each device ({devices[0].device_kind}): use 'auto' or 'host'")
    return True
  return config_lib.resolve("dataset.placement", placement, devices[0].platform, size=size,
                            limit=limit, in_memory=compact.in_memory) == "device"


def place(dataset, compact, spec, mesh) -> DeviceData:
  """The compact set and its tables on every device of ``mesh`` (replicated); each process
  copies to its own devices."""
  arrays = {"images": np.asarray(compact.load())}
  if compact.rows is not None:
    arrays["rows"] = np.asarray(compact.rows, np.int32)
  if compact.levels is not None:
    arrays["levels"] = np.asarray(compact.levels, np.float32)
  drawn = input_pipeline.draws_per_sample(dataset)
  if drawn and dataset.painting32 is not None:
    arrays["painting"] = np.asarray(dataset.painting32, np.float32)
  arrays.update(_tables(dataset, spec))
  sharding = NamedSharding(mesh, P())
  mine = sorted(sharding.addressable_devices, key=lambda d: d.id)

  def replicated(v):  # a copy on each of this process's devices (no cross-process check)
    return jax.make_array_from_single_device_arrays(
        v.shape, sharding, [jax.device_put(v, d) for d in mine])

  placed = {k: replicated(v) for k, v in arrays.items()}
  layout = Layout(compact.encoding,
                  tuple(dataset.sprite_shape if drawn else dataset.image_shape),
                  bool(spec.targets), bool(spec.attributes), spec.labelled is not None,
                  spec.pairs is not None, dataset.name if drawn else "")
  return DeviceData(jax.block_until_ready(placed), layout)


def prepare(config, dataset, spec, source, mesh):
  """``(source, data)``: the host pipeline's ``source`` and None, or the source of its rows
  (``input_pipeline.RowSource``) and the placed :class:`DeviceData`.

  Raises:
    ConfigError: ``dataset.placement = 'device'`` for a set that cannot be placed.
  """
  compact_fn = getattr(dataset, "compact_images", None)
  compact = compact_fn() if compact_fn is not None else None
  devices = [d for d in mesh.devices.flat if d.process_index == jax.process_index()]
  if not on_device(config.dataset.placement, dataset, compact, spec, devices):
    return source, None
  return input_pipeline.RowSource(source), place(dataset, compact, spec, mesh)
