"""DSpritesUnfair (FFVAE, Creager et al. 2019, App. B): dSprites with shape and x-position correlated.

The law (App. B): a (shape, x-position) pair is drawn with probability

    P(i_S, i_X) ∝ (i_S / n_S)^{q_S} + (i_X / n_X)^{q_X},    n_S = 3, n_X = 32,

with q_S = 1, q_X = 3 in the paper (App. B typesets i/n as a binomial coefficient; the ratio is
meant: a binomial "i choose n" with i <= n would be 0 or 1). Scale, orientation and y-position are
uniform and independent of (shape, x), "as in the standard version of DSprites".

Index base (``index_base``, config field ``dataset.unfair_index_base``; the appendix does not say;
our reading, default 1):

- 1: i_S in {1, 2, 3}, i_X in {1, ..., 32}. Every cell has mass and the law is still correlated:
  p(shape | x) moves from ∝ i_S at small x (the shape term dominates) towards uniform at large x
  (the x term dominates), so hearts are likelier at small x than at large x.
- 0: i_S in {0, 1, 2}, i_X in {0, ..., 31}. The cell (square, x class 0) has probability 0 and
  is never trained on.

What would change the reading: the authors' generator (not public).

Binarised attributes (App. B) threshold the factor CLASS indices: shape >= 1 (not a square),
scale >= 3, orientation >= 20, pos_x >= 16, pos_y >= 16. App. B also lists "Color >= 1", which is
constant 0 in dSprites (one colour): it is not an attribute and asking for it is an error.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from disentangle.data.datasets import dsprites

N_SHAPE = dsprites.FACTOR_SIZES[0]  # n_S = 3
N_X = dsprites.FACTOR_SIZES[3]      # n_X = 32
_SHAPE, _X = 0, 3                   # columns of shape and pos_x in the factor classes [n, 5]

# App. B: attribute name -> class threshold (attribute = class >= threshold).
ATTRIBUTE_THRESHOLDS = {"shape": 1, "scale": 3, "orientation": 20, "pos_x": 16, "pos_y": 16}
ATTRIBUTE_NAMES = tuple(ATTRIBUTE_THRESHOLDS)
CONSTANT_ATTRIBUTES = ("color",)  # App. B's "Color >= 1": always 0 in dSprites


def unfair_joint(q_shape: float = 1.0, q_x: float = 3.0, index_base: int = 1) -> np.ndarray:
  """P [3, 32]: P(i_S, i_X) ∝ (i_S / n_S)^q_shape + (i_X / n_X)^q_x (App. B), summing to 1.

  Row = shape class (square, ellipse, heart), column = pos_x class. ``index_base`` = 1 counts the
  indices from 1 (every cell has mass; default, our reading); 0 counts them from 0, which gives
  the cell (square, x class 0) probability 0 (see the module docstring).
  """
  if index_base not in (0, 1):
    raise ValueError(f"index_base must be 0 or 1, got {index_base!r}")
  if not (np.isfinite(q_shape) and np.isfinite(q_x)) or q_shape < 0 or q_x < 0:
    raise ValueError(f"exponents must be finite and >= 0, got q_shape={q_shape}, q_x={q_x}")
  i_s = np.arange(N_SHAPE, dtype=np.float64) + index_base
  i_x = np.arange(N_X, dtype=np.float64) + index_base
  weights = (i_s / N_SHAPE)[:, None] ** q_shape + (i_x / N_X)[None, :] ** q_x
  return weights / weights.sum()


def binarize(factor_classes, names=ATTRIBUTE_NAMES) -> np.ndarray:
  """Factor classes [n, 5] (``dsprites.FACTOR_NAMES`` order) -> int32 {0, 1} [n, len(names)].

  Column j is ``class of names[j] >= ATTRIBUTE_THRESHOLDS[names[j]]`` (App. B). ``"color"`` and
  unknown names raise ``ValueError`` listing the valid names.
  """
  factor_classes = np.asarray(factor_classes, np.int64)
  if factor_classes.ndim != 2 or factor_classes.shape[1] != len(dsprites.FACTOR_NAMES):
    raise ValueError(f"factor_classes must be [n, 5], got {factor_classes.shape}")
  cols = [dsprites.FACTOR_NAMES.index(_check_attribute(n)) for n in names]
  thresholds = np.array([ATTRIBUTE_THRESHOLDS[n] for n in names], np.int64)
  return (factor_classes[:, cols] >= thresholds).astype(np.int32)


def _check_attribute(name: str) -> str:
  if name in CONSTANT_ATTRIBUTES:
    raise ValueError(f"attribute {name!r} is constant in dSprites (one colour; App. B's "
                     f"'Color >= 1' is always 0), so it cannot be a (sensitive) attribute; "
                     f"valid attributes: {list(ATTRIBUTE_NAMES)}")
  if name not in ATTRIBUTE_THRESHOLDS:
    raise ValueError(f"unknown dSprites attribute {name!r}; valid attributes: "
                     f"{list(ATTRIBUTE_NAMES)}")
  return name


def sample_unfair_factors(num: int, rng: np.random.Generator, *, q_shape: float = 1.0,
                          q_x: float = 3.0, index_base: int = 1) -> np.ndarray:
  """Factor classes [num, 5] from the unfair law: (shape, x) ~ ``unfair_joint``, the rest uniform.

  Draw order (fixed, so a seed names one dataset): the (shape, x) cells, then scale, orientation
  and y, each with ``rng.integers``.
  """
  p = unfair_joint(q_shape, q_x, index_base).ravel()
  cells = rng.choice(p.size, size=num, p=p)
  factors = np.empty((num, 5), np.int64)
  factors[:, _SHAPE], factors[:, _X] = np.divmod(cells, N_X)
  for k in (1, 2, 4):
    factors[:, k] = rng.integers(0, dsprites.FACTOR_SIZES[k], size=num)
  return factors


class DSpritesUnfair(dsprites.FactorTargets, dsprites.IndexedRows):
  """DSpritesUnfair (App. B) as a training set and a ground-truth dataset over a dSprites base.

  One seeded draw of ``num_examples`` factor rows from the unfair law
  (``sample_unfair_factors``), each mapped to a row of ``base`` (``base_rows``), so the dataset
  is a fixed, indexable set: ``BatchSource`` epochs, resume and multi-seed runs work unchanged,
  and images come from the base (official npz or renderer; a rendered base has already warned
  ``ProceduralDataWarning``, and ``source`` is the base's, so results are marked not comparable).

  Base covering the whole factor grid (official file, renderer): row = ``factors_to_index`` of
  the drawn factors. Base holding a subset of the grid (e.g. the synthetic stand-in file): the
  drawn (shape, x) cell is kept and a stored row of that cell is picked uniformly, so scale,
  orientation and y follow the subset's empirical law there; a cell with mass but no stored row
  is an error.

  ``sample_factors`` draws stored rows uniformly (the ground-truth protocol's "uniform over the
  stored examples"): each is a draw from the unfair law, and every sampled combination has an
  image among the stored rows (the whole-dataset encodings of ``evaluation.encodings`` rely on that).

  Args:
    base: a ``dsprites.DSprites``.
    num_examples: rows drawn (default 737280, the size of dSprites).
    seed: seed of the draw (``dataset.unfair_seed``; the dataset, not the run).
    q_shape, q_x, index_base: the law (``unfair_joint``).
  """

  name = "dsprites_unfair"

  def __init__(self, base: dsprites.DSprites, num_examples: int = dsprites.NUM_EXAMPLES,
               seed: int = 0, q_shape: float = 1.0, q_x: float = 3.0, index_base: int = 1):
    num_examples = int(num_examples)
    if num_examples < 1:
      raise ValueError(f"num_examples must be >= 1, got {num_examples}")
    self.base = base
    self.seed, self.q_shape, self.q_x, self.index_base = int(seed), q_shape, q_x, index_base
    self.joint = unfair_joint(q_shape, q_x, index_base)
    rng = np.random.default_rng(seed)
    factors = sample_unfair_factors(num_examples, rng, q_shape=q_shape, q_x=q_x,
                                    index_base=index_base)
    try:
      rows = np.asarray(base.indices_of_factors(factors, rng), np.int64)
      self.grid_base = True
    except KeyError:  # the base stores a subset of the grid
      rows, factors = self._rows_in_cells(factors, rng)
      self.grid_base = False
    self.base_rows = rows
    self._factors = factors.astype(np.uint8)  # classes < 256: 3.7 MB for 737280 rows

  def _rows_in_cells(self, factors, rng) -> tuple[np.ndarray, np.ndarray]:
    stored = np.asarray(self.base.factors_of(np.arange(self.base.num_examples)), np.int64)
    stored_cells = stored[:, _SHAPE] * N_X + stored[:, _X]
    counts = np.bincount(stored_cells, minlength=N_SHAPE * N_X)
    missing = np.flatnonzero((counts == 0) & (self.joint.ravel() > 0))
    if missing.size:
      s, x = np.divmod(missing[0], N_X)
      raise ValueError(f"the dSprites base {getattr(self.base, 'path', None)} has no image with "
                       f"shape class {s} and pos_x class {x} ({missing.size} such cells), which "
                       f"DSpritesUnfair draws; use the official file or the renderer")
    order = np.argsort(stored_cells, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    cells = factors[:, _SHAPE] * N_X + factors[:, _X]
    pick = starts[cells] + np.floor(rng.random(len(cells)) * counts[cells]).astype(np.int64)
    rows = order[pick]
    return rows, stored[rows]

  def __repr__(self) -> str:
    return (f"DSpritesUnfair(num_examples={self.num_examples}, seed={self.seed}, "
            f"q_shape={self.q_shape}, q_x={self.q_x}, index_base={self.index_base}, "
            f"base_source={self.source!r})")

  @property
  def settings(self) -> dict:
    """Everything that names this dataset, for results files."""
    return {"name": "dsprites_unfair", "num_examples": self.num_examples, "seed": self.seed,
            "q_shape": float(self.q_shape), "q_x": float(self.q_x),
            "index_base": int(self.index_base), "base_source": self.source,
            "grid_base": self.grid_base}

  # --- training-set interface -------------------------------------------------------------------
  @property
  def source(self) -> str:
    """The base's ``source``, where the images come from ('render': not comparable with
    published numbers)."""
    return self.base.source

  @property
  def num_examples(self) -> int:
    """The number of rows drawn."""
    return len(self._factors)

  @property
  def image_shape(self) -> tuple[int, int, int]:
    """The base's image shape, (64, 64, 1)."""
    return self.base.image_shape

  def get_images(self, indices) -> np.ndarray:
    """float32 [n, 64, 64, 1] in {0, 1}: the base's images of rows ``base_rows[indices]``."""
    return self.base.get_images(self.base_rows[self._check(indices)])

  def compact_images(self):
    """The base's compact images, row r read from the base's row ``base_rows[r]``; None for a
    base without them (TFDS)."""
    compact = getattr(self.base, "compact_images", None)
    base = compact() if compact is not None else None
    if base is None:
      return None
    rows = self.base_rows if base.rows is None else base.rows[self.base_rows]
    return dataclasses.replace(base, rows=rows)

  def factors_of(self, indices) -> np.ndarray:
    """Factor classes [n, 5] (int64) of rows ``indices``."""
    return self._factors[self._check(indices)].astype(np.int64)

  def latents_classes(self, indices) -> np.ndarray:
    """Official ``latents_classes`` [n, 6] (color class 0 first) of rows ``indices``."""
    return dsprites.factors_to_latents(self.factors_of(indices))[0]

  # --- side information (disentangle.data.labels.batch_spec) -------------------------------------------
  @property
  def attribute_names(self) -> tuple[str, ...]:
    """App. B's binarised factors (``ATTRIBUTE_NAMES``, thresholds ``ATTRIBUTE_THRESHOLDS``)."""
    return ATTRIBUTE_NAMES

  def attributes_of(self, indices, names) -> np.ndarray:
    """int32 {0, 1} [n, len(names)]: App. B's binarised factors (``binarize``) of rows."""
    return binarize(self.factors_of(indices), tuple(names))

  # --- ground-truth interface (disentangle.data.ground_truth.GroundTruthData) ------------------
  def sample_factors(self, num: int, rng: np.random.Generator) -> np.ndarray:
    """Factor classes [num, 5]: stored rows drawn uniformly (each a draw of the unfair law)."""
    return self.factors_of(rng.integers(0, self.num_examples, size=num))

  def sample_observations_from_factors(self, factors, rng: np.random.Generator) -> np.ndarray:
    """float32 images [n, 64, 64, 1] showing ``factors`` [n, 5] (from the base)."""
    return self.base.sample_observations_from_factors(factors, rng)
