"""Images written at evaluation steps: grids, reconstructions, latent traversals, I(x; z_j) curves.

Host-side numpy + PIL for image grids and matplotlib's Agg canvas (no global backend switch, no
display) for plots. Every file is written atomically (`disentangle.atomic.replacing`), so a
reader never sees half a PNG.

Traversals follow the papers' figures: one row per latent dimension in `latent_order` (CascadeVAE
Figs. 5 and 9 sort them by I(x; z_j); JointVAE by KL), over the `traversal_values` of the data
set: (-1.2, 1.2) on dSprites (CascadeVAE Fig. 5), (-2, 2) on MNIST and FashionMNIST (Figs. 8 and
9) and the others. The discrete traversal (CascadeVAE Fig. 3 right, Fig. 7) shows one row per
value of the discrete code d (`discrete_traversal_images`).

PartedVAE's own pictures (Figs. 4-10) are `disentangle.methods.partedvae_figures`.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np
from PIL import Image

from disentangle import atomic


def as_nhwc(images: np.ndarray) -> np.ndarray:
  """Images [n, H, W] or [n, H, W, C] as float32 [n, H, W, C]; ValueError otherwise."""
  images = np.asarray(images, dtype=np.float32)
  if images.ndim == 3:
    images = images[..., None]
  if images.ndim != 4:
    raise ValueError(f"images must be [n, H, W] or [n, H, W, C], got {images.shape}")
  return images


def make_grid(images: np.ndarray, nrow: int, padding: int = 2,
              pad_value: float = 1.0) -> np.ndarray:
  """Tiles images [n, H, W(, C)] in [0, 1] into one image [H', W', C], `nrow` images per row.

  As torchvision's `make_grid`: ncol = nrow images across, ceil(n / nrow) rows, `padding` pixels
  around every tile, so H' = rows (H + p) + p and W' = ncol (W + p) + p.
  """
  images = as_nhwc(images)
  n, h, w, c = images.shape
  ncol = max(1, min(nrow, n))
  rows = -(-n // ncol)
  p = padding
  grid = np.full((rows * (h + p) + p, ncol * (w + p) + p, c), pad_value, dtype=np.float32)
  for i in range(n):
    r, q = divmod(i, ncol)
    top, left = p + r * (h + p), p + q * (w + p)
    grid[top:top + h, left:left + w] = images[i]
  return grid


def save_image(path: str, image: np.ndarray) -> None:
  """Writes one image [H, W] or [H, W, C] (C in {1, 3, 4}) in [0, 1] as a PNG, atomically."""
  image = np.asarray(image, dtype=np.float32)
  if image.ndim == 3 and image.shape[-1] == 1:
    image = image[..., 0]
  pixels = np.round(np.clip(image, 0.0, 1.0) * 255.0).astype(np.uint8)
  with atomic.replacing(path, suffix=".png") as tmp:
    Image.fromarray(pixels).save(tmp, format="PNG")


def save_image_grid(path: str, images: np.ndarray, nrow: Optional[int] = 8, padding: int = 2,
                    pad_value: float = 1.0) -> np.ndarray:
  """Writes images [n, H, W, C] in [0, 1] as one PNG grid of `nrow` per row; returns the grid.

  A 3-D array is taken as one image that is already a grid [H, W, C] (the output of
  `reconstruction_grid`, `traversal_grid`, `discrete_traversal_grid`) and written as it is;
  `nrow` is then ignored. `nrow=None` means 8, torchvision's default.
  """
  images = np.asarray(images, dtype=np.float32)
  if images.ndim == 3:
    grid = images
  else:
    grid = make_grid(images, 8 if nrow is None else nrow, padding, pad_value)
  save_image(path, grid)
  return grid


def reconstruction_grid(originals: np.ndarray, reconstructions: np.ndarray, nrow: int = 8,
                        padding: int = 2) -> np.ndarray:
  """Pairs of rows: `nrow` originals, then their reconstructions below, and so on. [H', W', C]."""
  originals = as_nhwc(originals)
  reconstructions = as_nhwc(reconstructions)
  if originals.shape != reconstructions.shape:
    raise ValueError(f"{originals.shape} originals vs {reconstructions.shape} reconstructions")
  n = len(originals)
  ncol = max(1, min(nrow, n))
  tiles = []
  for start in range(0, n, ncol):
    block_o = originals[start:start + ncol]
    block_r = reconstructions[start:start + ncol]
    fill = ncol - len(block_o)
    if fill:  # blank tiles complete the last pair of rows
      blank = np.ones((fill,) + originals.shape[1:], np.float32)
      block_o = np.concatenate([block_o, blank])
      block_r = np.concatenate([block_r, blank])
    tiles += [block_o, block_r]
  return make_grid(np.concatenate(tiles), ncol, padding)


def decoded(decode_fn, *args) -> np.ndarray:
  """``decode_fn(*args)`` as float32 images [n, H, W, C]."""
  return as_nhwc(np.asarray(decode_fn(*args)))


def traversal_values(dataset_name: str) -> np.ndarray:
  """The 10 traversed values of the papers' figures for ``dataset_name`` (module doc)."""
  span = 1.2 if dataset_name == "dsprites" else 2.0
  return np.linspace(-span, span, 10)


