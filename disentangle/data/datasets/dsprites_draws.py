"""The per-sample draws of the colour, noise and scream dSprites, one function of numpy and JAX.

disentanglement_lib draws a new colour / noise / patch each time it samples an image
(``data/ground_truth/dsprites.py``: ``ColorDSprites.sample_observations_from_factors``, lines
120-131; ``NoisyDSprites``, lines 153-158; ``ScreamDSprites``, lines 185-198; training reads
``sample_observations`` afresh for every example, ``data/ground_truth/util.py``, lines 25-35).
Under ``dataset.variant_draw = 'per_sample'`` (``dsprites_variants``) the image in row ``p`` of
the batch of ``step`` of a run of ``seed`` draws from its own counter-based stream, so that the
host pipeline (numpy) and the compiled step on the device (``jax.numpy``,
``disentangle.train.device_data``) compute the same image bit for bit, and a run stays a
function of its config and seed:

- the row's key (two uint32 words) is Threefry-2x32 with 20 rounds (Salmon et al., "Parallel
  random numbers: as easy as 1, 2, 3", SC 2011; the generator of ``jax.random``) of the counter
  ``(stream, p)`` under the key ``(seed mod 2**32, step)`` (:func:`batch_keys`); ``stream`` tells
  the batch's images apart (:data:`IMAGE`, :data:`LABELLED`, :data:`PAIR`), ``p`` is the row's
  place in the global batch (independent of how processes share it). :data:`ROWS` (step 0,
  ``p`` the stored row) keys one draw per stored row: ``get_images`` of a per-sample set, the
  evaluation's points;
- its ``count`` words are Threefry-2x32 of the counters ``(j, 0)``, ``j = 0, 1, ...`` under the
  row's key, the two output words of counter ``j`` being words ``2j`` and ``2j + 1``
  (:func:`words`);
- colour: ``0.5 + (w >> 9) 2**-24`` for words 0-2 (U(0.5, 1) on a 2**-24 grid, exact in
  float32), the sprite times it;
- noise: ``(w >> 8) 2**-24`` (U(0, 1) on a 2**-24 grid) for words 0-12287, C order over
  64 x 64 x 3, ``min(sprite + u, 1)``;
- scream: the patch's top row ``w0 mod (H - 64)`` and left column ``w1 mod (W - 64)`` (the
  range of disentanglement_lib's ``randint``; the modulo's bias is below (H - 64) / 2**32), the
  colour ``(w >> 8) 2**-24`` of words 2-4, ``(patch + colour) / 2`` inverted (``1 - x``) on the
  sprite, in float32 arithmetic on the painting in float32.

Where we depart: disentanglement_lib draws from numpy's ``RandomState`` (float64 uniforms); these
are other numbers of the same distributions, up to the 2**-24 grid and the modulo's bias.
"""
from __future__ import annotations

import numpy as np

IMAGE, LABELLED, PAIR, ROWS = 0, 1, 2, 3  # the stream word of the row keys
NAMES = ("color_dsprites", "noisy_dsprites", "scream_dsprites")  # the sets drawn here
NUM_WORDS = {"color_dsprites": 3, "noisy_dsprites": 64 * 64 * 3, "scream_dsprites": 5}
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA


def threefry2x32(xp, k0, k1, x0, x1):
  """Threefry-2x32, 20 rounds, of the counters ``(x0, x1)`` under the keys ``(k0, k1)``: uint32
  arrays (broadcast together) of module ``xp`` (numpy or ``jax.numpy``); the two output words.

  The rounds are written with augmented assignments: numpy updates two buffers of its own in
  place (1.5x faster than a new array per operation), JAX rebinds; uint32 additions wrap."""
  k0, k1, x0, x1 = (xp.asarray(v, xp.uint32) for v in (k0, k1, x0, x1))
  with np.errstate(over="ignore"):  # uint32 arithmetic wraps, as intended (numpy scalars warn)
    ks = (k0, k1, k0 ^ k1 ^ xp.uint32(_PARITY))
    x0, x1 = (xp.array(v) for v in xp.broadcast_arrays(x0 + ks[0], x1 + ks[1]))
    for i in range(5):
      for r in _ROTATIONS[i % 2]:
        x0 += x1
        high = x1 << r  # x1 rotated left by r: (x1 << r) | (x1 >> (32 - r))
        x1 >>= 32 - r
        x1 |= high
        x1 ^= x0
      x0 += ks[(i + 1) % 3]
      x1 += ks[(i + 2) % 3]
      x1 += xp.uint32(i + 1)
  return x0, x1


