"""Small synthetic stand-ins written in the canonical on-disk formats.

Used by the tests, and by ``smoke`` experiment variants when the real files are missing
(``load_dataset(..., synthetic_if_missing=True)``). Nothing here resembles the real data beyond
its format; every folder gets a ``SYNTHETIC.txt`` saying so, and ``ensure_synthetic`` logs a
warning each time it is used. The images still carry structure that a model can learn:

- MNIST / Fashion-MNIST: ``mnist/`` and ``fashion_mnist/`` with the four IDX gzip files;
  class ``k`` is a fixed stroke glyph (ring, bar, cross, triangle, ...) under a random affine
  jitter; Fashion uses thicker strokes and a permuted class -> glyph map.
- 3D Chairs: ``chairs/rendered_chairs/<model>/renders/*.png``, 128x128 RGB on white, a seat,
  back and legs whose proportions depend on the model and whose foreshortening depends on the view.
- CelebA: ``celeba/img_align_celeba/*.jpg`` (178x218), ``list_attr_celeba.txt`` with the 40
  real attribute names and ``list_eval_partition.txt``; Male, Smiling, Eyeglasses, Pale_Skin,
  Black_Hair, Blond_Hair are drawn into the image, the other attributes are random.
- dSprites: ``dsprites/dsprites_synthetic_subset.npz`` with the official keys ``imgs``,
  ``latents_values``, ``latents_classes`` for a random subset of the factor grid, drawn with
  ``dsprites_render`` (read it with ``DSprites(path=...)``).
"""
from __future__ import annotations

import logging
import os
import pathlib
import shutil
import tempfile

import numpy as np
from PIL import Image
from PIL import ImageDraw

from disentangle import atomic
from disentangle.data.datasets import dsprites
from disentangle.data.datasets import mnist

_LOG = logging.getLogger(__name__)

DSPRITES_SUBSET = "dsprites/dsprites_synthetic_subset.npz"
CELEBA_ATTRIBUTES = (
    "5_o_Clock_Shadow Arched_Eyebrows Attractive Bags_Under_Eyes Bald Bangs Big_Lips Big_Nose "
    "Black_Hair Blond_Hair Blurry Brown_Hair Bushy_Eyebrows Chubby Double_Chin Eyeglasses Goatee "
    "Gray_Hair Heavy_Makeup High_Cheekbones Male Mouth_Slightly_Open Mustache Narrow_Eyes "
    "No_Beard Oval_Face Pale_Skin Pointy_Nose Receding_Hairline Rosy_Cheeks Sideburns Smiling "
    "Straight_Hair Wavy_Hair Wearing_Earrings Wearing_Hat Wearing_Lipstick Wearing_Necklace "
    "Wearing_Necktie Young").split()

# Glyphs in a [-1, 1]^2 box (x right, y down): ("seg", x0, y0, x1, y1), ("ring", cx, cy, r),
# ("disk", cx, cy, r).
_GLYPHS = (
    (("ring", 0, 0, .62),),
    (("seg", 0, -.8, 0, .8), ("seg", -.3, -.5, 0, -.8)),
    (("seg", -.5, -.55, .5, -.6), ("seg", .5, -.6, .5, 0), ("seg", .5, 0, -.5, .8),
     ("seg", -.5, .8, .6, .8)),
    (("seg", 0, -.8, 0, .8), ("seg", -.7, 0, .7, 0)),
    (("seg", -.6, -.7, .6, .7), ("seg", .6, -.7, -.6, .7)),
    (("seg", -.6, -.6, .6, -.6), ("seg", .6, -.6, .6, .6), ("seg", .6, .6, -.6, .6),
     ("seg", -.6, .6, -.6, -.6)),
    (("seg", 0, -.75, .7, .65), ("seg", .7, .65, -.7, .65), ("seg", -.7, .65, 0, -.75)),
    (("seg", -.6, -.7, .6, -.7), ("seg", .6, -.7, -.1, .8)),
    (("ring", 0, -.42, .34), ("ring", 0, .42, .38)),
    (("disk", 0, 0, .5),),
)
_FASHION_GLYPH = (5, 1, 9, 6, 0, 2, 3, 7, 8, 4)