def latent_order(information) -> np.ndarray:
  """Dimensions by ``information`` [m] (I(x; z_j), or KL_j), largest first, ties in index order."""
  return np.argsort(-np.asarray(information, np.float64), kind="stable")


def traversal_images(decode_fn: Callable[[np.ndarray], np.ndarray], base_z: np.ndarray,
                     dims_order: Sequence[int], values: Sequence[float]) -> np.ndarray:
  """Latent traversal: row r sets z[dims_order[r]] to each of `values`, others at `base_z`.

  Args:
    decode_fn: latents [k, m] -> images [k, H, W(, C)] in [0, 1] (called once, k = rows x cols).
    base_z: [m], the code every row starts from (e.g. the posterior mean of one image, or 0).
    dims_order: dimensions to traverse, one row each, in display order (sorted by the caller,
      by I(x; z_j) as CascadeVAE Figs. 6 and 9).
    values: the traversed values, one column each (range as in the papers, module doc).

  Returns:
    The decoded images [rows, cols, H, W, C].
  """
  base_z = np.asarray(base_z, dtype=np.float32).ravel()
  values = np.asarray(values, dtype=np.float32)
  dims = [int(d) for d in dims_order]
  z = np.tile(base_z, (len(dims), len(values), 1))
  for r, d in enumerate(dims):
    z[r, :, d] = values
  images = decoded(decode_fn, z.reshape(-1, base_z.size))
  return images.reshape((len(dims), len(values)) + images.shape[1:])


def traversal_grid(decode_fn: Callable[[np.ndarray], np.ndarray], base_z: np.ndarray,
                   dims_order: Sequence[int], values: Sequence[float],
                   padding: int = 2) -> np.ndarray:
  """`traversal_images` as one grid image [H', W', C], a row per dimension."""
  images = traversal_images(decode_fn, base_z, dims_order, values)
  return make_grid(images.reshape((-1,) + images.shape[2:]), len(values), padding)


def save_traversal_gif(path, images: np.ndarray, *, frame_ms: int = 120,
                       padding: int = 2) -> None:
  """An animated traversal: frame t shows column t of `images` [rows, cols, H, W, C] (every
  traversed dimension at the t-th value, side by side), forth and back; written atomically."""
  images = np.asarray(images, dtype=np.float32)
  rows, cols = images.shape[:2]
  frames = []
  for t in list(range(cols)) + list(range(cols - 2, 0, -1)):
    grid = make_grid(images[:, t], rows, padding)
    grid = grid[..., 0] if grid.shape[-1] == 1 else grid
    frames.append(Image.fromarray(np.round(np.clip(grid, 0, 1) * 255).astype(np.uint8)))
  with atomic.replacing(path, suffix=".gif") as tmp:
    frames[0].save(tmp, format="GIF", save_all=True, append_images=frames[1:],
                   duration=frame_ms, loop=0)


