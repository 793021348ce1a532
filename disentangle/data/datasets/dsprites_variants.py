"""disentanglement_lib's dSprites variants: colour, noisy, scream, and dSprites without shape.

Each is a view over a ``DSprites`` (official file, subset or renderer) that keeps its rows and its
factor grid; the definitions follow disentanglement_lib's ``data/ground_truth/dsprites.py``
(``ColorDSprites``, ``NoisyDSprites``, ``ScreamDSprites``) and ``named_data.py``
(``dsprites_noshape`` = ``DSprites([2, 3, 4, 5])``):

- ``color_dsprites``: factors shape, scale, orientation, pos_x, pos_y (3, 6, 40, 32, 32); the
  binary sprite times one colour ~ U(0.5, 1)^3 per image, background 0; 64x64x3.
- ``noisy_dsprites``: the same factors; ``min(sprite + noise, 1)``: a white sprite, background
  ~ U(0, 1) per pixel and channel; 64x64x3.
- ``scream_dsprites``: the same factors; a random 64x64 patch of the painting (thumbnailed to fit
  350x274), averaged with one colour ~ U(0, 1)^3 and inverted (``1 - x``) on the sprite; 64x64x3.
- ``dsprites_noshape``: factors scale, orientation, pos_x, pos_y (6, 40, 32, 32); the dSprites
  image (64x64x1) of a uniformly drawn shape.

Images are float32 in [0, 1].

Randomness: ``draw`` (``dataset.variant_draw``) of the colour, noisy and scream sets.

- ``'per_sample'``, disentanglement_lib's (``data/ground_truth/dsprites.py``:
  ``ColorDSprites.sample_observations_from_factors``, lines 120-131, ``NoisyDSprites``'s, lines
  153-158, ``ScreamDSprites``'s, lines 185-198, draw a new colour / noise / patch from
  ``random_state`` for every observation, and training samples every example afresh,
  ``util.tf_data_set_from_ground_truth_data``, lines 25-35): the default of the study's tables.
  Each training image draws anew, from the stream of (run seed, step, row of the global batch)
  (``dsprites_draws``: the same counter-based draw on the host and on the device, where the
  sprites are placed and painted in the step, ``compact_images``); ``drawn_images(indices,
  keys)`` paints rows with given keys. ``sample_observations_from_factors(factors, rng)`` (the
  metrics) draws each observation's keys from ``rng``, the evaluation's own stream, and a set
  drawn per sample has no fixed image per row to encode once (``evaluation.encodings``
  samples). ``get_images(indices)`` (the evaluation's points, pictures) draws row ``i`` from the
  key of (``seed``, ``dsprites_draws.ROWS``, ``i``): one draw per point, the same at every
  evaluation.
- ``'per_image'`` (the default elsewhere): ``get_images(indices)`` is deterministic per row:
  row ``i`` draws from its own stream ``Generator(PCG64(SeedSequence([seed, i])))``, so a row
  looks the same in every batch, epoch, process and resume, in training and in the evaluation
  of the whole set; the colour of row ``i`` is a fixed property of the set (one per row and
  ``seed``). ``sample_observations_from_factors(factors, rng)`` draws everything from ``rng``
  (numpy ``Generator``, not ``RandomState``: the same distributions, not the same numbers).

``dsprites_noshape`` trains on every dSprites row, all three shapes.

The painting is read from ``scream/scream.jpg`` in the data folder (disentanglement_lib's path;
any copy of Munch's "The Scream", e.g. the Wikimedia file of ``SCREAM_URL``); no checksum is
published for it, so only its readability and size are checked.
"""
from __future__ import annotations

import os
import pathlib

import numpy as np
from PIL import Image

from disentangle import config as config_lib
from disentangle.data import files
from disentangle.data.datasets import dsprites
from disentangle.data.datasets import dsprites_draws
from disentangle.data.datasets.dsprites import DSprites
from disentangle.data.datasets.dsprites import FactorTargets
from disentangle.data.datasets.dsprites import IndexedRows

SCREAM_FILE = "scream/scream.jpg"
SCREAM_URL = "https://upload.wikimedia.org/wikipedia/commons/f/f4/The_Scream.jpg"
VARIANTS = config_lib.DSPRITES_VARIANTS  # the names, with the config's other dataset names
NOSHAPE_FACTOR_NAMES = dsprites.FACTOR_NAMES[1:]
NOSHAPE_FACTOR_SIZES = dsprites.FACTOR_SIZES[1:]
DRAWS = config_lib.VARIANT_DRAWS  # dataset.variant_draw


