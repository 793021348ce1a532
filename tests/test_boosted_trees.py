"""`metrics.boosted_trees` against scikit-learn's GradientBoostingClassifier and a plain reference."""
import fractions

import jax
import numpy as np
import pytest
from sklearn import ensemble

from disentangle.metrics import boosted_trees as bt


def _sklearn_heap(tree, depth):
  """(feature, threshold, leaf value, is leaf) of a fitted sklearn tree in heap order."""
  feature = np.full(2**depth - 1, -1)
  threshold = np.zeros(2**depth - 1)
  value = np.zeros(2**(depth + 1) - 1)
  is_leaf = np.zeros(2**(depth + 1) - 1, bool)

  def walk(node, h):
    if tree.children_left[node] == -1:
      value[h], is_leaf[h] = tree.value[node, 0, 0], True
      return
    feature[h], threshold[h] = tree.feature[node], tree.threshold[node]
    walk(tree.children_left[node], 2 * h + 1)
    walk(tree.children_right[node], 2 * h + 2)

  walk(0, 0)
  return feature, threshold, value, is_leaf


def _one_feature(n, k, rng):
  """Labels and one feature with exact ties and values one float32 step apart."""
  y = rng.integers(0, k, n)
  x = np.round(y / k + 0.4 * rng.normal(size=n), 2).astype(np.float32)
  nudge = rng.random(n) < 0.2
  x[nudge] = np.nextafter(x[nudge], np.float32(np.inf))
  return x[:, None], y


@pytest.mark.parametrize("k", [2, 5])
def test_one_feature_equals_sklearn_tree_by_tree(k):
  # One feature: no ties between features, so every split is scikit-learn's best split.
  # scikit-learn also splits some nodes whose targets are all equal (a child's impurity, computed
  # by subtracting from its parent's sums, is rounding noise above eps), into leaves of the same
  # value; we keep those nodes as leaves: same partition of the values, same predictions. Where
  # two thresholds improve a node equally (to rounding), which one a release takes is its own
  # choice, and later releases do not split values closer than 1e-7: the trees are compared up
  # to the first node where the two part, each checked to be the best split of the candidates it
  # considers, and whole (predictions, importances) where the release split as we do throughout.
  rng = np.random.default_rng(k)
  x, y = _one_feature(240, k, rng)  # 240 samples: the program of today's fit below
  stages = 15
  ours = bt.fit(x, y, num_stages=stages, random_state=0)
  ref = ensemble.GradientBoostingClassifier(n_estimators=stages, random_state=0).fit(x, y)
  noise_splits, tie = _assert_trees_equal_to_a_tie(ours, ref, stages, x, y)
  if tie is not None:
    return
  x_test = np.linspace(x.min() - 0.1, x.max() + 0.1, 301, dtype=np.float32)[:, None]
  for xs in (x, x_test):
    np.testing.assert_allclose(bt.decision_function(ours, xs),
                               ref.decision_function(xs).reshape(len(xs), -1), atol=1e-9)
    np.testing.assert_array_equal(bt.predict(ours, xs), ref.predict(xs))
  np.testing.assert_array_equal(ours.feature_importances, ref.feature_importances_)
  assert noise_splits < stages * ref.estimators_.shape[1]


def _stage_targets(model, x, y, i):
  """The negative gradients [n, trees] the trees of stage ``i`` of ``model`` were fitted to."""
  before = model._replace(feature=model.feature[:i], threshold=model.threshold[:i],
                          value=model.value[:i])
  raw = bt.decision_function(before, x)
  labels = np.searchsorted(model.classes, y)
  if raw.shape[1] == 1:
    return (labels == 1)[:, None] - bt._probability(raw)  # pylint: disable=protected-access
  onehot = labels[:, None] == np.arange(raw.shape[1])[None, :]
  return onehot - bt._probability(raw)  # pylint: disable=protected-access