def batch_keys(seed: int, step: int, stream: int, positions) -> np.ndarray:
  """uint32 [n, 2]: the keys of the rows at ``positions`` of ``stream`` in the batch of ``step``
  of a run of ``seed`` (module docstring)."""
  positions = np.asarray(positions, np.int64).reshape(-1)
  if np.any(positions < 0) or np.any(positions >= 2**32) or not 0 <= int(step) < 2**32:
    raise ValueError(f"step {step} and positions must lie in [0, 2**32)")
  y0, y1 = threefry2x32(np, np.uint32(int(seed) % 2**32), np.uint32(step), np.uint32(stream),
                        positions.astype(np.uint32))
  return np.stack([y0, y1], axis=-1)


def words(xp, keys, count: int):
  """uint32 [n, count]: the first ``count`` words of the streams of ``keys`` (uint32 [n, 2])."""
  j = xp.arange((count + 1) // 2, dtype=xp.uint32)
  y0, y1 = threefry2x32(xp, keys[:, 0:1], keys[:, 1:2], j[None, :], xp.uint32(0))
  return xp.stack([y0, y1], axis=-1).reshape(keys.shape[0], -1)[:, :count]


def _unit(xp, w):
  """U(0, 1) on the 2**-24 grid, float32, exact."""
  return (w >> 8).astype(xp.float32) * xp.float32(2.0**-24)


def paint(xp, name: str, sprites, keys, painting=None):
  """float32 [..., 64, 64, 3]: the binary ``sprites`` [..., 64, 64, 1] (float32 0 / 1) of the set
  ``name`` drawn with the row ``keys`` [..., 2] (:func:`batch_keys`); ``painting``: float32
  [H, W, 3], H and W above 64, for the scream set."""
  lead = tuple(sprites.shape[:-3])
  sprites = sprites.reshape((-1, 64, 64, 1))
  keys = xp.asarray(keys, xp.uint32).reshape((-1, 2))
  n = sprites.shape[0]
  w = words(xp, keys, NUM_WORDS[name])
  if name == "color_dsprites":
    colour = (w >> 9).astype(xp.float32) * xp.float32(2.0**-24) + xp.float32(0.5)
    out = sprites * colour[:, None, None, :]
  elif name == "noisy_dsprites":
    out = xp.minimum(sprites + _unit(xp, w).reshape((n, 64, 64, 3)), xp.float32(1.0))
  elif name == "scream_dsprites":
    h, wd = painting.shape[0], painting.shape[1]
    top = (w[:, 0] % xp.uint32(h - 64)).astype(xp.int32)
    left = (w[:, 1] % xp.uint32(wd - 64)).astype(xp.int32)
    span = xp.arange(64, dtype=xp.int32)
    rows, cols = top[:, None] + span, left[:, None] + span
    patch = painting[rows[:, :, None], cols[:, None, :]]  # [n, 64, 64, 3]
    background = (patch + _unit(xp, w[:, 2:5])[:, None, None, :]) / xp.float32(2.0)
    out = xp.where(sprites == 1, xp.float32(1.0) - background, background)
  else:
    raise ValueError(f"no per-sample draw for {name!r}; sets drawn: {', '.join(NAMES)}")
  return out.astype(xp.float32).reshape(lead + (64, 64, 3))
