"""scikit-learn's ``GradientBoostingClassifier()``, fitted with the trees of a stage grown together.

DCI (`metrics.dlib.dci`) fits disentanglement_lib's estimator, scikit-learn's
``GradientBoostingClassifier()`` with its defaults, once per factor. Those defaults grow, at each
of 100 stages, one regression tree of depth 3 per class (113 trees a stage on dSprites), and
scikit-learn grows them one after the other (``benchmarks.dci_trees`` times both). `fit`
computes the same model with every tree of a stage grown at once, level by level, in one compiled
float64 program per block of `BLOCK` trees: the same algorithm (Friedman 2001, Alg. 1, as
scikit-learn implements it), not an approximation.

What is the same as scikit-learn (``sklearn.ensemble._gb`` and ``sklearn.tree``, version 1.x):

- the start: the class priors, clipped to [eps, 1 - eps] (float32 eps), through the link of the
  loss (binary: logit; K > 2 classes: log p_k - mean_k log p_k);
- each stage: the negative gradient of the half binomial / multinomial log loss at the stage's
  start (y_k - p_k), one regression tree per class (one for two classes) fitted to it;
- each tree: depth-first exact greedy splits on the float32 features, scikit-learn's
  ``friedman_mse`` proxy (s_R n_L - s_L n_R)^2 / (n_L n_R), split points between any two
  consecutive distinct values of the node (scikit-learn 1.7, the pinned version, splits even
  between float32 neighbours: its ``FEATURE_THRESHOLD`` of 1e-7 does not take effect, as
  `tests/test_boosted_trees.py` checks), threshold x_a / 2 + x_b / 2 (x_a if that rounds to x_b),
  a node left a leaf at depth 3, below 2 samples, at MSE impurity <= float64 eps, or without a
  split;
- the leaves: one Newton step, mean(y - p) / mean(p (1 - p)), times (K - 1) / K for K > 2
  classes, 0 where the denominator is below 1e-150; raw predictions += 0.1 x leaf value;
- the same candidates, found two ways: a feature with more than two values by a scan of the
  node's samples in sorted order, a feature with two values (a code's one-hot columns) from the
  node's sums over its lower-valued samples (its one split point); a constant one never splits;
- the importances: per tree the MSE impurity decrease of its splits per feature over the number
  of samples, averaged over the trees that split at all, normalised to sum 1; predictions: the
  argmax of the raw predictions (two classes: raw >= 0).

Where two differ, the numbers differ as scikit-learn's own do between two seeds:

- several features can give exactly the same best improvement (at the first stage the targets
  take two values per tree, so splits of equal counts tie; in small nodes one extreme sample
  split off ties): scikit-learn takes the first in a random order of the features, drawn from its
  generator, and `fit` the first in a random order drawn from ``random_state``: the same rule,
  other draws;
- a node whose targets are all equal shows rounding noise in its impurity (scikit-learn
  subtracts a child's sums from its parent's, `fit` takes a mean of squares less a squared mean),
  so one of the two can split it into leaves of equal value where the other keeps a leaf (same
  predictions; an importance of ~1e-17);
- sums are taken in another order, so improvements that agree to the last bits can resolve
  differently.

`tests/test_boosted_trees.py` checks every tree against scikit-learn's on one feature (no ties
between features), the trees of a stage against a node-by-node reference with the same order of
features, and the importances against scikit-learn's spread over seeds.

``estimators='study2019'``: scikit-learn 0.20's fit, as disentanglement_lib's study ran it
(``sklearn/ensemble/gradient_boosting.py`` and ``sklearn/tree/tree.py`` of 0.20.4, where it
departs from the above):

- the start (``init_``, `fit` line 1421-1424): K > 2 classes, ``PriorProbabilityEstimator``
  (lines 214-253): the class priors themselves as raw scores, p_k = count_k / n (not their
  logarithms; fixed in 0.21); two classes, ``LogOddsEstimator`` (lines 159-206): log(pos / neg),
  today's start without the clipping;
- the stage (``_fit_stage``, lines 1158-1204): ``for k in range(K)`` the residual of class k,
  y_k - softmax(raw)_k (``MultinomialDeviance.negative_gradient``, line 916), is taken from the
  raw scores that the trees of classes 0..k-1 of the same stage already moved
  (``update_terminal_regions``, lines 400-402, adds 0.1 x leaf value to ``y_pred[:, k]`` in
  place; 0.21 took every gradient from a copy made at the stage's start), so the trees of one
  model's stage are grown class after class (the k-th class of every model at once, in blocks
  of `SEQUENTIAL_BLOCK`); the leaves, the same Newton step (lines 919-937);
- the trees (``DecisionTreeRegressor`` with ``min_impurity_split=None`` -> 1e-7, tree.py line
  286): a node at MSE impurity <= 1e-7 stays a leaf (today: <= float64 eps); the splitter
  (``_splitter.pyx``, ``cdef DTYPE_t FEATURE_THRESHOLD = 1e-7``, float32) never splits between
  sorted values x_p, x_(p+1) with x_(p+1) <= x_p + 1e-7 in float32 arithmetic (this takes effect
  where |x| < 2; the pinned version's does not);
- the importances (``feature_importances_``, lines 1619-1637): the sum over the stages of the
  mean over a stage's K trees of the unnormalised importances, normalised; the mean over the
  trees that split, normalised, is the same vector (a scalar apart).

Checked against 0.20.4 itself (Python 3.7, outside this project): on one feature (no ties
between features) the raw predictions agree to 1e-15 after 20 stages with 2, 3 and 5 classes
and float32 neighbours 3e-8 apart; with several features they differ as 0.20.4's own do
between two ``random_state`` values. `tests/test_boosted_trees.py` checks the first stages
against 0.20's fit written out in numpy.
"""
from __future__ import annotations