def _assert_trees_equal_to_a_tie(ours, ref, stages, x, y):
  """Every split of ``ours`` is ``ref``'s (one feature) until a node where the two split at other
  thresholds that improve it equally (within float64 rounding, on ``ours``' targets); returns
  the count of ``ref``'s splits of equal targets, which ``ours`` keeps as leaves, and the
  (stage, tree, node) of that tie (None: none)."""
  noise_splits = 0
  for i in range(stages):
    g = _stage_targets(ours, x, y, i)
    for c in range(ref.estimators_.shape[1]):
      feature, threshold, value, is_leaf = _sklearn_heap(ref.estimators_[i, c].tree_, 3)
      ours_split = ours.feature[i, c] >= 0
      member = {0: np.ones(len(y), bool)}
      for h in range(len(feature)):
        if h not in member:
          continue
        if ours_split[h] and feature[h] >= 0 and ours.threshold[i, c, h] != threshold[h]:
          _assert_both_best(g[member[h], c], x[member[h], 0], ours.threshold[i, c, h],
                            threshold[h], (i, c, h))
          return noise_splits, (i, c, h)
        if ours_split[h]:
          assert feature[h] == 0 and ours.feature[i, c, h] == 0
          go_left = x[:, 0].astype(np.float64) <= threshold[h]  # as the trees compare
          member[2 * h + 1], member[2 * h + 2] = member[h] & go_left, member[h] & ~go_left
        elif feature[h] >= 0:  # a split of equal targets
          below = [b for b in range(len(value)) if is_leaf[b] and _under(b, h)]
          np.testing.assert_allclose(value[below], value[below[0]], rtol=1e-12)
          noise_splits += 1
  return noise_splits, None


def _assert_both_best(g, x, ours, theirs, where):
  """``ours`` is the best threshold of the node (targets ``g``, values ``x``) over every pair of
  neighbouring values, and ``theirs`` (scikit-learn's) the best over the pairs it considers: all
  of them (then the two tie) or, in later releases, those more than its feature threshold (1e-7)
  apart."""
  values = np.unique(x.astype(np.float64))
  pairs = np.stack([values[:-1], values[1:]], 1)
  gains = np.array([_friedman_proxy_float(g, x, a / 2 + b / 2) for a, b in pairs])
  mine, other = (_friedman_proxy_float(g, x, t) for t in (ours, theirs))
  np.testing.assert_allclose(mine, gains.max(), rtol=1e-9, err_msg=str(where))
  if not np.isclose(other, mine, rtol=1e-9):
    apart = pairs[:, 1] > pairs[:, 0] + 1e-7
    np.testing.assert_allclose(other, gains[apart].max(), rtol=1e-9, err_msg=str(where))


def _friedman_proxy_float(g, x, t):
  left = x.astype(np.float64) <= t
  s_l, s_r, n_l, n_r = g[left].sum(), g[~left].sum(), left.sum(), (~left).sum()
  return (s_r * n_l - s_l * n_r)**2 / (n_l * n_r)


def _first_stage_departures(model, ref, x, y, sizes_seen):
  """Nodes where a first-stage tree of ``model`` departs from ``ref``'s (scikit-learn): each is
  checked in exact arithmetic to be a node of equal targets (both sides split rounding noise or
  not) or a tie of equal improvement; returns (trees, equal splits, departures, ties,
  equal-target nodes)."""
  classes, labels = np.unique(y, return_inverse=True)
  prior = [fractions.Fraction(int(c), len(y)) for c in np.bincount(labels)]
  trees = same = departures = ties = flat = 0
  for c in range(ref.estimators_.shape[1]):
    trees += 1
    positive = labels == (1 if len(classes) == 2 else c)
    g = [fractions.Fraction(int(p)) - prior[1 if len(classes) == 2 else c] for p in positive]
    feature, threshold, _, _ = _sklearn_heap(ref.estimators_[0, c].tree_, 3)
    ours_f, ours_t = model.feature[0, c], model.threshold[0, c]
    stack = [(0, np.ones(len(y), bool))]
    while stack:
      h, member = stack.pop()
      if h >= len(feature):
        continue
      if ours_f[h] == feature[h] and (feature[h] < 0 or ours_t[h] == threshold[h]):
        if feature[h] >= 0:
          same += 1
          stack += [(2 * h + 1, member & (x <= threshold[h])),
                    (2 * h + 2, member & (x > threshold[h]))]
        continue
      departures += 1
      values = {g[i] for i in np.flatnonzero(member)}
      if len(values) == 1:
        flat += 1
        continue
      assert feature[h] >= 0 and ours_f[h] >= 0, (c, h)
      gain = [_friedman_proxy([g[i] for i in np.flatnonzero(member)], x[member], t)
              for t in (ours_t[h], threshold[h])]
      assert gain[0] == gain[1], (c, h, gain)
      ties += 1
  sizes_seen.append(trees)
  return trees, same, departures, ties, flat


def _friedman_proxy(g, x, t):
  left = [v for v, xi in zip(g, x) if xi <= np.float32(t)]
  right = [v for v, xi in zip(g, x) if xi > np.float32(t)]
  return (sum(right) * len(left) - sum(left) * len(right))**2 / (len(left) * len(right))


