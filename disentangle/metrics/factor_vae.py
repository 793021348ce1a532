"""FactorVAE disentanglement score (Kim & Mnih, 2018) as CascadeVAE evaluates it (supplement C).

Three protocols, chosen with `protocol=`; every setting is returned beside the score.

``'cascadevae'`` (default; CascadeVAE supplement C and the authors' `utils/eval_op.py`):

1. Encode the whole dataset (posterior means, log-variances, discrete code). Prune continuous
   dimension j unless mean_x KL(q(z_j|x) || N(0, 1)) > `prune_kl` = 0.1 (only when the encoder
   gives log-variances; the authors keep `kl > thr`, so a dimension exactly at 0.1 is pruned).
2. Global variance of each kept dimension over those points, the pairwise form of supp. C:
     Var_j = 1 / (2N(N-1)) sum_{p,q} d(z_pj, z_qj),
   d = (z_p - z_q)^2 for continuous dimensions, which is exactly the ddof=1 variance (authors'
   `get_ginni_variance_conti`), and d = 1[d_p != d_q] for the discrete dimension z_{m+1} = d,
   computed from the class counts n_c in O(N): Var_d = (N^2 - sum_c n_c^2) / (2N(N-1))
   (`get_ginni_variance_discrete`). The two are the same functional: for a 0/1 code the discrete
   form equals the ddof=1 variance of the code, so the ratios below compare like with like.
3. M = `num_votes` = 800 votes, spread evenly over the factors with more than one value
   (800 = 160 x 5 on dSprites; the authors use int(M / K) per factor, a remainder is dropped).
   A vote fixes factor k at a value drawn from the data, takes L = `batch_size` = 100 examples
   with that value, computes every kept dimension's variance (same formulas, N -> L) divided by
   (global variance + `eps`), eps = 1e-10 as the authors, and votes for the argmin j (continuous
   dimensions first, then d, so ties go to the lowest continuous index as in their code).
4. V_jk = number of votes (j, k); score = sum_j max_k V_jk / M (supp. C). Chance is 1/K.

   The authors encode the dataset once and draw the vote examples from those encodings
   (`latent_conti[sampler(...)]`); we do the same whenever step 1 covered the whole dataset
   (`vote_source='dataset_encodings'`): the L examples are drawn uniformly with replacement from
   the rows with factor k = v, which on a complete grid such as dSprites is their sampler (the
   other factors uniform and independent). Otherwise each vote draws fresh observations through
   the ground-truth protocol (`vote_source='fresh_samples'`).

   The "whole dataset" is every row of `dataset.factors`, or every combination when the dataset
   is a complete grid (see `representation.enumerate_factors`), when it has at most
   `whole_dataset_max` = 1,000,000 examples (dSprites has 737,280); a larger or non-enumerable
   dataset uses a random sample of `variance_sample_size` = 100,000 points (relative standard
   error of a variance about sqrt(2/1e5) = 0.45%). An explicit `num_variance_points` samples that
   many points instead.

``'disentanglement_lib'`` (Locatello et al. 2019, `evaluation/metrics/factor_vae.py` with the
study's gin settings): global variances (ddof=1) of the means over 10,000 sampled points; prune
dimensions with std < 0.05; 10,000 training votes and 5,000 held-out evaluation votes, each over
a batch of 64 fresh observations with the fixed factor chosen uniformly at random per vote (not
spread evenly) at the value of the batch's first sample; a majority-vote classifier (for every
dimension the factor it voted for most in training) is scored on the evaluation votes:
score = eval accuracy. The discrete code, when given, enters as in the CascadeVAE protocol; with
several codes (PartedVAE's K categorical variables) each is one dimension m, m + 1, ...

``'partedvae'`` (PartedVAE Sec. 5.1, Tables 1-2; the authors' ``utils/metrics.py::
dis_by_fact_metric``): the representation is the posterior mean [mu_z, mu_u] of every example of
the dataset (no discrete code: ``use_discrete`` is ignored); each dimension is divided by its
standard deviation over those examples (ddof 0); for each factor with more than one value
(dSprites: shape, scale, orientation, x, y; colour has one) and each of its values, the examples
with that value, in one seeded random order of the whole dataset (the authors iterate a shuffled
loader; they draw unseeded, we take ``rng``), are cut into consecutive groups of L = `batch_size`
= 100 (the remainder is dropped), and each group votes for argmin_j Var_j (ddof 0) of the
normalised dimensions (ties: lowest index, as ``np.argmin``). So the number of votes is fixed by
the data (dSprites: about 36,800), not chosen. Then the votes of every dimension whose std is
below `prune_std` = 0.1 are zeroed (such a dimension still takes part in the argmin, as in their
code) and score = sum_j max_k V_jk / sum V over the remaining votes (a pruned dimension leaves
numerator and denominator). Departures, recorded: a dimension with std exactly 0 cannot be
normalised (0/0; in the authors' code its NaN wins every argmin and the score is NaN): it is left
out of the argmin (`constant_dims`; it would be pruned anyway); with no vote left the score is 0.
A dataset too large to be encoded whole (more than `whole_dataset_max`, or not enumerable) uses
`variance_sample_size` sampled points (or `num_variance_points`), recorded.

Departures of the first two from both codes, recorded in the output: a dimension whose global variance is exactly
zero on the variance points is dropped (`constant_dims`) instead of winning every vote through
0 / (0 + eps); the fixed value is drawn from the data distribution (uniform on a full grid, as the
authors' `randint(nclasses[k])`).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from disentangle.metrics.information import kl_per_dim
from disentangle.metrics.representation import Representation
from disentangle.metrics.representation import dataset_size
from disentangle.metrics.representation import encode_factors
from disentangle.metrics.representation import encode_in_batches
from disentangle.metrics.representation import enumerate_factors

# Settings of each protocol; an argument left at None takes the protocol's value.
PROTOCOLS = {
    "cascadevae": dict(num_votes=800, num_eval_votes=0, batch_size=100,
                       num_variance_points=None, prune_kl=0.1, prune_std=None,
                       even_votes=True),
    "disentanglement_lib": dict(num_votes=10_000, num_eval_votes=5_000, batch_size=64,
                                num_variance_points=10_000, prune_kl=None, prune_std=0.05,
                                even_votes=False),
    # num_votes: fixed by the data (every group of L examples of every factor value votes).
    "partedvae": dict(num_votes=None, num_eval_votes=0, batch_size=100,
                      num_variance_points=None, prune_kl=None, prune_std=0.1, even_votes=False),
}


def pairwise_discrete_variance(codes: np.ndarray, num_classes: Optional[int] = None) -> np.ndarray:
  """Var_d = (L^2 - sum_c n_c^2) / (2 L (L - 1)) along the last axis of int codes [..., L].

  The supplement-C variance of a discrete dimension, 1/(2L(L-1)) sum_{p,q} 1[d_p != d_q],
  from the class counts n_c; vectorised over leading axes.
  """
  codes = np.asarray(codes, dtype=np.int64)
  lead, length = codes.shape[:-1], codes.shape[-1]
  c = int(num_classes if num_classes is not None else codes.max(initial=0) + 1)
  flat = codes.reshape(-1, length)
  rows = np.arange(len(flat))[:, None]
  counts = np.bincount((rows * c + flat).ravel(), minlength=len(flat) * c).reshape(len(flat), c)
  same = np.sum(counts.astype(np.float64) ** 2, axis=1)
  return ((length * length - same) / (2.0 * length * (length - 1))).reshape(lead)


def score_from_votes(votes: np.ndarray) -> float:
  """sum_j max_k V_jk / M for a vote matrix V [dims, factors] (CascadeVAE supp. C)."""
  total = votes.sum()
  return float(votes.max(axis=1).sum() / total) if total else 0.0


def _global_statistics(rep: Representation, settings: dict, use_discrete: bool):
  """Global variances of all dimensions [m (+1)] and the mask of dimensions kept."""
  m = rep.num_continuous
  variances = np.var(rep.mean, axis=0, ddof=1)
  keep = variances > 0
  info = {"constant_dims": [int(j) for j in np.flatnonzero(variances <= 0)]}
  if settings["prune_kl"] is not None and rep.logvar is not None:
    kl = kl_per_dim(rep.mean, rep.logvar)
    keep &= kl > settings["prune_kl"]
    info["kl_per_dim"] = kl
  if settings["prune_std"] is not None:
    keep &= np.sqrt(variances) >= settings["prune_std"]
  info["pruned_dims"] = [int(j) for j in np.flatnonzero(~keep)]
  if use_discrete:  # one dimension per discrete code
    codes = rep.codes
    var_d = np.array([pairwise_discrete_variance(c, int(c.max(initial=0)) + 1) for c in codes.T])
    variances = np.append(variances, var_d)
    keep = np.append(keep, var_d > 0)
    info["constant_dims"] += [m + int(k) for k in np.flatnonzero(var_d <= 0)]
  return variances, keep, info


def _vote(rep: Representation, num: int, length: int, global_var: np.ndarray, keep: np.ndarray,
          eps: float, use_discrete: bool) -> np.ndarray:
  """argmin_j local / global variance for `num` consecutive groups of `length` rows, [num]."""
  m = rep.num_continuous
  kept = np.flatnonzero(keep)
  cont = kept[kept < m]
  mean = rep.mean[:num * length, cont].reshape(num, length, len(cont))
  local = np.var(mean, axis=1, ddof=1)
  codes = kept[kept >= m] - m
  if use_discrete and len(codes):
    blocks = rep.codes[:num * length, codes].reshape(num, length, len(codes)).transpose(0, 2, 1)
    local = np.concatenate([local, pairwise_discrete_variance(blocks)], axis=1)
  ratio = local / (global_var[kept] + eps)
  return kept[np.argmin(ratio, axis=1)]


def _vote_factors(settings: dict, num_factors: int, num_votes: int,
                  rng: np.random.Generator) -> np.ndarray:
  """Index (into the factors used) fixed by each vote: evenly spread or uniform at random."""
  if settings["even_votes"]:
    return np.repeat(np.arange(num_factors), num_votes // num_factors)
  return rng.integers(0, num_factors, size=num_votes)


def _votes_from_encodings(rows: np.ndarray, rep: Representation, vote_factors: np.ndarray,
                          factors_used: list[int], length: int, rng: np.random.Generator,
                          vote_fn) -> np.ndarray:
  """Votes drawing each vote's examples from the encodings of the whole dataset."""
  winners = np.empty(len(vote_factors), dtype=np.int64)
  n = len(rows)
  for f, k in enumerate(factors_used):
    which = np.flatnonzero(vote_factors == f)
    if not len(which):
      continue
    order = np.argsort(rows[:, k], kind="stable")
    sorted_values = rows[order, k]
    value = rows[rng.integers(0, n, size=len(which)), k]  # the data distribution of factor k
    lo = np.searchsorted(sorted_values, value, side="left")
    hi = np.searchsorted(sorted_values, value, side="right")
    pick = lo[:, None] + np.floor(rng.random((len(which), length)) * (hi - lo)[:, None])
    index = order[pick.astype(np.int64).ravel()]
    winners[which] = vote_fn(rep.take(index), len(which), length)
  return winners


