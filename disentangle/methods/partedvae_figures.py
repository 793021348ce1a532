"""PartedVAE's pictures (Hajimiri et al., Figs. 4-10) of a mixture prior over the class-related
codes u, drawn for PartedVAE's ``evaluation_pictures`` hook (`disentangle.methods.partedvae`),
which the evaluator writes.

Every function takes plain arrays (the mixture prior's means, log-variances and p(c)) and a
decode function (latents [k, D] -> images), so it does not depend on a method's parameters:
`traversal_rows_grid` (u_i over its prior's range), `attribute_transfer_grid` (Fig. 5),
`prior_components_figure` (Figs. 7, 10), `generation_grid` (samples of the generative process,
Sec. 4.4); `mixture_pictures` draws them all. The grids themselves are `disentangle.viz`'s.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

from disentangle import metrics
from disentangle import viz


def traversal_rows_grid(decode_fn: Callable[[np.ndarray], np.ndarray], base_z: np.ndarray,
                        dims: Sequence[int], values_per_row: Sequence[Sequence[float]],
                        padding: int = 2) -> np.ndarray:
  """As `viz.traversal_grid`, but row r traverses z[dims[r]] over its own values_per_row[r] (same
  count per row): u_i's traversal spans its prior components (PartedVAE Figs. 4, 6b, 7)."""
  values = np.asarray(values_per_row, np.float32)
  if values.ndim != 2 or len(values) != len(dims):
    raise ValueError(f"values_per_row must be [{len(dims)}, n], got shape {values.shape}")
  base_z = np.asarray(base_z, np.float32).ravel()
  z = np.tile(base_z, (len(dims), values.shape[1], 1))
  for r, d in enumerate(dims):
    z[r, :, int(d)] = values[r]
  images = viz.decoded(decode_fn, z.reshape(-1, base_z.size))
  return viz.make_grid(images, values.shape[1], padding)


def prior_span(means: np.ndarray, logvars: np.ndarray, num: int = 10,
               width: float = 2.0) -> np.ndarray:
  """``num`` values from min_k (mu_k - width sigma_k) to max_k (mu_k + width sigma_k) of 1-D
  components (means, logvars [L]): the range covering every mode of the mixture."""
  means = np.asarray(means, np.float64).ravel()
  sd = np.exp(0.5 * np.asarray(logvars, np.float64).ravel())
  return np.linspace(np.min(means - width * sd), np.max(means + width * sd), num)


def attribute_transfer_grid(decode_fn: Callable[[np.ndarray], np.ndarray],
                            keep_latents: np.ndarray, give_latents: np.ndarray,
                            transfer_dims: Sequence[int], *,
                            keep_images: Optional[np.ndarray] = None,
                            give_images: Optional[np.ndarray] = None,
                            padding: int = 2) -> np.ndarray:
  """Attribute transfer (PartedVAE Fig. 5): cell (i, j) decodes row i's latent with the
  ``transfer_dims`` (the class-independent z) taken from column j's.

  Args:
    decode_fn: latents [k, D] -> images [k, H, W(, C)] (called once).
    keep_latents: [r, D], one per row: what stays (c's effect through u, and u).
    give_latents: [c, D], one per column: where the transferred dims come from.
    transfer_dims: indices of the dims taken from the column (z = dims 0 .. d_z - 1).
    keep_images, give_images: optional originals, shown as the first column / first row (the
      corner stays blank), as in the figure.

  Returns:
    The grid image [H', W', C].
  """
  keep = np.asarray(keep_latents, np.float32)
  give = np.asarray(give_latents, np.float32)
  if keep.ndim != 2 or give.ndim != 2 or keep.shape[1] != give.shape[1]:
    raise ValueError(f"latents must be [r, D] and [c, D], got {keep.shape} and {give.shape}")
  dims = np.asarray(transfer_dims, np.int64)
  latents = np.repeat(keep[:, None], len(give), axis=1)  # [r, c, D]
  latents[:, :, dims] = give[None, :, dims]
  images = viz.decoded(decode_fn, latents.reshape(-1, keep.shape[1]))
  r, c = len(keep), len(give)
  images = images.reshape((r, c) + images.shape[1:])
  if keep_images is not None or give_images is not None:
    blank = np.ones((1,) + images.shape[2:], np.float32)
    left = viz.as_nhwc(keep_images) if keep_images is not None else np.repeat(blank, r, 0)
    top = viz.as_nhwc(give_images) if give_images is not None else np.repeat(blank, c, 0)
    if left.shape[1:] != images.shape[2:] or top.shape[1:] != images.shape[2:]:
      raise ValueError("original images must have the decoded images' shape")
    images = np.concatenate([left[:, None], images], axis=1)
    images = np.concatenate([np.concatenate([blank, top])[None], images], axis=0)
    c += 1
  return viz.make_grid(images.reshape((-1,) + images.shape[2:]), c, padding)


