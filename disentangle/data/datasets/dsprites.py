"""dSprites (Matthey et al. 2017): 737280 64x64 binary images of 2D shapes on a full factor grid.

Factors (``latents_classes`` columns 1..5 of the official file; column 0, color, has one value):

=========== ====== ===========================================================================
factor      values latent value of class k
=========== ====== ===========================================================================
shape       3      k + 1 (1 square, 2 ellipse, 3 heart)
scale       6      ``linspace(0.5, 1, 6)``
orientation 40     ``linspace(0, 2 pi, 40)``: both ends included, step 2 pi / 39, so classes 0
                   and 39 draw the same image; confirmed on the 12 real latents, which hold the
                   values 0 and 6.2831853 = 2 pi and are all multiples of 2 pi / 39.
pos_x       32     ``linspace(0, 1, 32)``
pos_y       32     ``linspace(0, 1, 32)``
=========== ====== ===========================================================================

Index ``i`` of the official file has the mixed-radix digits (shape, scale, orientation, pos_x,
pos_y), pos_y fastest, as in disentanglement_lib's ``factor_bases``.

``DSprites`` is backed by the official npz when it is in the data folder (md5 checked; images
decompressed once into a bit-packed ``.npy`` in ``files.resolve_cache_dir()``, memory-mapped
afterwards), or by the
procedural renderer of ``dsprites_render`` (``source='render'``, or ``'auto'`` when the file is
missing), which warns that scores are then not comparable with published numbers.

The whole rendered set (``packed_images``, what the device placement of ``train.device_data``
reads) is drawn once per data folder: the first program renders it (about a minute of one core)
and writes it atomically to ``<data folder>/dsprites/`` as a ``.npy`` named by the renderer's
``VERSION`` and the file's sha256 (``rendered_cache_name``); later programs check the sha256 and
memory-map it in seconds. A file whose checksum or shape differs is removed and the set rendered
again, with a warning. When the data folder is not writable the set stays in memory and every
program renders it again (one warning says so). The images stay marked as rendered (``source``
'render'), so scores remain flagged as not comparable with published numbers.
"""
from __future__ import annotations

import hashlib
import logging
import os
import pathlib
import sys
import warnings
import zipfile

import numpy as np

from disentangle import atomic
from disentangle.data import arrays
from disentangle.data import files
from disentangle.data.datasets import dsprites_render

_LOG = logging.getLogger(__name__)

FACTOR_NAMES = ("shape", "scale", "orientation", "pos_x", "pos_y")
FACTOR_SIZES = (3, 6, 40, 32, 32)
NUM_EXAMPLES = int(np.prod(FACTOR_SIZES))  # 737280
IMAGE_SHAPE = (64, 64, 1)
FACTOR_VALUES = (np.array([1.0, 2.0, 3.0]), np.linspace(0.5, 1.0, 6),
                 np.linspace(0.0, 2.0 * np.pi, 40), np.linspace(0.0, 1.0, 32),
                 np.linspace(0.0, 1.0, 32))
_BASES = np.array([int(np.prod(FACTOR_SIZES[k + 1:])) for k in range(5)], np.int64)


class ProceduralDataWarning(UserWarning):
  """Images are procedurally rendered, not read from the official dataset file."""


_PACKAGE = str(pathlib.Path(__file__).resolve().parents[2])  # the disentangle package's folder


def _caller_outside_package() -> int:
  """The ``stacklevel`` of a warning raised by this module's caller that names the first frame
  outside the package (the user's line that asked for the data), as Python 3.12's
  ``skip_file_prefixes``."""
  frame, level = sys._getframe(1), 1  # pylint: disable=protected-access
  while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(
      _PACKAGE + os.sep):
    frame, level = frame.f_back, level + 1
  return level


def factors_to_index(factors) -> np.ndarray:
  """Factor classes [..., 5] -> index in the official file (pos_y fastest)."""
  factors = np.asarray(factors, np.int64)
  if factors.shape[-1] != 5 or np.any(factors < 0) or np.any(factors >= FACTOR_SIZES):
    raise ValueError(f"factors must be [..., 5] classes within {FACTOR_SIZES}")
  return factors @ _BASES