from concurrent import futures
import functools
import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special

NUM_STAGES = 100        # n_estimators
LEARNING_RATE = 0.1
MAX_DEPTH = 3
EPSILON = np.finfo(np.float64).eps


class Model(NamedTuple):
  """A fitted model: ``feature``/``threshold`` [stages, trees, 2^depth - 1] for the split nodes in
  heap order (node h has children 2h + 1, 2h + 2; feature -1: no split), ``value`` [stages, trees,
  2^(depth + 1) - 1] the leaf values, ``init`` [trees] the starting raw prediction."""
  classes: np.ndarray
  init: np.ndarray
  feature: np.ndarray
  threshold: np.ndarray
  value: np.ndarray
  learning_rate: float
  feature_importances: np.ndarray


def _presort(x32: np.ndarray, feature_threshold: float = 0.0):
  """The features by kind: those with more than two values, scanned in sorted order (their
  indices, sample order [F', n], sorted values, and for each sorted position the first position
  with a larger value), and those with two (their indices and lower values: one split each).
  A constant feature is neither: it never splits a node.

  ``feature_threshold`` > 0 (scikit-learn 0.20's ``FEATURE_THRESHOLD``, module doc): a value
  counts as larger only above v + threshold, the sum taken in float32, so no split falls
  between two values that close; a two-valued feature that close counts as constant."""
  distinct = [np.unique(col) for col in x32.T]
  if feature_threshold:
    step = np.float32(feature_threshold)
    distinct = [u if len(u) != 2 or u[1] > u[0] + step else u[:1] for u in distinct]
  scan = np.array([f for f, u in enumerate(distinct) if len(u) > 2], np.int32)
  two = np.array([f for f, u in enumerate(distinct) if len(u) == 2], np.int32)
  order = np.argsort(x32[:, scan], axis=0, kind="stable").T.copy().astype(np.int32)
  values = np.take_along_axis(x32[:, scan], order.T, axis=0).T.copy()
  past = np.zeros(values.shape, np.int32)
  for i, v in enumerate(values):
    above = v + np.float32(feature_threshold) if feature_threshold else v
    past[i] = np.searchsorted(v, above, side="right")
  low = np.array([distinct[f][0] for f in two], np.float32)
  return scan, order, values, past, two, low


def _cumsum(a):
  # The barrier keeps XLA from recomputing ``a`` inside each of the scan's slices.
  return jax.lax.associative_scan(jnp.add, jax.lax.optimization_barrier(a), axis=0)