def sample_mixture_latents(rng: np.random.Generator, z_dim: int, means: Sequence[np.ndarray],
                           logvars: Sequence[np.ndarray], weights: Sequence[np.ndarray],
                           num: int, first_class: Optional[np.ndarray] = None):
  """The generative process (PartedVAE Sec. 4.4): c_i ~ p(c_i), u_i ~ N(mu_{i,c_i},
  sigma^2_{i,c_i}), z ~ N(0, I); latents concat(z, u_1, ..., u_K) [num, d_z + K d_u] and the
  classes [num, K]. ``first_class`` [num] fixes c_1 (one row per class in `generation_grid`).

  Args:
    means, logvars: per variable i, [L_i, d_u] of the prior components p_psi(u_i | c_i = k).
    weights: per variable i, p(c_i) [L_i].
  """
  parts = [rng.standard_normal((num, z_dim))]
  classes = []
  for i, (mu, lv, w) in enumerate(zip(means, logvars, weights)):
    mu, lv = np.asarray(mu, np.float64), np.asarray(lv, np.float64)
    w = np.asarray(w, np.float64)
    c = rng.choice(len(w), size=num, p=w / w.sum())
    if i == 0 and first_class is not None:
      c = np.asarray(first_class, np.int64)
    classes.append(c)
    parts.append(mu[c] + np.exp(0.5 * lv[c]) * rng.standard_normal((num, mu.shape[1])))
  return np.concatenate(parts, axis=1).astype(np.float32), np.stack(classes, axis=1)


def generation_grid(decode_fn: Callable[[np.ndarray], np.ndarray], rng: np.random.Generator,
                    z_dim: int, means, logvars, weights, per_row: int = 8,
                    padding: int = 2) -> np.ndarray:
  """Samples of the generative process, row k with c_1 = k (the other variables, u and z
  drawn from the prior; `sample_mixture_latents`): L_1 rows of ``per_row`` images."""
  num_classes = len(np.asarray(weights[0]))
  first = np.repeat(np.arange(num_classes), per_row)
  latents, _ = sample_mixture_latents(rng, z_dim, means, logvars, weights, len(first), first)
  return viz.make_grid(viz.decoded(decode_fn, latents), per_row, padding)


def _figure_to_array(fig) -> np.ndarray:
  from matplotlib.backends.backend_agg import FigureCanvasAgg
  canvas = FigureCanvasAgg(fig)
  canvas.draw()
  return np.asarray(canvas.buffer_rgba(), np.float32)[..., :3] / 255.0


def mixture_density(grid: np.ndarray, means, logvars, weights) -> np.ndarray:
  """p(c = k) N(u; mu_k, sigma_k^2) of 1-D components on ``grid``: [L, len(grid)]."""
  u = np.asarray(grid, np.float64)[None]
  mu = np.asarray(means, np.float64).ravel()[:, None]
  var = np.exp(np.asarray(logvars, np.float64).ravel())[:, None]
  w = np.asarray(weights, np.float64).ravel()[:, None]
  return w * np.exp(-0.5 * (u - mu) ** 2 / var) / np.sqrt(2 * np.pi * var)