def index_to_factors(indices) -> np.ndarray:
  """Index in the official file -> factor classes [..., 5]."""
  indices = np.asarray(indices, np.int64)
  if np.any(indices < 0) or np.any(indices >= NUM_EXAMPLES):
    raise IndexError(f"dSprites indices must lie in [0, {NUM_EXAMPLES})")
  return (indices[..., None] // _BASES) % np.asarray(FACTOR_SIZES)


def factors_to_latents(factors) -> tuple[np.ndarray, np.ndarray]:
  """Factor classes [n, 5] -> official (``latents_classes``, ``latents_values``), both [n, 6]."""
  factors = np.asarray(factors, np.int64)
  classes = np.concatenate([np.zeros_like(factors[:, :1]), factors], axis=1)
  values = np.stack([np.ones(len(factors))] +
                    [FACTOR_VALUES[k][factors[:, k]] for k in range(5)], axis=1)
  return classes, values


def latents_values_to_factors(values) -> np.ndarray:
  """Official ``latents_values`` [n, 6] -> factor classes [n, 5] (nearest grid value)."""
  values = np.asarray(values, np.float64)
  return np.stack([np.abs(values[:, k + 1, None] - FACTOR_VALUES[k][None]).argmin(1)
                   for k in range(5)], axis=1)


def render_factors(factors) -> np.ndarray:
  """Factor classes [n, 5] -> rendered uint8 images [n, 64, 64] in {0, 1}."""
  return dsprites_render.render_latents(factors_to_latents(factors)[1])


def render_packed(indices, chunk: int = 4096) -> np.ndarray:
  """Rendered images of rows ``indices`` (official order) in ``packbits`` form [n, 64, 8]."""
  indices = np.asarray(indices, np.int64)
  out = np.empty((len(indices), 64, 8), np.uint8)
  for start in range(0, len(indices), chunk):
    part = indices[start:start + chunk]
    out[start:start + len(part)] = np.packbits(render_factors(index_to_factors(part)), axis=-1)
  return out


def _read_exact(f, n: int) -> bytes:
  parts, got = [], 0
  while got < n:
    part = f.read(n - got)
    if not part:
      raise EOFError(f"expected {n} bytes, got {got}")
    parts.append(part)
    got += len(part)
  return b"".join(parts)


def read_packed_images(npz_path: str | os.PathLike, chunk: int = 4096) -> np.ndarray:
  """Streams ``imgs`` ([N, 64, 64] uint8 in {0, 1}) out of an npz into ``packbits`` form [N, 64, 8].

  Peak memory stays at the packed size (377 MB for the full file), not the 3 GB of ``imgs``.
  """
  npz_path = pathlib.Path(npz_path)
  try:
    with zipfile.ZipFile(npz_path) as zf, zf.open("imgs.npy") as f:
      version = np.lib.format.read_magic(f)
      read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                     else np.lib.format.read_array_header_2_0)
      shape, fortran, dtype = read_header(f)
      if fortran or dtype != np.uint8 or len(shape) != 3 or shape[1:] != (64, 64):
        raise files.DataFileError(f"{npz_path}: 'imgs' must be C-ordered uint8 [N, 64, 64], got "
                                  f"{dtype} {shape} fortran={fortran}")
      out = np.empty((shape[0], 64, 8), np.uint8)
      for start in range(0, shape[0], chunk):
        n = min(chunk, shape[0] - start)
        block = np.frombuffer(_read_exact(f, n * 4096), np.uint8).reshape(n, 64, 64)
        if block.max(initial=0) > 1:
          raise files.DataFileError(f"{npz_path}: 'imgs' must hold 0/1 values")
        out[start:start + n] = np.packbits(block, axis=-1)
  except (KeyError, zipfile.BadZipFile, EOFError, ValueError) as e:
    raise files.DataFileError(f"{npz_path}: not a readable dSprites npz ({e})") from e
  return out


def _cached_packed(npz_path: pathlib.Path) -> np.ndarray:
  """Packed images of the (md5-verified) official file, via a memory-mapped .npy cache.

  The cache lives in ``files.resolve_cache_dir()``; its name carries the file's md5, so it can
  only hold the official images. Without a writable cache folder the images stay in memory.
  """
  cache = files.resolve_cache_dir() / "dsprites_imgs_packbits_md5_7da33b31.npy"
  if cache.is_file():
    try:
      packed = np.load(cache, mmap_mode="r")
      if packed.shape == (NUM_EXAMPLES, 64, 8) and packed.dtype == np.uint8:
        return packed
    except (OSError, ValueError) as e:
      _LOG.warning("ignoring unreadable cache %s (%s)", cache, e)
  _LOG.info("decompressing dSprites images from %s (once; cached in %s)", npz_path, cache)
  packed = read_packed_images(npz_path)
  try:
    with atomic.replacing(cache) as tmp, open(tmp, "wb") as f:
      np.save(f, packed)
    return np.load(cache, mmap_mode="r")
  except OSError as e:
    _LOG.info("could not write the cache %s (%s); keeping the images in memory", cache, e)
    return packed