def _segments(nd, num_nodes: int):
  """Segment index tree * num_nodes + node of every sample [n * T] (-1 -> one past the end)."""
  t = nd.shape[1]
  idx = jnp.arange(t, dtype=jnp.int32)[None, :] * num_nodes + nd
  return jnp.where(nd >= 0, idx, t * num_nodes).ravel()


def _node_sums(nd, num_nodes: int, *weights):
  """Per (tree, node): the count and the sums of each of ``weights`` [n, T] over its samples
  (segment sums: masked reductions per node compile to far slower loops on XLA:CPU)."""
  t = nd.shape[1]
  idx = _segments(nd, num_nodes)
  size = t * num_nodes + 1
  out = [jax.ops.segment_sum(jnp.ones(idx.shape, jnp.int32), idx, num_segments=size)]
  out += [jax.ops.segment_sum(w.ravel(), idx, num_segments=size) for w in weights]
  return [o[:-1].reshape(t, num_nodes) for o in out]


def _impurity(count, total, squares):
  """MSE of a node's targets, as scikit-learn's criterion: sq_sum / n - (sum / n)^2."""
  n = jnp.maximum(count, 1)
  return jnp.where(count > 0, squares / n - (total / n) ** 2, 0.0)


def _best_split(s, c, member, past):
  """(value, position) of the best split per tree of one node: prefix sums ``s`` [n, T] and counts
  ``c`` [n, T] over the node's samples in sorted order, ``member`` [n, T] its samples; a split
  after a member needs the next member to be larger (no member before ``past``)."""
  s_tot, c_tot = s[-1], c[-1]
  valid = member & (c < c_tot) & (c[past - 1] == c)
  cf = c.astype(jnp.float64)
  right = c_tot - cf
  diff = (s_tot - s) * cf - s * right
  proxy = jnp.where(valid, diff * diff / jnp.where(valid, cf * right, 1.0), -jnp.inf)
  best = proxy.max(axis=0)
  first = jnp.arange(proxy.shape[0], dtype=jnp.int32)[:, None]
  return best, jnp.min(jnp.where(proxy == best, first, proxy.shape[0] - 1), axis=0)


BLOCK = 32  # trees grown by one call of the compiled stage (the arrays [n, BLOCK] stay in cache)
NUM_THREADS = min(2, os.cpu_count() or 1)  # blocks grown at once