def prior_components_figure(means, logvars, weights, values, images, *,
                            title: Optional[str] = None,
                            labels: Optional[Sequence[str]] = None,
                            dpi: int = 100) -> np.ndarray:
  """PartedVAE Figs. 7 and 10: the components p(c_i = k) p_psi(u_i | c_i = k) of one dimension
  of u_i (and their sum) above a row of images generated with that dimension at ``values``
  (dotted vertical lines). Returns the picture as an RGB array [H, W, 3] in [0, 1].

  Args:
    means, logvars, weights: [L] per component (one dimension of u_i), p(c_i) [L].
    values: [n] the u values of the images.
    images: [n, H, W(, C)] decoded at those values.
    labels: L legend entries (default c=0 ...).
  """
  from matplotlib.figure import Figure

  values = np.asarray(values, np.float64)
  images = viz.as_nhwc(images)
  if len(images) != len(values):
    raise ValueError(f"{len(images)} images for {len(values)} values")
  lo, hi = values.min(), values.max()
  pad = 0.05 * (hi - lo + 1e-6)
  grid = np.linspace(lo - pad, hi + pad, 400)
  dens = mixture_density(grid, means, logvars, weights)
  labels = labels or [f"c={k}" for k in range(len(dens))]
  n = len(values)
  fig = Figure(figsize=(max(4.0, 0.8 * n), 3.6), dpi=dpi)
  ax = fig.add_axes([0.08, 0.45, 0.9, 0.45])
  for k, d in enumerate(dens):
    ax.plot(grid, d, label=labels[k])
  ax.plot(grid, dens.sum(0), color="black", lw=1.0, label="mixture")
  for v in values:
    ax.axvline(v, color="green", ls=":", lw=0.8)
  ax.set_xlim(grid[0], grid[-1])
  ax.legend(loc="upper right", fontsize="x-small", ncol=2 if len(dens) > 4 else 1)
  if title:
    ax.set_title(title, fontsize="small")
  strip = viz.make_grid(images, n, padding=2)
  ax_img = fig.add_axes([0.08, 0.02, 0.9, 0.36])
  ax_img.imshow(strip[..., 0] if strip.shape[-1] == 1 else strip,
                cmap="gray" if strip.shape[-1] == 1 else None, vmin=0.0, vmax=1.0,
                aspect="auto", interpolation="nearest")
  ax_img.set_axis_off()
  return _figure_to_array(fig)


def mixture_pictures(prior: dict, decode_latent, images: np.ndarray, rep: metrics.Representation,
                     *, span: float = 2.0, values: Optional[np.ndarray] = None,
                     seed: int = 0) -> dict:
  """PartedVAE's pictures as RGB arrays {kind: [H, W, C]}:

  - ``z_traversal``: the class-independent z of the first image, dims sorted by KL, over
    (-span, span) (Figs. 4, 6a, 9);
  - ``u_traversal``: every dimension of every u_i over the range of its prior components (Figs.
    4, 6b);
  - ``attribute_transfer``: z of the first row's images into the left column's (Fig. 5);
  - ``prior_<name>``: per variable, p(c_i = k) p_psi(u_i | c_i = k) of u_i's dimension whose
    component means are the most spread, with images along it (Figs. 7, 10);
  - ``samples``: the generative process, one row per class of c_1 (Sec. 4.4), seeded.

  ``prior``: the mixture prior as plain arrays, ``means`` / ``logvars`` [L_i, d_u] and
  ``weights`` p(c_i) [L_i] per variable, ``z_dim``, ``u_dim`` and the variables' ``names``;
  ``decode_latent``: concat(z, u_1, ..., u_K) [k, d_z + K d_u] -> images.
  """
  z_dim, u_dim = prior["z_dim"], prior["u_dim"]
  values = np.linspace(-span, span, 10) if values is None else np.asarray(values)
  base = rep.mean[0]
  out = {}
  if z_dim:
    kl = (metrics.kl_per_dim(rep.mean[:, :z_dim], rep.logvar[:, :z_dim])
          if rep.logvar is not None else np.var(rep.mean[:, :z_dim], 0))
    out["z_traversal"] = viz.traversal_grid(decode_latent, base, np.argsort(-kl), values)
  dims, rows = [], []
  for i, (mu, lv) in enumerate(zip(prior["means"], prior["logvars"])):
    for j in range(u_dim):
      dims.append(z_dim + i * u_dim + j)
      rows.append(prior_span(mu[:, j], lv[:, j], len(values)))
  out["u_traversal"] = traversal_rows_grid(decode_latent, base, dims, rows)
  half = min(8, len(images) // 2)
  if half:
    out["attribute_transfer"] = attribute_transfer_grid(
        decode_latent, rep.mean[:half], rep.mean[half:2 * half], range(z_dim),
        keep_images=images[:half], give_images=images[half:2 * half])
  for i, (mu, lv, w) in enumerate(zip(prior["means"], prior["logvars"], prior["weights"])):
    j = int(np.argmax(np.var(mu, axis=0)))
    along = prior_span(mu[:, j], lv[:, j], len(values))
    latents = np.tile(base, (len(along), 1))
    latents[:, z_dim + i * u_dim + j] = along
    out[f"prior_{prior['names'][i]}"] = prior_components_figure(
        mu[:, j], lv[:, j], w, along, decode_latent(latents),
        title=f"{prior['names'][i]}: p(c=k) p(u_{i}[{j}] | c=k)")
  out["samples"] = generation_grid(decode_latent, np.random.default_rng(seed), z_dim,
                                   prior["means"], prior["logvars"], prior["weights"])
  return out
