"""PartedVAE's latent heads and learned prior (Hajimiri et al., Sec. 4, Fig. 3, App. C).

Pure functions on explicit parameter dicts (no Flax module), so that the block structure can be
checked by Jacobians and the pieces reused by the evaluation side.

- Attention, one block per discrete variable i (Tables 3-5, "FC. 256 (a from c)"):
  a_i = sigmoid(s * (W_i c~_i + b_i)) in (0, 1)^H. Only c~_i enters a_i (the authors' masked,
  partially connected layer; separate dense layers are the same function).
- u head of variable i ("FC. 2 x d_u (u from h.a)"): (mu_{u_i}, log sigma^2_{u_i}) =
  V_i (h * a_i) + e_i.
- Sharpness s(t) = min(s_0 + s_step * t, s_max) in training (authors' code: 1 + 2e-4 t, up to 8)
  and the schedule's limit at evaluation (s_max, or s_0 when s_step = 0: the paper's plain sigmoid
  with s_0 = 1).
- Prior p_psi(u_i | c_i = k) = N(mu_{i,k}, diag sigma^2_{i,k}), log sigma^2 = 2 tanh(raw) - 1 in
  (-3, 1) (the authors' ``my_tanh``); mu and raw initialised N(0, 1). Rows of the [sum L_i, d_u]
  tables are the components of all variables in order.
"""
from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from disentangle.nn import networks


def init_heads(rng, sizes: Sequence[int], hidden_units: int, u_dim: int,
               init_scheme: str = "reference") -> dict:
  """Parameters of the attention and u heads: ``attention_i`` [L_i, H] and ``u_i`` [H, 2 d_u]."""
  _, dense_init, _ = networks.initializers(init_scheme)
  keys = jax.random.split(rng, 2 * len(sizes))
  params = {}
  for i, size in enumerate(sizes):
    params[f"attention_{i}"] = {"kernel": dense_init(keys[2 * i], (size, hidden_units)),
                                "bias": jnp.zeros((hidden_units,), jnp.float32)}
    params[f"u_{i}"] = {"kernel": dense_init(keys[2 * i + 1], (hidden_units, 2 * u_dim)),
                        "bias": jnp.zeros((2 * u_dim,), jnp.float32)}
  return params


def init_prior(rng, sizes: Sequence[int], u_dim: int) -> dict:
  """psi: ``mean`` and ``raw`` [sum L_i, d_u], both N(0, 1) (authors' ``torch.randn``)."""
  k_mean, k_raw = jax.random.split(rng)
  shape = (int(sum(sizes)), u_dim)
  return {"mean": jax.random.normal(k_mean, shape, jnp.float32),
          "raw": jax.random.normal(k_raw, shape, jnp.float32)}


def prior_logvar(raw: jax.Array) -> jax.Array:
  """log sigma^2 = 2 tanh(raw) - 1 in (-3, 1): sigma in (0.22, 1.65) (authors' bound)."""
  return 2.0 * jnp.tanh(raw) - 1.0


def prior_components(prior: dict, sizes: Sequence[int]) -> list:
  """[(means [L_i, d_u], logvars [L_i, d_u]) per variable] of p_psi(u_i | c_i = k)."""
  cuts = np.cumsum(sizes)[:-1].tolist()
  means = jnp.split(prior["mean"], cuts, axis=0)
  logvars = jnp.split(prior_logvar(prior["raw"]), cuts, axis=0)
  return list(zip(means, logvars))


def sharpness(t, *, start: float, step: float, maximum: float) -> jax.Array:
  """s(t) = min(start + step * t, maximum) (authors' ``sigmoid_coef``; t counted from 1)."""
  return jnp.minimum(start + step * jnp.asarray(t, jnp.float32), maximum)


def eval_sharpness(*, start: float, step: float, maximum: float) -> float:
  """The sharpness at evaluation: the limit of the training schedule."""
  return float(maximum) if step > 0 else float(start)


def attention(head: dict, code: jax.Array, s) -> jax.Array:
  """a = sigmoid(s (code W + b)): code [..., L] -> [..., H]."""
  return jax.nn.sigmoid(s * (code @ head["kernel"] + head["bias"]))


def u_posterior(heads: dict, i: int, h: jax.Array, code: jax.Array, s):
  """(mean, logvar) [..., d_u] of q(u_i | c_i = code, x) from h [..., H] and code [..., L_i].

  Broadcasts: h [B, 1, H] with code [L_i, L_i] (the identity) gives the L_i posteriors
  q(u_i | c_i = k, x) of every image, [B, L_i, d_u].
  """
  a = attention(heads[f"attention_{i}"], code, s)
  out = (h * a) @ heads[f"u_{i}"]["kernel"] + heads[f"u_{i}"]["bias"]
  return jnp.split(out, 2, axis=-1)


def all_u_posteriors(heads: dict, h: jax.Array, codes: Sequence[jax.Array], s):
  """concat_i of :func:`u_posterior` for the codes of every variable: (mean, logvar) [B, K d_u]."""
  parts = [u_posterior(heads, i, h, c, s) for i, c in enumerate(codes)]
  return (jnp.concatenate([m for m, _ in parts], axis=-1),
          jnp.concatenate([v for _, v in parts], axis=-1))