def rendered_cache_name(digest: str) -> str:
  """File name of the rendered set whose ``.npy`` file has sha256 ``digest`` (this renderer)."""
  return f"dsprites_rendered_v{dsprites_render.VERSION}_sha256-{digest}.npy"


class _Hashing:
  """A write-only file that hashes what it is given (``np.save`` into it: the ``.npy``'s sha256)."""

  def __init__(self):
    self.hash = hashlib.sha256()

  def write(self, data) -> int:
    self.hash.update(data)
    return len(data)


def npy_sha256(array: np.ndarray) -> str:
  """sha256 of the ``.npy`` file ``np.save`` writes for ``array``, without writing it."""
  out = _Hashing()
  np.save(out, array, allow_pickle=False)
  return out.hash.hexdigest()


def _read_rendered(folder: pathlib.Path) -> np.ndarray | None:
  """The memory-mapped rendered set of a verified cache file in ``folder``, else None (a cache
  file that fails its checksum or holds another shape is removed, with a warning)."""
  head = rendered_cache_name("")[:-len(".npy")]
  for path in sorted(folder.glob(f"{head}*.npy")):
    digest = path.name[len(head):-len(".npy")]
    try:
      files.verify(path, files.DataFile(path.name, "sha256", digest))
      packed = np.load(path, mmap_mode="r")
      if packed.shape == (NUM_EXAMPLES, 64, 8) and packed.dtype == np.uint8:
        _LOG.info("read the rendered dSprites images from %s (not comparable with published "
                  "numbers)", path)
        return packed
      cause = f"holds {packed.dtype} {packed.shape}, not uint8 {(NUM_EXAMPLES, 64, 8)}"
    except (OSError, ValueError) as e:
      cause = str(e).split(". ")[0]
    _LOG.warning("removing the rendered dSprites cache %s and rendering again: %s", path, cause)
    try:
      path.unlink()
    except OSError:
      pass
  return None


def rendered_packed(data_dir: str | os.PathLike | None) -> np.ndarray:
  """Bit-packed rendered images [N, 64, 8] of the whole grid, read from the cache in
  ``data_dir/dsprites`` or rendered and cached there (module docstring); ``data_dir`` None:
  rendered, not cached."""
  folder = None if data_dir is None else pathlib.Path(data_dir) / "dsprites"
  if folder is not None and folder.is_dir():
    packed = _read_rendered(folder)
    if packed is not None:
      return packed
  _LOG.info("rendering the %d dSprites images%s", NUM_EXAMPLES,
            "" if folder is None else f" (once; cached in {folder})")
  packed = render_packed(np.arange(NUM_EXAMPLES))
  if folder is None:
    return packed
  path = folder / rendered_cache_name(npy_sha256(packed))
  try:
    with atomic.replacing(path) as tmp, open(tmp, "wb") as f:
      np.save(f, packed, allow_pickle=False)
    return np.load(path, mmap_mode="r")
  except OSError as e:
    _LOG.warning("cannot cache the rendered dSprites images in %s (%s): they stay in memory and "
                 "the next program renders them again", folder, str(e).split("; ")[0])
    return packed


class IndexedRows:
  """The row interface of an unlabelled training set of ``num_examples`` rows (``DSprites``,
  ``DSpritesUnfair``): no ``labels``, ``len``, and ``_check`` of row indices."""

  @property
  def labels(self) -> None:
    return None

  def __len__(self) -> int:
    return self.num_examples

  def _check(self, indices) -> np.ndarray:
    indices = np.asarray(indices, np.int64)
    if np.any(indices < 0) or np.any(indices >= self.num_examples):
      raise IndexError(f"indices must lie in [0, {self.num_examples})")
    return indices