def row_rng(seed: int, index: int) -> np.random.Generator:
  """The stream of row ``index``: ``Generator(PCG64(SeedSequence([seed, index])))``."""
  return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), int(index)])))


def read_scream(data_dir: str | os.PathLike) -> np.ndarray:
  """The painting of ``<data_dir>/scream/scream.jpg`` as float64 [H, W, 3] in [0, 1], thumbnailed
  to fit 350x274 as disentanglement_lib does (``ScreamDSprites.__init__``; we also convert to
  RGB). Raises ``MissingDataError`` (one line) when absent, ``DataFileError`` when unreadable or
  smaller than 65x65 pixels."""
  path = pathlib.Path(data_dir) / SCREAM_FILE
  if not path.is_file():
    raise files.MissingDataError(
        f"missing data file {path}: get a JPEG of Munch's 'The Scream' (e.g. {SCREAM_URL}) and "
        f"put it at {path}")
  try:
    with Image.open(path) as img:
      img.thumbnail((350, 274))
      painting = np.asarray(img.convert("RGB"), np.float64) / 255.0
  except (OSError, ValueError) as e:
    raise files.DataFileError(f"{path}: not a readable image ({e})") from e
  if painting.shape[0] <= 64 or painting.shape[1] <= 64:
    raise files.DataFileError(f"{path}: the thumbnailed painting is {painting.shape[:2]}; a "
                              f"64x64 patch needs more than 64 pixels each way")
  return painting


class _Variant(FactorTargets, IndexedRows):
  """A view over the rows of a ``DSprites`` ``base``."""

  name = ""
  image_shape = (64, 64, 3)

  def __init__(self, base: DSprites, seed: int = 0):
    self.base = base
    self.seed = int(seed)

  def __repr__(self) -> str:
    return f"{type(self).__name__}(n={self.num_examples}, source={self.base.source!r})"

  @property
  def num_examples(self) -> int:
    return self.base.num_examples

  @property
  def source(self) -> str:
    return self.base.source

  def factors_of(self, indices) -> np.ndarray:
    return self.base.factors_of(indices)

  # --- ground-truth interface ------------------------------------------------------------------
  def sample_factors(self, num: int, rng: np.random.Generator) -> np.ndarray:
    return self.base.sample_factors(num, rng)