def _level_search(g, nd, open_, parents, scan, order, values, past, rank, *, width, keep):
  """The best split (value, rank, feature, x_a) of every node of one level [T, width] over the
  features ``scan`` (in sorted order); with ``keep``, also every node's prefix sums and counts
  per feature (the next level's parents) [F', width, n, T]."""
  n, t = g.shape

  def body(best_state, xs):
    best, best_rank, best_f, best_xa = best_state
    f, order_f, values_f, past_f, rank_f, par = xs
    gs, nds = jax.lax.optimization_barrier((g[order_f], nd[order_f]))
    if width == 1:
      s = _cumsum(gs)
      c = jnp.broadcast_to(jnp.arange(1, n + 1, dtype=jnp.int32)[:, None], (n, t))
      nodes = [(s, c, nds == 0)]
    else:
      nodes = []
      for a in range(width // 2):
        s_a, c_a = par[0][a], par[1][a]
        left = nds == 2 * a
        s_l = _cumsum(jnp.where(left, gs, 0.0))
        c_l = _cumsum(left.astype(jnp.int32))
        nodes += [(s_l, c_l, left), (s_a - s_l, c_a - c_l, nds == 2 * a + 1)]
    vals, poss = zip(*(_best_split(s_, c_, m_, past_f) for s_, c_, m_ in nodes))
    val, pos = jnp.stack(vals, axis=1), jnp.stack(poss, axis=1)  # [T, width]
    r = rank_f
    better = open_ & ((val > best) | ((val == best) & (val > -jnp.inf) & (r < best_rank)))
    best_state = (jnp.where(better, val, best), jnp.where(better, r, best_rank),
                  jnp.where(better, f, best_f), jnp.where(better, values_f[pos], best_xa))
    out = None
    if keep:
      out = (jnp.stack([s_ for s_, _, _ in nodes]),
             jnp.stack([jnp.broadcast_to(c_, (n, t)) for _, c_, _ in nodes]))
    return best_state, out

  init = (jnp.full((t, width), -jnp.inf), jnp.full((t, width), jnp.inf),
          jnp.zeros((t, width), jnp.int32), jnp.zeros((t, width), jnp.float32))
  if not scan.shape[0]:
    return init, None
  return jax.lax.scan(body, init, (scan, order, values, past, rank[scan], parents))


def _two_valued(best_state, g, nd, open_, count, total, x32, two, low, rank, *, width):
  """``best_state`` with the features of two values: each has one split per node, its lower
  value to the left, from the node's sums of those samples (no sorting)."""
  n, t = g.shape
  seg, size = _segments(nd, width), t * width + 1
  sums = lambda a: jax.ops.segment_sum(a.ravel(), seg, num_segments=size)[:-1].reshape(t, width)
  lower = x32[:, two] == low[None, :]  # [n, F'']
  c_tot, s_tot = count.astype(jnp.float64), total
  best, best_rank, best_f, best_xa = best_state
  for b in range(two.shape[0]):
    m = jnp.broadcast_to(lower[:, b:b + 1], (n, t))
    c_l = sums(m.astype(jnp.float64))
    s_l = sums(jnp.where(m, g, 0.0))
    c_r = c_tot - c_l
    valid = (c_l > 0) & (c_r > 0)
    diff = (s_tot - s_l) * c_l - s_l * c_r
    val = jnp.where(valid, diff * diff / jnp.where(valid, c_l * c_r, 1.0), -jnp.inf)
    r = rank[two[b]]
    better = open_ & ((val > best) | ((val == best) & (val > -jnp.inf) & (r < best_rank)))
    best, best_rank = jnp.where(better, val, best), jnp.where(better, r, best_rank)
    best_f, best_xa = jnp.where(better, two[b], best_f), jnp.where(better, low[b], best_xa)
  return best, best_rank, best_f, best_xa


# XLA's default optimisation level for the stage, whatever ``XLA_FLAGS`` sets for the process
# (the tests lower it to 0 for every other program): the stage runs once per stage and block of
# trees, hundreds of times a fit, and optimised runs about four times faster for about a second
# more of compile time.
STAGE_COMPILER_OPTIONS = {"xla_backend_optimization_level": 3}


@functools.partial(jax.jit, static_argnames=("depth", "min_impurity"),
                   compiler_options=STAGE_COMPILER_OPTIONS)
def _grow(g, h, factor, x32, scan, order, values, past, two, low, rank, *, depth,
          min_impurity=EPSILON):
  """Trees of depth ``depth`` fitted to the columns of ``g`` [n, T], grown together, level by
  level; leaf values sum(g) / sum(h) x ``factor`` [T]; the features as `_presort` sorts them;
  features that tie for a node's best split are taken in the order ``rank`` [depth, F, T,
  2^(depth - 1)]; a node at MSE impurity <= ``min_impurity`` stays a leaf.

  Returns (feature [T, 2^depth - 1], threshold, leaf values [T, 2^(depth + 1) - 1], importance
  [T, F], leaf of each sample [n, T])."""
  n, t = g.shape
  nf = x32.shape[1]
  nd = jnp.zeros((n, t), jnp.int32)          # node within the level; -1 once in a leaf
  leaf = jnp.zeros((n, t), jnp.int32)        # heap index of the sample's leaf
  feature = jnp.full((t, 2**depth - 1), -1, jnp.int32)
  threshold = jnp.zeros((t, 2**depth - 1))
  importance = jnp.zeros((t, nf))
  parents, above = None, None
  for d in range(depth + 1):
    width = 2**d
    count, total, squares = _node_sums(nd, width, g, g * g)
    impurity = _impurity(count, total, squares)
    if above is not None:  # the impurity decrease of the splits above, per feature
      p_count, p_imp, p_feat, p_split = above
      decrease = (p_count * p_imp - count[:, 0::2] * impurity[:, 0::2]
                  - count[:, 1::2] * impurity[:, 1::2]) / n
      decrease = jnp.where(p_split, decrease, 0.0)
      importance = importance + jnp.einsum("tj,tjf->tf", decrease,
                                           jax.nn.one_hot(p_feat, nf, dtype=decrease.dtype))
    if d == depth:
      split = jnp.zeros((t, width), bool)
    else:
      open_ = (count >= 2) & (impurity > min_impurity)
      state, parents = _level_search(
          g, nd, open_, parents, scan, order, values, past, rank[d, :, :, :width], width=width,
          keep=d + 1 < depth)
      best, _, best_f, best_xa = _two_valued(state, g, nd, open_, count, total, x32, two, low,
                                             rank[d, :, :, :width], width=width)
      split = open_ & (best > -jnp.inf)
    node = jnp.maximum(nd, 0)
    of_node = lambda a: jnp.take_along_axis(a, node.T, axis=1).T  # [T, J] -> [n, T]
    stop = (nd >= 0) & ~of_node(split)
    leaf = jnp.where(stop, width - 1 + nd, leaf)
    nd = jnp.where(stop, -1, nd)
    if d == depth:
      break
    # Thresholds halfway to the next value of the node: x_b = the least of its values > x_a.
    inside = nd >= 0
    chosen = jnp.take_along_axis(x32, of_node(best_f), axis=1)
    above_xa = jnp.where(inside & (chosen > of_node(best_xa)), chosen, jnp.inf)
    best_xb = jax.ops.segment_min(above_xa.ravel(), _segments(nd, width),
                                  num_segments=t * width + 1)[:-1].reshape(t, width)
    xa64, xb64 = best_xa.astype(jnp.float64), best_xb.astype(jnp.float64)
    thr = xa64 / 2.0 + xb64 / 2.0
    thr = jnp.where(thr == xb64, xa64, thr)
    heap = slice(width - 1, 2 * width - 1)
    feature = feature.at[:, heap].set(jnp.where(split, best_f, -1))
    threshold = threshold.at[:, heap].set(jnp.where(split, thr, 0.0))
    right = (chosen > of_node(thr)).astype(jnp.int32)
    nd = jnp.where(inside, 2 * nd + right, -1)
    above = (count, impurity, best_f, split)
  # Leaf values: one Newton step per leaf (0 where the denominator is below 1e-150).
  count, total_g, total_h = _node_sums(leaf, 2**(depth + 1) - 1, g, h)
  c = jnp.maximum(count, 1)
  numerator = total_g / c * factor[:, None]
  denominator = total_h / c
  ok = (count > 0) & (jnp.abs(denominator) >= 1e-150)
  value = jnp.where(ok, numerator / jnp.where(ok, denominator, 1.0), 0.0)
  return feature, threshold, value, importance, leaf


MIN_IMPURITY_SPLIT_020 = 1e-7   # scikit-learn 0.20 tree.py:286, min_impurity_split=None -> 1e-7
FEATURE_THRESHOLD_020 = 1e-7    # scikit-learn 0.20 _splitter.pyx, cdef DTYPE_t (float32)
SEQUENTIAL_BLOCK = 8            # trees per compiled call where a stage's classes come in turn
FIT_WORDS = {
    "current": "scikit-learn >= 0.21 (log-prior start, a stage's gradients from the previous "
               "stage)",
    "study2019": "scikit-learn 0.20 (prior start, each class's gradient after the earlier "
                 "classes of the stage; min_impurity_split and FEATURE_THRESHOLD 1e-7)",
}


def fit(x: np.ndarray, y: np.ndarray, *, num_stages: int = NUM_STAGES,
        learning_rate: float = LEARNING_RATE, depth: int = MAX_DEPTH, random_state=None,
        estimators: str = "current") -> Model:
  """``GradientBoostingClassifier(n_estimators=num_stages, learning_rate=learning_rate,
  max_depth=depth, random_state=random_state).fit(x, y)`` (module doc), as a `Model`;
  ``random_state`` (an int, a numpy Generator or None) orders the features that tie;
  ``estimators``: today's fit ('current') or scikit-learn 0.20's ('study2019')."""
  y = np.asarray(y)
  return fit_columns(x, y[:, None], num_stages=num_stages, learning_rate=learning_rate,
                     depth=depth, random_state=random_state, estimators=estimators)[0]


def fit_columns(x: np.ndarray, ys: np.ndarray, *, num_stages: int = NUM_STAGES,
                learning_rate: float = LEARNING_RATE, depth: int = MAX_DEPTH,
                random_state=None, estimators: str = "current") -> list[Model]:
  """`fit` of ``x`` to each column of ``ys`` [n, m] (one model per column: the trees of every
  model's stage are grown together; under 'study2019' the trees of every model's k-th class).

  ``estimators='study2019'``: scikit-learn 0.20's multi-class fit (module doc): raw scores
  start at the class priors and, within a stage, class k's gradient is taken after the trees of
  classes 0..k-1 of the same stage have updated the raw scores; nodes at impurity <= 1e-7 stay
  leaves and no split falls between float32 values within 1e-7."""
  study = estimators == "study2019"
  rng = np.random.default_rng(random_state)
  x32 = np.ascontiguousarray(x, dtype=np.float32)
  ys = np.asarray(ys)
  if x32.ndim != 2 or ys.ndim != 2 or len(x32) != len(ys) or not np.isfinite(x32).all():
    raise ValueError(f"fit needs finite features [n, d] and labels [n, m], got {x32.shape} and "
                     f"{ys.shape}")
  n, nf = x32.shape
  eps = np.finfo(np.float32).eps
  models, onehots, inits, factors, groups = [], [], [], [], []
  for col in ys.T:
    classes, labels = np.unique(col, return_inverse=True)
    k = len(classes)
    if k < 2:
      raise ValueError(f"fit needs at least 2 classes, got {k}")
    counts = np.bincount(labels, minlength=k)
    prior = np.clip(counts / n, eps, 1 - eps)
    if k == 2:  # one tree a stage, the logistic link
      # 0.20's LogOddsEstimator (gradient_boosting.py:159-206): log(pos / neg), unclipped.
      inits.append(np.log(counts[1:] / counts[:1]) if study else
                   np.log(prior[1:] / (1.0 - prior[1:])))
      onehots.append((labels == 1).astype(np.float64)[:, None])
      factors.append(np.ones(1))
    else:
      # 0.20's PriorProbabilityEstimator (gradient_boosting.py:214-253): the priors themselves.
      inits.append(counts / counts.sum() if study else np.log(prior) - np.mean(np.log(prior)))
      onehots.append(np.eye(k)[labels])
      factors.append(np.full(k, (k - 1) / k))
    models.append(classes)
    groups.append(onehots[-1].shape[1])
  onehot, init, factor = (np.concatenate(a, axis=-1) for a in (onehots, inits, factors))
  t = onehot.shape[1]
  padded = -(-t // BLOCK) * BLOCK
  bounds = np.cumsum([0] + groups)
  sorted_features = _presort(x32, FEATURE_THRESHOLD_020 if study else 0.0)
  min_impurity = MIN_IMPURITY_SPLIT_020 if study else EPSILON
  raw = np.repeat(init[None, :], n, axis=0)
  feature = np.full((num_stages, padded, 2**depth - 1), -1, np.int64)
  threshold = np.zeros((num_stages, padded, 2**depth - 1))
  value = np.zeros((num_stages, padded, 2**(depth + 1) - 1))
  importance = np.zeros((padded, nf))  # per tree column, summed over the stages where it split
  relevant = np.zeros(padded, np.int64)
  fac = np.zeros(padded)
  fac[:t] = factor
  cols = np.arange(t)[None, :]
  # Blocks of a stage are independent: on threads (the compiled stage releases the GIL).
  with jax.enable_x64(True), futures.ThreadPoolExecutor(NUM_THREADS) as pool:
    # On the device once (``jnp.asarray`` of a numpy array compiles a program per shape).
    consts = [jax.device_put(a) for a in (x32, *sorted_features)]

    def grow_blocks(i, columns, g, h, block):
      """Grows the trees of ``columns`` (targets g, h [n, len(columns)]) at stage ``i``, in
      blocks of ``block``; records them; returns each sample's leaf [n, len(columns)]."""
      width = -(-len(columns) // block) * block
      gp, hp = np.zeros((n, width)), np.zeros((n, width))
      gp[:, :len(columns)], hp[:, :len(columns)] = g, h
      fp = np.zeros(width)
      fp[:len(columns)] = fac[columns]
      rank = rng.random((depth, nf, width, 2**max(depth - 1, 0)))
      leaves = np.zeros((n, width), np.int64)

      def grow(a):
        blk = slice(a, a + block)
        with jax.enable_x64(True):  # the setting is per thread
          return a, jax.device_get(_grow(
              gp[:, blk], hp[:, blk], fp[blk], *consts, rank[:, :, blk], depth=depth,
              min_impurity=min_impurity))

      for a, out in pool.map(grow, range(0, width, block)):
        blk = slice(a, a + block)
        tree_cols = np.arange(width)[blk]
        keep = tree_cols < len(columns)
        dest = np.asarray(columns)[tree_cols[keep]]
        f, thr, val, imp, leaf = (np.asarray(o) for o in out)
        feature[i, dest], threshold[i, dest], value[i, dest] = f[keep], thr[keep], val[keep]
        leaves[:, blk] = leaf
        root = f[keep, 0] >= 0  # scikit-learn averages over the trees that split
        importance[dest] += np.where(root[:, None], imp[keep], 0.0)
        relevant[dest] += root
      return leaves[:, :len(columns)]

    for i in range(num_stages):
      if not study:  # every class's gradient at the stage's start: one pass
        g = np.zeros((n, t))
        for a, b in zip(bounds[:-1], bounds[1:]):
          g[:, a:b] = onehot[:, a:b] - _probability(raw[:, a:b])
        prob = onehot - g
        leaves = grow_blocks(i, np.arange(t), g, prob * (1.0 - prob), BLOCK)
        raw += learning_rate * value[i, :t][cols, leaves]
        continue
      # 0.20's _fit_stage (gradient_boosting.py:1158-1204): class k after classes < k.
      for k in range(max(groups)):
        columns = np.array([a + k for a, size in zip(bounds[:-1], groups) if size > k])
        prob = np.stack([_probability(raw[:, a:b])[:, k]
                         for a, b in zip(bounds[:-1], bounds[1:]) if b - a > k], axis=1)
        g = onehot[:, columns] - prob
        prob = onehot[:, columns] - g  # 0.20's (y - residual) (1 - y + residual)
        leaves = grow_blocks(i, columns, g, prob * (1.0 - prob), SEQUENTIAL_BLOCK)
        raw[:, columns] += learning_rate * value[i, columns[None, :], leaves]
  out = []
  for m, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
    count = relevant[lo:hi].sum()
    mean = importance[lo:hi].sum(axis=0) / max(count, 1)
    importances = mean / mean.sum() if count else np.zeros(nf)
    out.append(Model(models[m], init[lo:hi], feature[:, lo:hi], threshold[:, lo:hi],
                     value[:, lo:hi], float(learning_rate), importances))
  return out


def _probability(raw: np.ndarray) -> np.ndarray:
  """p_k (softmax; one column: the logistic function of the raw prediction)."""
  if raw.shape[1] == 1:
    return scipy.special.expit(raw)
  return scipy.special.softmax(raw, axis=1)


def decision_function(model: Model, x: np.ndarray) -> np.ndarray:
  """Raw predictions [n, trees] of ``model`` on ``x`` (float32, as scikit-learn)."""
  x32 = np.ascontiguousarray(x, dtype=np.float32)
  n = len(x32)
  stages, t, inner = model.feature.shape
  raw = np.repeat(model.init[None, :], n, axis=0).astype(np.float64)
  cols = np.arange(t)[None, :]
  for i in range(stages):
    node = np.zeros((n, t), np.int64)
    for _ in range(int(np.log2(inner + 1))):
      f = model.feature[i][cols, node]
      go = f >= 0
      val = np.take_along_axis(x32, np.maximum(f, 0), axis=1)
      right = val > model.threshold[i][cols, node]
      node = np.where(go, 2 * node + 1 + right, node)
    raw += model.learning_rate * model.value[i][cols, node]
  return raw


def predict(model: Model, x: np.ndarray) -> np.ndarray:
  """Class labels of ``x``: the argmax of the raw predictions (two classes: raw >= 0)."""
  raw = decision_function(model, x)
  index = (raw[:, 0] >= 0).astype(np.int64) if raw.shape[1] == 1 else np.argmax(raw, axis=1)
  return model.classes[index]