def discrete_traversal_images(decode_fn: Callable[[np.ndarray, np.ndarray], np.ndarray],
                              base_z: np.ndarray, num_classes: int) -> np.ndarray:
  """Discrete traversal [num_classes, cols, H, W, C]: row c decodes the codes ``base_z``
  [cols, m] (or one [m]) with d = c, by ``decode_fn(z [k, m], d int [k])`` (called once)."""
  base_z = np.atleast_2d(np.asarray(base_z, dtype=np.float32))
  d = np.repeat(np.arange(num_classes, dtype=np.int32), len(base_z))
  images = decoded(decode_fn, np.tile(base_z, (num_classes, 1)), d)
  return images.reshape((num_classes, len(base_z)) + images.shape[1:])


def discrete_traversal_grid(decode_fn: Callable[[np.ndarray, np.ndarray], np.ndarray],
                            base_z: np.ndarray, num_classes: int, *,
                            traverse_dim: Optional[int] = None,
                            values: Optional[Sequence[float]] = None,
                            padding: int = 2) -> np.ndarray:
  """`discrete_traversal_images` as one grid image [H', W', C], `cols` images per row;
  optionally the columns traverse z[traverse_dim] over `values` from a single base_z [m]
  (CascadeVAE Fig. 3 style: every discrete value across one continuous traversal)."""
  base_z = np.atleast_2d(np.asarray(base_z, dtype=np.float32))
  if traverse_dim is not None:
    if values is None or len(base_z) != 1:
      raise ValueError("traverse_dim needs `values` and a single base_z [m]")
    base_z = np.repeat(base_z, len(values), axis=0)
    base_z[:, traverse_dim] = np.asarray(values, dtype=np.float32)
  images = discrete_traversal_images(decode_fn, base_z, num_classes)
  return make_grid(images.reshape((-1,) + images.shape[2:]), len(base_z), padding)


def plot_information_curves(path: str, steps: Sequence[float], values: np.ndarray,
                            labels: Optional[Sequence[str]] = None, *,
                            title: Optional[str] = None,
                            ylabel: str = "I(x; z_j) (nats)",
                            figsize: tuple[float, float] = (6.0, 4.0), dpi: int = 100) -> None:
  """I(x; z_j) of every dimension against training steps (CascadeVAE Figs. 5, 9, 11 left).

  Args:
    path: PNG to write (atomically).
    steps: [T] training steps.
    values: [T, m] one curve per column (add I(x; d) as a column to show the discrete code).
    labels: m legend entries (default z_1 ... z_m); a column labelled ``d`` (I(x; d)) is drawn
      black and dashed.
  """
  from matplotlib.backends.backend_agg import FigureCanvasAgg
  from matplotlib.figure import Figure

  steps = np.asarray(steps, dtype=np.float64)
  values = np.asarray(values, dtype=np.float64)
  if values.ndim == 1:
    values = values[:, None]
  if values.shape[0] != len(steps):
    raise ValueError(f"values {values.shape} do not match {len(steps)} steps")
  if labels is None:
    labels = [f"z_{j + 1}" for j in range(values.shape[1])]
  if len(labels) != values.shape[1]:
    raise ValueError(f"{len(labels)} labels for {values.shape[1]} curves")
  fig = Figure(figsize=figsize, dpi=dpi)
  FigureCanvasAgg(fig)
  ax = fig.add_subplot(1, 1, 1)
  for j, label in enumerate(labels):
    # The discrete code's I(x; d) in black, dashed: the colour cycle repeats after 10 curves.
    style = dict(color="black", linestyle="--") if label == "d" else {}
    ax.plot(steps, values[:, j], label=label, **style)
  ax.set_xlabel("iteration")
  ax.set_ylabel(ylabel)
  if title:
    ax.set_title(title)
  ax.legend(loc="best", fontsize="small", ncol=2 if len(labels) > 6 else 1)
  ax.grid(alpha=0.3)
  fig.tight_layout()
  with atomic.replacing(path, suffix=".png") as tmp:
    fig.savefig(tmp, format="png")