class _Painted(_Variant):
  """The colour, noisy and scream sets: the dSprites rows painted with a random draw, per image
  or per sample (``draw``, the module docstring); subclasses say how."""

  sprite_shape = dsprites.IMAGE_SHAPE  # of the rows of compact_images (the sprites)

  def __init__(self, base: DSprites, seed: int = 0, draw: str = "per_image"):
    if draw not in DRAWS:
      raise ValueError(f"draw must be one of {list(DRAWS)}, got {draw!r}")
    super().__init__(base, seed)
    self.draw = draw

  def __repr__(self) -> str:
    return (f"{type(self).__name__}(n={self.num_examples}, source={self.base.source!r}, "
            f"draw={self.draw!r})")

  @property
  def draws_per_sample(self) -> bool:
    """Whether each image draws anew (``draw='per_sample'``; the module docstring)."""
    return self.draw == "per_sample"

  @property
  def painting32(self) -> np.ndarray | None:
    """The painting the per-sample draw reads (float32), None for sets without one."""
    return None

  def _paint(self, sprites: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """float32 [n, 64, 64, 3] of binary sprites [n, 64, 64, 1], drawing from ``rng``."""
    raise NotImplementedError

  def get_images(self, indices) -> np.ndarray:
    """float32 [n, 64, 64, 3] of rows ``indices``; row ``i`` draws from ``row_rng(seed, i)``
    (per sample: from the key of (``seed``, ``dsprites_draws.ROWS``, ``i``))."""
    indices = self._check(indices).reshape(-1)
    if self.draws_per_sample:
      return self.drawn_images(indices, dsprites_draws.batch_keys(
          self.seed, 0, dsprites_draws.ROWS, indices))
    sprites = self.base.get_images(indices)
    out = np.empty((len(indices), 64, 64, 3), np.float32)
    for k, i in enumerate(indices):
      out[k] = self._paint(sprites[k:k + 1], row_rng(self.seed, i))[0]
    return out

  def drawn_images(self, indices, keys) -> np.ndarray:
    """float32 [n, 64, 64, 3]: rows ``indices`` painted with the per-sample draws of ``keys``
    (uint32 [n, 2], ``dsprites_draws.batch_keys``)."""
    sprites = self.base.get_images(self._check(indices).reshape(-1))
    return dsprites_draws.paint(np, self.name, sprites, keys, self.painting32)

  def compact_images(self):
    """Per sample: dSprites' packed sprites, painted in the step on the device
    (``train.device_data``); per image: None (the host pipeline paints each row's fixed draw)."""
    return self.base.compact_images() if self.draws_per_sample else None

  def indices_of_factors(self, factors, rng: np.random.Generator | None = None) -> np.ndarray:
    """The rows showing ``factors`` (dSprites', e.g. for pairs)."""
    return self.base.indices_of_factors(factors, rng)

  def sample_observations_from_factors(self, factors, rng: np.random.Generator) -> np.ndarray:
    """float32 [n, 64, 64, 3] showing ``factors`` [n, 5]; the colouring draws from ``rng`` (per
    sample: each observation's key, two uint32 words, drawn from ``rng`` after the sprites)."""
    sprites = self.base.sample_observations_from_factors(factors, rng)
    if self.draws_per_sample:
      keys = rng.integers(0, 2**32, size=(len(sprites), 2), dtype=np.uint32)
      return dsprites_draws.paint(np, self.name, sprites, keys, self.painting32)
    return self._paint(sprites, rng)


class ColorDSprites(_Painted):
  """dSprites with the sprite coloured (disentanglement_lib ``dsprites.ColorDSprites``).

  Each observation's sprite takes one colour ~ U(0.5, 1)^3; the background stays 0.
  """

  name = "color_dsprites"

  def _paint(self, sprites, rng):
    color = rng.uniform(0.5, 1.0, size=(len(sprites), 1, 1, 3))
    return (sprites * color).astype(np.float32)


class NoisyDSprites(_Painted):
  """dSprites on uniform noise (disentanglement_lib ``dsprites.NoisyDSprites``).

  ``min(sprite + U, 1)`` with U ~ U(0, 1) per pixel and channel: a white sprite on noise.
  """

  name = "noisy_dsprites"

  def _paint(self, sprites, rng):
    noise = rng.uniform(0.0, 1.0, size=(len(sprites), 64, 64, 3))
    return np.minimum(sprites + noise, 1.0).astype(np.float32)


class ScreamDSprites(_Painted):
  """dSprites on a patch of "The Scream" (disentanglement_lib ``dsprites.ScreamDSprites``).

  Per observation: a 64x64 patch at a uniform corner (row in ``[0, H - 64)``, column in
  ``[0, W - 64)``, as disentanglement_lib's ``randint``), averaged with one colour ~ U(0, 1)^3,
  then ``1 - x`` on the sprite's pixels.

  Args:
    base: the dSprites rows.
    painting: float [H, W, 3] in [0, 1] (``read_scream``), H and W above 64.
    seed: of the per-row streams of ``get_images``.
    draw: 'per_image' or 'per_sample' (module docstring).
  """

  name = "scream_dsprites"

  def __init__(self, base: DSprites, painting: np.ndarray, seed: int = 0,
               draw: str = "per_image"):
    super().__init__(base, seed, draw)
    painting = np.asarray(painting, np.float64)
    if painting.ndim != 3 or painting.shape[2] != 3 or min(painting.shape[:2]) <= 64:
      raise ValueError(f"painting must be [H, W, 3] with H, W > 64, got {painting.shape}")
    self.painting = painting
    self._painting32 = painting.astype(np.float32)

  @property
  def painting32(self) -> np.ndarray:
    return self._painting32

  def _paint(self, sprites, rng):
    h, w = self.painting.shape[:2]
    out = np.empty((len(sprites), 64, 64, 3), np.float32)
    for k in range(len(sprites)):
      top, left = rng.integers(0, h - 64), rng.integers(0, w - 64)
      patch = (self.painting[top:top + 64, left:left + 64] + rng.uniform(0.0, 1.0, size=3)) / 2
      mask = np.broadcast_to(sprites[k] == 1, patch.shape)
      out[k] = np.where(mask, 1.0 - patch, patch)
    return out


class DSpritesNoShape(_Variant):
  """dSprites with shape a nuisance (disentanglement_lib ``named_data`` 'dsprites_noshape', i.e.
  ``DSprites([2, 3, 4, 5])``): factors scale, orientation, pos_x, pos_y; images 64x64x1 as
  dSprites'.

  ``sample_observations_from_factors`` draws the shape uniformly with ``rng`` (among the stored
  rows with those factors when the base is a subset), as ``SplitDiscreteStateSpace`` draws the
  factors that are not latent. ``get_images`` is dSprites' own (no randomness).
  """

  name = "dsprites_noshape"
  image_shape = dsprites.IMAGE_SHAPE

  def __init__(self, base: DSprites):
    super().__init__(base, 0)
    self._by_code = None  # (order, sorted codes) of the rows' four factors, for a subset base

  def get_images(self, indices) -> np.ndarray:
    return self.base.get_images(indices)

  def compact_images(self):
    """dSprites' packed images (the images are dSprites', unchanged)."""
    return self.base.compact_images()

  def factors_of(self, indices) -> np.ndarray:
    return self.base.factors_of(indices)[:, 1:]

  @property
  def factor_sizes(self) -> tuple[int, ...]:
    return NOSHAPE_FACTOR_SIZES

  @property
  def factor_names(self) -> tuple[str, ...]:
    return NOSHAPE_FACTOR_NAMES

  def sample_factors(self, num: int, rng: np.random.Generator) -> np.ndarray:
    return self.base.sample_factors(num, rng)[:, 1:]

  def sample_observations_from_factors(self, factors, rng: np.random.Generator) -> np.ndarray:
    """float32 [n, 64, 64, 1] showing ``factors`` [n, 4] with a random shape each."""
    factors = np.asarray(factors, np.int64)
    if factors.ndim != 2 or factors.shape[1] != 4:
      raise ValueError(f"factors must be [n, 4] (scale, orientation, pos_x, pos_y), got "
                       f"{factors.shape}")
    if self.base.source == "render" or self.base._classes is None:  # the full grid
      shape = rng.integers(0, dsprites.FACTOR_SIZES[0], size=len(factors))
      return self.base.sample_observations_from_factors(
          np.concatenate([shape[:, None], factors], axis=1), rng)
    if self._by_code is None:
      rows = np.arange(self.base.num_examples)
      codes = self._codes(self.base.factors_of(rows)[:, 1:])
      order = np.argsort(codes, kind="stable")
      self._by_code = (order, codes[order])
    order, sorted_codes = self._by_code
    codes = self._codes(factors)
    lo = np.searchsorted(sorted_codes, codes, side="left")
    hi = np.searchsorted(sorted_codes, codes, side="right")
    if np.any(hi == lo):
      raise KeyError(f"no stored dSprites image has factors {factors[hi == lo][0].tolist()}")
    pick = lo + np.floor(rng.random(len(codes)) * (hi - lo)).astype(np.int64)
    return self.base.get_images(order[pick])

  @staticmethod
  def _codes(factors: np.ndarray) -> np.ndarray:
    bases = np.cumprod((1,) + NOSHAPE_FACTOR_SIZES[:0:-1])[::-1]
    return np.asarray(factors, np.int64) @ bases.astype(np.int64)


def make(name: str, base: DSprites, *, painting: np.ndarray | None = None, seed: int = 0,
         draw: str = "per_image"):
  """The variant ``name`` (one of ``VARIANTS``) over ``base``; ``draw`` (``DRAWS``) for the
  colour, noisy and scream sets (``dsprites_draws.NAMES``)."""
  if name == "color_dsprites":
    return ColorDSprites(base, seed, draw)
  if name == "noisy_dsprites":
    return NoisyDSprites(base, seed, draw)
  if name == "scream_dsprites":
    if painting is None:
      raise ValueError("scream_dsprites needs the painting (read_scream)")
    return ScreamDSprites(base, painting, seed, draw)
  if name == "dsprites_noshape":
    return DSpritesNoShape(base)
  raise ValueError(f"unknown dSprites variant {name!r}; valid names: {', '.join(VARIANTS)}")