@pytest.mark.slow
def test_dsprites_shaped_columns_over_several_blocks_on_threads_equal_sklearn(monkeypatch):
  # DCI on dSprites: one model per factor of 3, 6, 40, 32 and 32 values, 113 tree columns a
  # stage, grown in 4 blocks of 32 on 2 threads. Every first-stage tree against scikit-learn's,
  # node by node: the same split, or (checked exactly, the targets being rational there) a node
  # of equal targets or a tie of equal improvement, the two cases the module doc names.
  monkeypatch.setattr(bt, "NUM_THREADS", 2)
  rng = np.random.default_rng(3)
  sizes = (3, 6, 40, 32, 32)
  n = 480
  x = rng.random(n).astype(np.float32)
  ys = np.stack([rng.permutation(k)[np.minimum((x * k).astype(int), k - 1)] for k in sizes], 1)
  ys = np.where(rng.random(ys.shape) < 0.1, rng.integers(0, np.array(sizes), ys.shape), ys)
  assert sum(sizes) > 3 * bt.BLOCK
  models = bt.fit_columns(x[:, None], ys, num_stages=2, random_state=0)
  totals = np.zeros(5, int)
  seen = []
  for k, model in enumerate(models):
    ref = ensemble.GradientBoostingClassifier(n_estimators=2, random_state=0).fit(
        x[:, None], ys[:, k])
    assert model.feature.shape[1] == ref.estimators_.shape[1] == sizes[k]
    totals += _first_stage_departures(model, ref, x, ys[:, k], seen)
  trees, same, departures, ties, flat = totals
  assert seen == list(sizes) and trees == 113
  assert departures == ties + flat and same > 4 * trees, totals


def _under(h, node):
  while h > node:
    h = (h - 1) // 2
  return h == node


def _reference_tree(x32, g, h, factor, rank, depth, min_impurity=bt.EPSILON,
                    feature_threshold=0.0):
  """One tree, node by node, as scikit-learn's depth-first builder: features visited in the order
  of ``rank`` [depth, F, 2^(depth - 1)], positions in increasing order, strict improvement; a
  node at impurity <= ``min_impurity`` a leaf, no split between values within
  ``feature_threshold`` (the sum in float32)."""
  n, nf = x32.shape
  feature = np.full(2**depth - 1, -1)
  threshold = np.zeros(2**depth - 1)
  importance = np.zeros(nf)
  leaf = np.zeros(n, np.int64)

  def impurity(idx):
    v = g[idx]
    return (v * v).sum() / len(v) - (v.sum() / len(v))**2

  def build(idx, node, d):
    imp = impurity(idx)
    if d == depth or len(idx) < 2 or imp <= min_impurity:
      leaf[idx] = node
      return
    j = node - (2**d - 1)
    best = (-np.inf, None, None)
    for f in np.argsort(rank[d, :, j], kind="stable"):
      o = idx[np.argsort(x32[idx, f], kind="stable")]
      xs, gs = x32[o, f], g[o]
      for p in range(1, len(o)):
        if xs[p] <= xs[p - 1] + np.float32(feature_threshold):
          continue
        s_l, s_r, n_l, n_r = gs[:p].sum(), gs[p:].sum(), p, len(o) - p
        proxy = (s_r * n_l - s_l * n_r)**2 / (n_l * n_r)
        if proxy > best[0]:
          thr = float(xs[p - 1]) / 2.0 + float(xs[p]) / 2.0
          best = (proxy, f, float(xs[p - 1]) if thr == float(xs[p]) else thr)
    if best[1] is None:
      leaf[idx] = node
      return
    _, f, thr = best
    feature[node], threshold[node] = f, thr
    left, right = idx[x32[idx, f] <= thr], idx[x32[idx, f] > thr]
    importance[f] += (len(idx) * imp - len(left) * impurity(left)
                      - len(right) * impurity(right)) / n
    build(left, 2 * node + 1, d + 1)
    build(right, 2 * node + 2, d + 1)

  build(np.arange(n), 0, 0)
  value = np.zeros(2**(depth + 1) - 1)
  for node in np.unique(leaf):
    den = h[leaf == node].mean()
    value[node] = 0.0 if abs(den) < 1e-150 else g[leaf == node].mean() * factor / den
  return feature, threshold, value, importance, leaf