class FactorTargets:
  """Named supervision (`disentangle.data.labels.supervision`) of a ground-truth set whose
  factors are its target columns and which has no attributes: ``target_names`` are its
  ``factor_names``, ``targets_of`` reads ``factors_of``; ``name`` names the set in errors. The
  factors are dSprites' (``FACTOR_SIZES``, ``FACTOR_NAMES``) unless a subclass says otherwise."""
  name = "dSprites"

  @property
  def factor_sizes(self) -> tuple[int, ...]:
    return FACTOR_SIZES

  @property
  def factor_names(self) -> tuple[str, ...]:
    return FACTOR_NAMES

  @property
  def target_names(self) -> tuple[str, ...]:
    return tuple(self.factor_names)

  @property
  def target_sizes(self) -> dict[str, int]:
    return dict(zip(self.factor_names, self.factor_sizes))

  def targets_of(self, indices, names) -> np.ndarray:
    """int32 [n, K]: the factor classes named ``names`` of rows ``indices``."""
    names = tuple(names)
    unknown = [n for n in names if n not in self.factor_names]
    if unknown:  # KeyError, as the other loaders' targets_of
      raise KeyError(f"{self.name} has no target {unknown}; valid names: "
                     f"{list(self.factor_names)}")
    cols = [list(self.factor_names).index(n) for n in names]
    factors = self.factors_of(np.asarray(indices, np.int64).reshape(-1))
    return factors[:, cols].astype(np.int32)

  @property
  def attribute_names(self) -> tuple[str, ...]:
    return ()

  def attributes_of(self, indices, names) -> np.ndarray:
    if tuple(names):
      raise KeyError(f"{self.name} has no attributes (asked for {list(names)})")
    return np.zeros((np.asarray(indices).size, 0), np.int32)