def _votes_from_samples(dataset, representation_fn, vote_factors: np.ndarray,
                        factors_used: list[int], length: int, encode_batch_size: int,
                        rng: np.random.Generator, vote_fn) -> np.ndarray:
  """Votes drawing fresh observations per vote through the ground-truth protocol."""
  group = max(1, encode_batch_size // length)
  winners = np.empty(len(vote_factors), dtype=np.int64)
  for start in range(0, len(vote_factors), group):
    fixed = vote_factors[start:start + group]
    batches = []
    for f in fixed:
      k = factors_used[f]
      factors = np.array(dataset.sample_factors(length, rng), copy=True)
      factors[:, k] = factors[0, k]
      batches.append(factors)
    observations = dataset.sample_observations_from_factors(np.concatenate(batches), rng)
    rep = encode_in_batches(representation_fn, observations,
                            max(encode_batch_size, len(observations)))
    winners[start:start + len(fixed)] = vote_fn(rep, len(fixed), length)
  return winners


def _vote_matrix(winners: np.ndarray, vote_factors: np.ndarray, num_dims: int,
                 num_factors: int) -> np.ndarray:
  votes = np.zeros((num_dims, num_factors), dtype=np.int64)
  np.add.at(votes, (winners, vote_factors), 1)
  return votes


def _points(dataset, num_points: Optional[int], whole_dataset_max: int, sample_size: int,
            rng: np.random.Generator) -> tuple[np.ndarray, str]:
  """(factor rows, source) of the global statistics: with ``num_points`` None every row of a
  dataset that can be enumerated within ``whole_dataset_max`` ('whole_dataset'), else
  ``num_points`` (None: ``sample_size``) rows drawn from it ('sample')."""
  if num_points is None:
    rows = enumerate_factors(dataset)
    if rows is not None and len(rows) <= whole_dataset_max:
      return rows, "whole_dataset"
  num = sample_size if num_points is None else num_points
  return np.asarray(dataset.sample_factors(int(num), rng)), "sample"


def factor_vae_score(dataset, representation_fn: Callable[[np.ndarray], Any],
                     rng: np.random.Generator, *, protocol: str = "cascadevae",
                     num_votes: Optional[int] = None, batch_size: Optional[int] = None,
                     num_variance_points: Optional[int] = None, prune_kl: Optional[float] = None,
                     prune_std: Optional[float] = None, num_eval_votes: Optional[int] = None,
                     use_discrete: bool = True, eps: float = 1e-10,
                     encode_batch_size: int = 1000, whole_dataset_max: int = 1_000_000,
                     variance_sample_size: int = 100_000) -> dict:
  """FactorVAE score of `representation_fn` on a ground-truth `dataset` (see module doc).

  Args:
    dataset: ground-truth data (`disentangle.data.ground_truth` protocol).
    representation_fn: observations [k, ...] -> `Representation` (or means [k, m]) of k rows.
    rng: numpy Generator; all randomness of the metric.
    protocol: 'cascadevae' (supp. C, authors' code), 'disentanglement_lib' or 'partedvae'
      (PartedVAE's authors' code; see the module doc).
    num_votes: M (votes; training votes for disentanglement_lib). None: protocol default.
    batch_size: L, examples per vote. None: protocol default (100 / 64).
    num_variance_points: points for the global variances and the KL pruning. None: whole
      dataset (cascadevae, see module doc) or 10,000 (disentanglement_lib).
    prune_kl: prune continuous dims with mean KL <= this (needs logvar). None: protocol default.
    prune_std: prune continuous dims with global std < this. None: protocol default.
    num_eval_votes: held-out votes (disentanglement_lib only).
    use_discrete: include the discrete code as dimension m (when the encoder returns one; K codes:
      dimensions m .. m + K - 1).
    eps: added to the global variances before dividing.
    encode_batch_size: rows per `representation_fn` call (every call gets exactly this many).
    whole_dataset_max: largest dataset encoded whole for the global variances.
    variance_sample_size: points sampled when the dataset is larger or not enumerable.

  Returns:
    dict: 'score', 'votes' V [m (+ K), K'] (rows: continuous dims then the discrete ones; columns:
    'factors_used'), 'kept_dims', 'pruned_dims', 'constant_dims', 'global_variance', 'kl_per_dim'
    (with logvar), 'discrete_dim' (the first code's), 'num_discrete_dims', and every setting ('protocol', 'num_votes', 'batch_size',
    'num_variance_points', 'variance_source', 'vote_source', 'prune_kl', 'kl_pruning_applied',
    'prune_std', 'eps', ...); disentanglement_lib adds 'train_accuracy', 'eval_accuracy',
    'eval_votes', 'classifier'.
  """
  if protocol not in PROTOCOLS:
    raise ValueError(f"unknown protocol {protocol!r}; choose from {sorted(PROTOCOLS)}")
  settings = dict(PROTOCOLS[protocol])
  for name, value in dict(num_votes=num_votes, batch_size=batch_size,
                          num_variance_points=num_variance_points, prune_kl=prune_kl,
                          prune_std=prune_std, num_eval_votes=num_eval_votes).items():
    if value is not None:
      settings[name] = value
  sizes = tuple(int(s) for s in dataset.factor_sizes)
  factors_used = [k for k, s in enumerate(sizes) if s > 1]
  num_factors = len(factors_used)
  length = int(settings["batch_size"])
  if length < 2:
    raise ValueError("batch_size must be at least 2 (a variance needs two examples)")
  if protocol == "partedvae":
    if num_votes is not None or num_eval_votes or prune_kl is not None:
      raise ValueError("protocol 'partedvae' takes no num_votes (fixed by the data), "
                       "num_eval_votes or prune_kl")
    return _partedvae_score(dataset, representation_fn, rng, settings, sizes, factors_used,
                            encode_batch_size, whole_dataset_max, variance_sample_size)

  # Global variances: the whole dataset, or a sample.
  rows, variance_source = _points(dataset, settings["num_variance_points"], whole_dataset_max,
                                  variance_sample_size, rng)
  settings["num_variance_points"] = len(rows)
  rep = encode_factors(dataset, representation_fn, rows, rng, encode_batch_size)
  use_discrete = bool(use_discrete and rep.discrete is not None)
  m = rep.num_continuous
  global_var, keep, info = _global_statistics(rep, settings, use_discrete)
  num_dims = m + (rep.codes.shape[1] if use_discrete else 0)

  result = {
      "protocol": protocol,
      "num_votes": int(settings["num_votes"]),
      "batch_size": length,
      "num_variance_points": int(settings["num_variance_points"]),
      "variance_source": variance_source,
      "dataset_size": dataset_size(dataset),
      "prune_kl": settings["prune_kl"],
      "kl_pruning_applied": settings["prune_kl"] is not None and rep.logvar is not None,
      "prune_std": settings["prune_std"],
      "eps": eps,
      "encode_batch_size": encode_batch_size,
      "factor_sizes": sizes,
      "factors_used": factors_used,
      "discrete_dim": m if use_discrete else None,
      "num_discrete_dims": num_dims - m,
      "global_variance": global_var,
      "kept_dims": [int(j) for j in np.flatnonzero(keep)],
      "num_kept_dims": int(keep.sum()),
      **info,
  }
  if protocol == "disentanglement_lib":
    result["num_eval_votes"] = int(settings["num_eval_votes"])

  def vote_fn(batch_rep, num, size):
    return _vote(batch_rep, num, size, global_var, keep, eps, use_discrete)

  def cast(num):
    vote_factors = _vote_factors(settings, num_factors, num, rng)
    if protocol == "cascadevae" and variance_source == "whole_dataset":
      result["vote_source"] = "dataset_encodings"
      winners = _votes_from_encodings(rows, rep, vote_factors, factors_used, length, rng,
                                      vote_fn)
    else:
      result["vote_source"] = "fresh_samples"
      winners = _votes_from_samples(dataset, representation_fn, vote_factors, factors_used,
                                    length, encode_batch_size, rng, vote_fn)
    return _vote_matrix(winners, vote_factors, num_dims, num_factors)

  if not keep.any() or num_factors == 0:
    # Authors: 1 / K when nothing survives; disentanglement_lib: 0.
    result["votes"] = np.zeros((num_dims, num_factors), dtype=np.int64)
    result["vote_source"] = None
    result["score"] = (1.0 / max(num_factors, 1)) if protocol == "cascadevae" else 0.0
    if protocol == "disentanglement_lib":
      result.update(train_accuracy=0.0, eval_accuracy=0.0)
    return result

  votes = cast(int(settings["num_votes"]))
  result["votes"] = votes
  result["num_votes"] = int(votes.sum())
  if protocol == "cascadevae":
    result["score"] = score_from_votes(votes)
    return result
  classifier = np.argmax(votes, axis=1)  # factor each dimension predicts
  eval_votes = cast(int(settings["num_eval_votes"]))
  dims = np.arange(num_dims)
  result["train_accuracy"] = float(votes[dims, classifier].sum() / max(votes.sum(), 1))
  result["eval_accuracy"] = float(eval_votes[dims, classifier].sum() / max(eval_votes.sum(), 1))
  result["eval_votes"] = eval_votes
  result["classifier"] = classifier
  result["score"] = result["eval_accuracy"]
  return result


def partedvae_votes(latents: np.ndarray, factors: np.ndarray, factors_used, length: int,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, dict]:
  """The vote matrix V [D, K'] of the ``'partedvae'`` protocol (module doc), before pruning.

  Args:
    latents: [N, D] representation of every example (means [mu_z, mu_u]).
    factors: int [N, K] their factor rows.
    factors_used: the factor columns that vote (V's columns, in this order).
    length: L, examples per group.
    rng: draws the one random order of the N examples.

  Returns:
    (V, std [D] (ddof 0), {'dropped_examples': [per factor], 'groups_per_factor': [...],
    'constant_dims': [...]}).
  """
  latents = np.asarray(latents, np.float64)
  factors = np.asarray(factors, np.int64)
  n, d = latents.shape
  std = latents.std(axis=0)
  constant = std == 0
  normalised = latents / np.where(constant, 1.0, std)
  order = rng.permutation(n)
  votes = np.zeros((d, len(factors_used)), np.int64)
  dropped, groups = [], []
  for f, k in enumerate(factors_used):
    column = factors[order, k]
    by_value = order[np.argsort(column, kind="stable")]  # grouped by value, each in `order`
    _, counts = np.unique(column, return_counts=True)
    start, lost, num = 0, 0, 0
    for count in counts:
      g = int(count) // length
      if g:
        local = normalised[by_value[start:start + g * length]].reshape(g, length, d).var(axis=1)
        local[:, constant] = np.inf
        votes[:, f] += np.bincount(np.argmin(local, axis=1), minlength=d)
      lost += int(count) - g * length
      num += g
      start += int(count)
    dropped.append(lost)
    groups.append(num)
  info = {"dropped_examples": dropped, "groups_per_factor": groups,
          "constant_dims": [int(j) for j in np.flatnonzero(constant)]}
  return votes, std, info


def _partedvae_score(dataset, representation_fn, rng, settings, sizes, factors_used,
                     encode_batch_size, whole_dataset_max, variance_sample_size) -> dict:
  """The ``'partedvae'`` protocol (module doc); every setting returned beside the score."""
  length = int(settings["batch_size"])
  stored = getattr(dataset, "rep", None)  # encodings of every stored example (EncodedGroundTruth)
  if isinstance(stored, Representation) and settings["num_variance_points"] is None and \
      stored.num_examples == len(getattr(dataset, "factors", ())):
    rows, rep, source = np.asarray(dataset.factors, np.int64), stored, "whole_dataset_encodings"
  else:
    rows, source = _points(dataset, settings["num_variance_points"], whole_dataset_max,
                           variance_sample_size, rng)
    rep = encode_factors(dataset, representation_fn, rows, rng, encode_batch_size)
  votes, std, info = partedvae_votes(rep.mean, rows, factors_used, length, rng)
  prune_std = float(settings["prune_std"])
  pruned = std < prune_std
  effective = votes.copy()
  effective[pruned] = 0
  total = int(effective.sum())
  return {
      "protocol": "partedvae",
      "score": float(effective.max(axis=1).sum() / total) if total else 0.0,
      "votes": votes,
      "effective_votes": effective,
      "num_votes": int(votes.sum()),
      "num_votes_counted": total,
      "batch_size": length,
      "std": std,
      "std_ddof": 0,
      "variance_ddof": 0,
      "prune_std": prune_std,
      "pruned_dims": [int(j) for j in np.flatnonzero(pruned)],
      "kept_dims": [int(j) for j in np.flatnonzero(~pruned)],
      "num_points": int(len(rows)),
      "points_source": source,
      "dataset_size": dataset_size(dataset),
      "order": "one seeded random permutation of the points; each value's examples in that order",
      "factor_sizes": sizes,
      "factors_used": list(factors_used),
      "representation": "posterior means [mu_z, mu_u] (continuous code, no discrete code)",
      "use_discrete": False,
      "discrete_dim": None,
      "encode_batch_size": encode_batch_size,
      **info,
  }