def _glyph_images(glyphs: list[int], rng: np.random.Generator, width: float) -> np.ndarray:
  """28x28 uint8 images [N] of the glyphs ``_GLYPHS[g]``, each under a random rotation, scale
  and shift; the images of one glyph drawn together."""
  u = rng.random((len(glyphs), 5))  # per image: rotation, scale, shift (2), stroke width
  uniform = lambda v, low, high: low + (high - low) * v  # noqa: E731  (Generator.uniform's)
  angle, scale = uniform(u[:, 0], -0.25, 0.25), uniform(u[:, 1], 0.8, 1.1)
  shift = uniform(u[:, 2:4], -0.15, 0.15)
  stroke = width * uniform(u[:, 4], 0.8, 1.25)
  rows, cols = np.mgrid[0:28, 0:28].astype(np.float64)
  out = np.empty((len(glyphs), 28, 28), np.uint8)
  for g in sorted(set(glyphs)):
    i = np.flatnonzero(np.asarray(glyphs) == g)
    a, s = angle[i, None, None], scale[i, None, None]
    x = (cols - 13.5) / 11.0 - shift[i, 0, None, None]
    y = (rows - 13.5) / 11.0 - shift[i, 1, None, None]
    # Inverse transform of the pixel centres into the glyph box.
    gx = (np.cos(a) * x + np.sin(a) * y) / s
    gy = (-np.sin(a) * x + np.cos(a) * y) / s
    dist = np.full(gx.shape, np.inf)
    for kind, *p in _GLYPHS[g]:
      if kind == "seg":
        ax, ay, bx, by = p
        dx, dy = bx - ax, by - ay
        t = np.clip(((gx - ax) * dx + (gy - ay) * dy) / (dx * dx + dy * dy), 0, 1)
        d = np.hypot(gx - ax - t * dx, gy - ay - t * dy)
      elif kind == "ring":
        d = np.abs(np.hypot(gx - p[0], gy - p[1]) - p[2])
      else:
        d = np.maximum(np.hypot(gx - p[0], gy - p[1]) - p[2], 0.0)
      dist = np.minimum(dist, d)
    out[i] = np.rint(255 * np.clip((stroke[i, None, None] - dist * s) * 11.0 + 0.5, 0, 1))
  return out


def write_mnist_like(directory: str | os.PathLike, folder: str = "mnist", *,
                     num_train: int = 2000, num_test: int = 500, seed: int = 0) -> pathlib.Path:
  """Writes ``<directory>/<folder>/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz``."""
  fashion = folder == "fashion_mnist"
  rng = np.random.default_rng(seed + (1 if fashion else 0))
  out = pathlib.Path(directory) / folder
  for prefix, n in (("train", num_train), ("t10k", num_test)):
    labels = rng.integers(0, 10, size=n).astype(np.uint8)
    images = _glyph_images([_FASHION_GLYPH[k] if fashion else int(k) for k in labels], rng,
                           0.3 if fashion else 0.16)
    mnist.write_idx(out / f"{prefix}-images-idx3-ubyte.gz", images)
    mnist.write_idx(out / f"{prefix}-labels-idx1-ubyte.gz", labels)
  return out