class DSprites(FactorTargets, IndexedRows):
  """dSprites as a ground-truth dataset (``GroundTruthData``) and a training set.

  Args:
    data_dir: the data folder (holding ``dsprites/<official npz>``, and the rendered set's cache);
      may be None for 'render' (then the whole rendered set is drawn by each program).
    source: 'file' (official npz, error if missing), 'render' (procedural renderer), or 'auto'
      (the file when present or downloadable, else the renderer with a warning).
    allow_download: download the official file when missing (see ``files.fetch``).
    path: an npz in the official format (``imgs``, ``latents_classes``) to read instead of the
      canonical file, without checksum, e.g. a synthetic subset; its rows need not cover the grid.
  """

  def __init__(self, data_dir: str | os.PathLike | None = None, *, source: str = "auto",
               allow_download: bool = True, path: str | os.PathLike | None = None):
    self._packed = None
    self._canonical = False
    self._classes = None  # factor classes [N, 5] of the file's rows (None: the full grid)
    self.path = None
    self._data_dir = data_dir
    if path is not None:
      if source == "render":
        raise ValueError("path= reads a file; it cannot be combined with source='render'")
      self.path = pathlib.Path(path)
    elif source != "render":
      if data_dir is None:
        raise ValueError("data_dir is required unless source='render'")
      try:
        self.path = files.fetch(files.DSPRITES_FILE, data_dir, allow_download)
        self._canonical = True
      except files.MissingDataError as e:
        if source == "file":
          raise
        _LOG.warning("official dSprites file unavailable: %s", str(e).splitlines()[0])
    self.source = "render" if self.path is None else "file"
    if self.source == "render":
      msg = ("dSprites images are procedurally rendered (disentangle.data.datasets.dsprites_render), not "
             "read from the official dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz: metric scores "
             "are NOT comparable with published numbers.")
      # Said once: a Python warning, shown once per process for its place, which is the caller's
      # first line outside the package (the training and the evaluated set of a command share
      # it); the command lines show it as one line (`command_line.exits`).
      warnings.warn(msg, ProceduralDataWarning, stacklevel=_caller_outside_package())
    else:
      self._load_classes()

  def _load_classes(self) -> None:
    try:
      npz = np.load(self.path, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile) as e:
      raise files.DataFileError(f"{self.path}: not a readable dSprites npz ({e})") from e
    with npz:
      if "latents_classes" in npz.files:
        classes = np.asarray(npz["latents_classes"], np.int64)
        if classes.ndim != 2 or classes.shape[1] != 6:
          raise files.DataFileError(f"{self.path}: latents_classes must be [N, 6], got "
                                    f"{classes.shape}")
        factors = classes[:, 1:]
      elif "latents_values" in npz.files:
        factors = latents_values_to_factors(npz["latents_values"])
      else:
        raise files.DataFileError(f"{self.path}: needs 'latents_classes' or 'latents_values'")
    codes = factors_to_index(factors)
    if len(codes) == NUM_EXAMPLES and np.array_equal(codes, np.arange(NUM_EXAMPLES)):
      self._num = NUM_EXAMPLES  # the official ordering: index == code
      return
    if self._canonical:
      raise files.DataFileError(f"{self.path}: rows are not in the official factor order")
    self._num = len(codes)
    self._classes = factors
    self._order = np.argsort(codes, kind="stable")
    self._sorted_codes = codes[self._order]

  def _images_packed(self) -> np.ndarray:
    """Bit-packed images [N, 64, 8] (the canonical file's are cached, see ``_cached_packed``)."""
    if self._packed is None:
      self._packed = _cached_packed(self.path) if self._canonical else read_packed_images(self.path)
      if len(self._packed) != self._num:
        raise files.DataFileError(f"{self.path}: {len(self._packed)} images but {self._num} "
                                  f"latents")
    return self._packed

  # --- training-set interface -------------------------------------------------------------------
  @property
  def num_examples(self) -> int:
    """737280 (the full grid) for the official file and the renderer; for a file given by
    ``path``, its rows."""
    return NUM_EXAMPLES if self.source == "render" else self._num

  @property
  def image_shape(self) -> tuple[int, int, int]:
    """(64, 64, 1)."""
    return IMAGE_SHAPE

  def get_images(self, indices) -> np.ndarray:
    """float32 [n, 64, 64, 1] in {0, 1} for rows ``indices`` (official order for the full grid)."""
    indices = self._check(indices)
    if self.source == "render":
      imgs = dsprites_render.render_latents(factors_to_latents(index_to_factors(indices))[1])
    else:
      imgs = np.unpackbits(self._images_packed()[indices], axis=-1)
    return imgs.astype(np.float32)[..., None]

  def packed_images(self) -> np.ndarray:
    """Bit-packed images [N, 64, 8] of every row; the renderer draws the whole set once per data
    folder (about a minute of one core for the 737280 images, 377 MB; see ``rendered_packed``)
    and the object keeps it."""
    if self.source == "file":
      return self._images_packed()
    if self._packed is None:
      self._packed = rendered_packed(self._data_dir)
    return self._packed

  def compact_images(self) -> arrays.CompactImages:
    """The packed images (encoding 'bits'); rendered on loading for ``source='render'``."""
    return arrays.CompactImages("bits", (self.num_examples, 64, 8), self.packed_images,
                                in_memory=self.source == "file" or self._packed is not None)

  def factors_of(self, indices) -> np.ndarray:
    """Factor classes [n, 5] of rows ``indices``."""
    indices = self._check(indices)
    return index_to_factors(indices) if self._classes is None else self._classes[indices]

  def latents_classes(self, indices) -> np.ndarray:
    """Official ``latents_classes`` [n, 6] (color class 0 first) of rows ``indices``."""
    return factors_to_latents(self.factors_of(indices))[0]

  # --- ground-truth interface (disentangle.data.ground_truth.GroundTruthData) ------------------
  def sample_factors(self, num: int, rng: np.random.Generator) -> np.ndarray:
    """Factor classes [num, 5], uniform over the stored rows (full grid: independent factors)."""
    if self._classes is None:
      return np.stack([rng.integers(0, s, size=num) for s in FACTOR_SIZES], axis=1)
    return self._classes[rng.integers(0, len(self._classes), size=num)]

  def indices_of_factors(self, factors, rng: np.random.Generator | None = None) -> np.ndarray:
    """Row indices showing ``factors`` [n, 5] (random among duplicates); KeyError if absent."""
    codes = factors_to_index(factors)
    if self._classes is None:
      return codes
    lo = np.searchsorted(self._sorted_codes, codes, side="left")
    hi = np.searchsorted(self._sorted_codes, codes, side="right")
    if np.any(hi == lo):
      raise KeyError(f"no stored dSprites image has factors "
                     f"{np.asarray(factors)[hi == lo][0].tolist()} ({self.path})")
    offset = 0 if rng is None else np.floor(rng.random(len(codes)) * (hi - lo)).astype(np.int64)
    return self._order[lo + offset]

  def sample_observations_from_factors(self, factors, rng: np.random.Generator) -> np.ndarray:
    """float32 images [n, 64, 64, 1] showing ``factors`` [n, 5]."""
    factors = np.asarray(factors, np.int64)
    if self.source == "render":
      return render_factors(factors).astype(np.float32)[..., None]
    return self.get_images(self.indices_of_factors(factors, rng))