def test_trees_of_a_stage_grown_together_equal_each_grown_alone():
  # Dyadic targets make every sum exact, so equal improvements tie exactly and the visiting order
  # decides, in both; features with repeated values, a copy, one nearly constant, two with two
  # values (one split by `_two_valued`, not scanned) and a constant one.
  rng = np.random.default_rng(0)
  n, t, depth = 120, 5, 3
  base = np.round(rng.normal(size=(n, 3)), 1)
  x32 = np.concatenate([base, base[:, :1], 1e-8 * rng.normal(size=(n, 1)),
                        rng.integers(0, 2, size=(n, 1)), np.ones((n, 1)),
                        (base[:, 1:2] > 0.3)], 1).astype(np.float32)  # two-valued, constant
  nf = x32.shape[1]
  g = rng.integers(-8, 9, size=(n, bt.BLOCK)) / 8.0
  h = rng.integers(1, 5, size=(n, bt.BLOCK)) / 16.0
  g[:, 2] = 0.25  # a constant target: the root stays a leaf
  factor = np.linspace(0.5, 1.0, bt.BLOCK)
  rank = rng.random((depth, nf, bt.BLOCK, 2**(depth - 1)))
  features = bt._presort(x32)
  np.testing.assert_array_equal(features[0], [0, 1, 2, 3, 4])
  np.testing.assert_array_equal(features[4], [5, 7])
  with jax.enable_x64(True):
    out = [np.asarray(a) for a in bt._grow(g, h, factor, x32, *features, rank, depth=depth)]
  for c in range(t):
    ref = _reference_tree(x32, g[:, c], h[:, c], factor[c], rank[:, :, c], depth)
    np.testing.assert_array_equal(out[0][c], ref[0])
    np.testing.assert_array_equal(out[1][c], ref[1])
    np.testing.assert_allclose(out[2][c], ref[2], rtol=1e-12)
    np.testing.assert_allclose(out[3][c], ref[3], rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(out[4][:, c], ref[4])
  assert (out[0][2] == -1).all()


def test_a_two_valued_feature_equals_sklearn():
  rng = np.random.default_rng(9)
  y = rng.integers(0, 3, 300)
  x = np.where(rng.random(300) < 0.3 + 0.2 * y, 2.5, -1.0).astype(np.float32)[:, None]
  ours = bt.fit(x, y, num_stages=10, random_state=0)
  ref = ensemble.GradientBoostingClassifier(n_estimators=10, random_state=0).fit(x, y)
  for i in range(10):
    for c in range(3):
      feature, threshold, _, _ = _sklearn_heap(ref.estimators_[i, c].tree_, 3)
      np.testing.assert_array_equal(ours.threshold[i, c][:1], threshold[:1])
  np.testing.assert_allclose(bt.decision_function(ours, x), ref.decision_function(x), atol=1e-9)


@pytest.mark.parametrize("value", [1e-3, 0.33, 1000.0])
def test_float32_neighbours_are_split_as_sklearn_splits_them(value):
  a = np.float32(value)
  # 300 samples (two values, repeated): the two-valued test's program.
  x = np.array([a, a, np.nextafter(a, np.float32(np.inf))] * 100, np.float32)[:, None]
  y = np.array([0, 0, 1] * 100)
  ours = bt.fit(x, y, num_stages=2, random_state=0)
  # The rule (module doc): halfway in float64, the lower value where that rounds to the upper.
  upper = float(np.nextafter(a, np.float32(np.inf)))
  halfway = float(a) / 2.0 + upper / 2.0
  assert ours.feature[0, 0, 0] == 0
  assert ours.threshold[0, 0, 0] == (float(a) if halfway == upper else halfway)
  np.testing.assert_array_equal(x[:, 0] > ours.threshold[0, 0, 0], y == 1)
  ref = ensemble.GradientBoostingClassifier(n_estimators=2).fit(x, y)
  if ref.estimators_[0, 0].tree_.node_count == 1:
    # Later scikit-learn releases take values closer than their feature threshold (1e-7) as
    # equal and do not split them; the 2019 study's release (and the lock's) did.
    return
  np.testing.assert_array_equal(ours.threshold[0, 0, 0], ref.estimators_[0, 0].tree_.threshold[0])
  np.testing.assert_allclose(bt.decision_function(ours, x)[:, 0], ref.decision_function(x))


def test_several_features_agree_with_sklearn_as_sklearn_with_itself():
  # With several features, equal improvements go to a random one of the tied features in both
  # (other draws): the importances are as close to scikit-learn's as two of its seeds are.
  rng = np.random.default_rng(1)
  n, k = 300, 4
  y = rng.integers(0, k, n)
  x = np.concatenate([y[:, None] / k + 0.3 * rng.normal(size=(n, 1)),
                      (y[:, None] % 2) + 0.5 * rng.normal(size=(n, 1)),
                      rng.normal(size=(n, 2))], 1)
  ours = bt.fit(x, y, num_stages=20, random_state=0)
  a, b = (ensemble.GradientBoostingClassifier(n_estimators=20, random_state=s).fit(x, y)
          for s in (0, 1))
  spread = np.abs(a.feature_importances_ - b.feature_importances_).max()
  assert np.abs(ours.feature_importances - a.feature_importances_).max() <= 3 * spread + 0.01
  assert np.isclose(ours.feature_importances.sum(), 1.0)
  assert abs(np.mean(bt.predict(ours, x) == y) - np.mean(a.predict(x) == y)) <= 0.02


def test_columns_fitted_together_equal_each_alone():
  rng = np.random.default_rng(2)
  # One feature: no ties between features, whatever the order. 240 samples, as the one-feature
  # comparison above: the same compiled stage.
  x = rng.normal(size=(240, 1))
  ys = np.stack([rng.integers(0, 2, 240), rng.integers(0, 3, 240) + 5], 1)
  together = bt.fit_columns(x, ys, num_stages=5, random_state=0)
  for col, model in enumerate(together):
    alone = bt.fit(x, ys[:, col], num_stages=5, random_state=0)
    np.testing.assert_array_equal(model.classes, alone.classes)
    np.testing.assert_allclose(bt.decision_function(model, x), bt.decision_function(alone, x))


def _study2019_reference(x32, y, stages, depth=3, rate=0.1):
  """scikit-learn 0.20's GradientBoostingClassifier().fit written out (gradient_boosting.py of
  0.20.4): raw scores from ``init_`` (K > 2: PriorProbabilityEstimator, the priors themselves;
  K = 2: LogOddsEstimator, log(pos / neg)); `_fit_stage` loops over the classes k, each
  residual y_k - softmax(raw)_k taken from the raw scores the earlier classes of the stage
  already moved (`update_terminal_regions` adds rate x leaf value in place); leaves by one
  Newton step, sum(residual) (K - 1) / K / sum((y - residual) (1 - y + residual)); trees with
  min_impurity_split 1e-7 and FEATURE_THRESHOLD 1e-7 (tree.py:286, _splitter.pyx).
  Returns (raw [n, trees], [(stage, class, feature, threshold, value, importance)]), the 0.20
  importances (sum over stages of the stage's mean over its trees, normalised)."""
  classes = np.unique(y)
  k = len(classes)
  counts = np.array([(y == c).sum() for c in classes], np.float64)
  if k == 2:
    raw = np.full((len(y), 1), np.log(counts[1] / counts[0]))
    targets = (y == classes[1]).astype(np.float64)[:, None]
  else:
    raw = np.tile(counts / counts.sum(), (len(y), 1))
    targets = (y[:, None] == classes[None, :]).astype(np.float64)
  rank = np.zeros((depth, x32.shape[1], 2**(depth - 1)))
  trees, total = [], np.zeros(x32.shape[1])
  for i in range(stages):
    stage = np.zeros(x32.shape[1])
    for c in range(raw.shape[1]):
      if k == 2:
        p = 1.0 / (1.0 + np.exp(-raw[:, 0]))
      else:
        e = np.exp(raw - raw.max(axis=1, keepdims=True))
        p = (e / e.sum(axis=1, keepdims=True))[:, c]
      residual = targets[:, c] - p
      h = (targets[:, c] - residual) * (1.0 - targets[:, c] + residual)
      f, thr, val, imp, leaf = _reference_tree(x32, residual, h, (k - 1) / k if k > 2 else 1.0,
                                               rank, depth, min_impurity=1e-7,
                                               feature_threshold=1e-7)
      raw[:, c] += rate * val[leaf]
      trees.append((i, c, f, thr, val, imp))
      stage += imp / raw.shape[1]
    total += stage
  return raw, trees, total / total.sum()


@pytest.mark.parametrize("k", [2, 3, 4])
def test_study2019_equals_sklearn_020_written_out(k):
  # One feature (no ties between features); values on a 0.01 grid with float32 neighbours, some
  # within 1e-7 of each other (0.20 never splits between those).
  rng = np.random.default_rng(10 + k)
  x, y = _one_feature(240, k, rng)
  x[:12, 0] = np.float32(0.5) + np.float32(3e-8) * np.arange(12, dtype=np.float32)
  stages = 3
  ours = bt.fit(x, y, num_stages=stages, random_state=0, estimators="study2019")
  raw, trees, importances = _study2019_reference(x, y, stages)
  counts = np.bincount(y)
  np.testing.assert_allclose(ours.init, counts / counts.sum() if k > 2 else
                             [np.log(counts[1] / counts[0])], rtol=1e-15)
  for i, c, f, thr, val, _ in trees:
    np.testing.assert_array_equal(ours.feature[i, c], f)
    np.testing.assert_array_equal(ours.threshold[i, c], thr)
    np.testing.assert_allclose(ours.value[i, c], val, rtol=1e-12, atol=1e-15)
  np.testing.assert_allclose(bt.decision_function(ours, x), raw, rtol=1e-12, atol=1e-13)
  np.testing.assert_allclose(ours.feature_importances, importances, rtol=1e-12)
  # The reference can tell the two fits apart: today's differs (log-odds start, one gradient
  # per stage).
  if k > 2:
    today = bt.fit(x, y, num_stages=stages, random_state=0)
    assert np.abs(bt.decision_function(today, x) - raw).max() > 1e-3


@pytest.mark.parametrize("value", [1e-3, 0.33, 1000.0])
def test_study2019_does_not_split_float32_neighbours_within_1e_7(value):
  # 0.20's splitter skips x_{p+1} <= x_p + FEATURE_THRESHOLD, both float32 (1e-7): the sum
  # rounds to x_p where the float32 step exceeds 2e-7 (|x| >= 2).
  a = np.float32(value)
  b = np.nextafter(a, np.float32(np.inf))
  x = np.array([a, a, b] * 100, np.float32)[:, None]
  y = np.array([0, 0, 1] * 100)
  ours = bt.fit(x, y, num_stages=1, random_state=0, estimators="study2019")
  assert (ours.feature[0, 0, 0] >= 0) == bool(b > a + np.float32(1e-7))
  assert bt.fit(x, y, num_stages=1, random_state=0).feature[0, 0, 0] == 0


def test_study2019_keeps_nodes_at_impurity_up_to_1e_7_leaves():
  # Targets of variance 1e-8: a node today's trees split (impurity > eps), 0.20's keep a leaf
  # (min_impurity_split 1e-7). 300 samples of a two-valued feature, in blocks of the width each
  # fit grows: the stages of the neighbour tests above.
  x = np.repeat(np.float32([0, 1]), 150)[:, None]
  g = 0.5 + 1e-4 * np.repeat([1.0, -1.0], 150)
  h = np.full(300, 0.25)
  for min_impurity, width, splits in ((bt.EPSILON, bt.BLOCK, True),
                                      (bt.MIN_IMPURITY_SPLIT_020, bt.SEQUENTIAL_BLOCK, False)):
    rank = np.zeros((3, 1, width, 4))
    ref = _reference_tree(x, g, h, 1.0, rank[:, :, 0], 3, min_impurity=min_impurity)
    assert (ref[0][0] >= 0) == splits
    with jax.enable_x64(True):
      out = bt._grow(np.tile(g[:, None], (1, width)), np.tile(h[:, None], (1, width)),
                     np.ones(width), x, *bt._presort(x), rank, depth=3, min_impurity=min_impurity)
    np.testing.assert_array_equal(np.asarray(out[0])[0], ref[0])


def test_study2019_columns_fitted_together_equal_each_alone():
  rng = np.random.default_rng(4)
  x = rng.normal(size=(240, 1))  # 240 samples, as the written-out comparison: the same program
  ys = np.stack([rng.integers(0, 2, 240), rng.integers(0, 3, 240), rng.integers(0, 5, 240)], 1)
  together = bt.fit_columns(x, ys, num_stages=3, random_state=0, estimators="study2019")
  for col, model in enumerate(together):
    alone = bt.fit(x, ys[:, col], num_stages=3, random_state=0, estimators="study2019")
    np.testing.assert_allclose(bt.decision_function(model, x), bt.decision_function(alone, x))


def test_bad_input():
  with pytest.raises(ValueError, match="at least 2 classes"):
    bt.fit(np.zeros((5, 2)), np.ones(5))
  with pytest.raises(ValueError, match="finite"):
    bt.fit(np.full((5, 2), np.nan), np.arange(5) % 2)