def write_chairs(directory: str | os.PathLike, *, num_models: int = 6, num_views: int = 8,
                 size: int = 128, seed: int = 0) -> pathlib.Path:
  """Writes ``<directory>/chairs/rendered_chairs/<model>/renders/image_<view>_....png``."""
  rng = np.random.default_rng(seed)
  root = pathlib.Path(directory) / "chairs" / "rendered_chairs"
  for m in range(num_models):
    back_h, leg_h, seat_w = rng.uniform(0.2, 0.4), rng.uniform(0.15, 0.3), rng.uniform(0.25, 0.4)
    gray = int(rng.integers(40, 160))
    folder = root / f"model_{m:04d}" / "renders"
    folder.mkdir(parents=True, exist_ok=True)
    for v in range(num_views):
      az = 2 * np.pi * v / num_views
      c, s = np.cos(az), np.sin(az)
      img = Image.new("RGB", (size, size), (255, 255, 255))
      draw = ImageDraw.Draw(img)
      # Shrunk to lie inside the central 2/3 that the loader keeps (as in the real renders).
      px = lambda x, y: (size * (0.5 + 0.6 * x), size * (0.5 + 0.6 * (y - 0.05)))  # noqa: E731
      half_w, depth = seat_w / 2 * abs(c) + 0.05, 0.12 * s
      seat_y = 0.1
      draw.polygon([px(-half_w, seat_y - depth), px(half_w, seat_y - depth),
                    px(half_w, seat_y + depth), px(-half_w, seat_y + depth)],
                   fill=(gray,) * 3)
      draw.rectangle([px(-half_w, seat_y - depth - back_h), px(half_w, seat_y - depth)],
                     fill=(gray // 2,) * 3)
      for lx in (-half_w, half_w - 0.03):
        draw.rectangle([px(lx, seat_y + depth), px(lx + 0.03, seat_y + depth + leg_h)],
                       fill=(gray // 3,) * 3)
      img.save(folder / f"image_{v:03d}_p020_t{int(np.degrees(az)):03d}_r096.png")
  return root.parent


def write_celeba(directory: str | os.PathLike, *, num_images: int = 48,
                 seed: int = 0) -> pathlib.Path:
  """Writes ``<directory>/celeba/`` with JPEGs, ``list_attr_celeba.txt`` and the partition."""
  rng = np.random.default_rng(seed)
  root = pathlib.Path(directory) / "celeba"
  img_dir = root / "img_align_celeba"
  img_dir.mkdir(parents=True, exist_ok=True)
  attrs = np.where(rng.random((num_images, len(CELEBA_ATTRIBUTES))) < 0.5, 1, -1)
  col = {n: i for i, n in enumerate(CELEBA_ATTRIBUTES)}
  attrs[attrs[:, col["Blond_Hair"]] == 1, col["Black_Hair"]] = -1
  names = [f"{i + 1:06d}.jpg" for i in range(num_images)]
  for name, a in zip(names, attrs):
    on = lambda n: a[col[n]] == 1  # noqa: E731
    bg = tuple(int(x) for x in rng.integers(60, 200, size=3))
    img = Image.new("RGB", (178, 218), bg)
    draw = ImageDraw.Draw(img)
    hair = (20, 15, 10) if on("Black_Hair") else (230, 200, 90) if on("Blond_Hair") else (
        110, 70, 40)
    draw.ellipse([39, 45, 139, 165], fill=hair)
    skin = (250, 225, 210) if on("Pale_Skin") else (200, 150, 110)
    face_w = 42 if on("Male") else 36
    draw.ellipse([89 - face_w, 65, 89 + face_w, 175], fill=skin)
    for ex in (72, 106):
      draw.ellipse([ex - 5, 105, ex + 5, 113], fill=(40, 30, 30))
      if on("Eyeglasses"):
        draw.rectangle([ex - 12, 100, ex + 12, 118], outline=(0, 0, 0), width=3)
    if on("Smiling"):
      draw.arc([70, 130, 108, 158], 20, 160, fill=(150, 30, 40), width=4)
    else:
      draw.line([74, 148, 104, 148], fill=(150, 30, 40), width=4)
    img.save(img_dir / name, quality=95)
  lines = [str(num_images), " ".join(CELEBA_ATTRIBUTES)]
  lines += [f"{n} " + " ".join(f"{v:2d}" for v in a) for n, a in zip(names, attrs)]
  (root / "list_attr_celeba.txt").write_text("\n".join(lines) + "\n")
  part = np.digitize(np.arange(num_images) / max(num_images, 1), [0.7, 0.85])
  (root / "list_eval_partition.txt").write_text(
      "".join(f"{n} {p}\n" for n, p in zip(names, part)))
  return root


def write_dsprites_subset(directory: str | os.PathLike, *, num_images: int = 2048,
                          seed: int = 0) -> pathlib.Path:
  """Writes ``<directory>/dsprites/dsprites_synthetic_subset.npz`` (rendered, official keys)."""
  rng = np.random.default_rng(seed)
  indices = np.sort(rng.choice(dsprites.NUM_EXAMPLES, size=num_images, replace=False))
  classes, values = dsprites.factors_to_latents(dsprites.index_to_factors(indices))
  path = pathlib.Path(directory) / DSPRITES_SUBSET
  path.parent.mkdir(parents=True, exist_ok=True)
  np.savez_compressed(path, imgs=dsprites.render_factors(classes[:, 1:]),
                      latents_values=values, latents_classes=classes)
  return path


def write_dsprites_full(path: str | os.PathLike, chunk: int = 32768) -> pathlib.Path:
  """Writes the whole rendered grid (737,280 images) as an npz in the official format and order.

  Uncompressed (3 GB of ``imgs``), so reading it costs what reading the official file costs after
  decompression; for timing the evaluation on the file code path when the official file is
  missing (``python -m benchmarks.eval --write_rendered_npz=PATH``). Written atomically.
  """
  path = pathlib.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  indices = np.arange(dsprites.NUM_EXAMPLES)
  classes, values = dsprites.factors_to_latents(dsprites.index_to_factors(indices))
  imgs = np.empty((dsprites.NUM_EXAMPLES, 64, 64), np.uint8)
  for start in range(0, dsprites.NUM_EXAMPLES, chunk):
    stop = min(start + chunk, dsprites.NUM_EXAMPLES)
    imgs[start:stop] = dsprites.render_factors(classes[start:stop, 1:])
  with atomic.replacing(path) as tmp, open(tmp, "wb") as f:
    np.savez(f, imgs=imgs, latents_values=values, latents_classes=classes)
  return path


_WRITERS = {
    "mnist": ("mnist", lambda d: write_mnist_like(d, "mnist")),
    "fashion_mnist": ("fashion_mnist", lambda d: write_mnist_like(d, "fashion_mnist")),
    "chairs": ("chairs", write_chairs),
    "celeba": ("celeba", write_celeba),
    "dsprites": ("dsprites", write_dsprites_subset),
}


def ensure_synthetic(name: str, directory: str | os.PathLike) -> pathlib.Path:
  """Creates the synthetic stand-in of dataset ``name`` under ``directory`` unless present.

  Returns ``directory``, to be used as the ``data_dir`` of the loaders (with checksums off; for
  dSprites read ``directory / DSPRITES_SUBSET`` with ``DSprites(path=...)``). The folder is made
  in a temporary sibling and renamed into place, so concurrent callers do not see half of it.
  """
  if name not in _WRITERS:
    raise ValueError(f"no synthetic writer for {name!r}; known: {sorted(_WRITERS)}")
  folder, writer = _WRITERS[name]
  directory = pathlib.Path(directory)
  target = directory / folder
  _LOG.warning("!!! SYNTHETIC DATA: using generated stand-ins for %r from %s, NOT the real "
               "dataset; results mean nothing beyond smoke testing !!!", name, target)
  if (target / "SYNTHETIC.txt").is_file():
    return directory
  directory.mkdir(parents=True, exist_ok=True)
  tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{folder}.", dir=directory))
  try:
    writer(tmp)
    (tmp / folder / "SYNTHETIC.txt").write_text(
        f"Synthetic stand-in for {name} written by disentangle.data.datasets.synthetic; not real data.\n")
    try:
      os.rename(tmp / folder, target)
    except OSError:
      if not (target / "SYNTHETIC.txt").is_file():
        raise
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
  return directory
