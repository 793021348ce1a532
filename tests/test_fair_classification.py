"""The fair-classification audit: splits, removal of b, early stopping, a planted representation."""
import jax
import numpy as np
import pytest

from disentangle.evaluation import fair_classification as fc

# ---------------------------------------------------------------------------------------------
# Splits.

def test_split_sizes_disjoint_and_seeded():
  split = fc.split_indices(1000, (500, 200, 100), seed=3)
  assert [len(split[k]) for k in fc.SPLIT_NAMES] == [500, 200, 100]
  union = np.concatenate([split[k] for k in fc.SPLIT_NAMES])
  assert len(np.unique(union)) == 800 and union.min() >= 0 and union.max() < 1000
  again = fc.split_indices(1000, (500, 200, 100), seed=3)
  assert all(np.array_equal(split[k], again[k]) for k in fc.SPLIT_NAMES)
  other = fc.split_indices(1000, (500, 200, 100), seed=4)
  assert not np.array_equal(split["train"], other["train"])


def test_split_rejects_bad_sizes():
  with pytest.raises(ValueError, match="only 100 available"):
    fc.split_indices(100, (50, 30, 30))
  with pytest.raises(ValueError, match="three positive"):
    fc.split_indices(100, (50, 0, 10))


# ---------------------------------------------------------------------------------------------
# Removal.

REP = np.random.default_rng(0).normal(size=(50, 6)).astype(np.float32)
DIMS = {"shape": 4, "scale": 1, "pos_y": 5}


def test_drop_removes_exactly_the_named_columns():
  before = REP.copy()
  out = fc.remove_sensitive(REP, DIMS, ("shape", "scale"), "drop")
  expected = REP[:, [0, 2, 3, 5]]  # columns 1 (scale) and 4 (shape) gone, order kept
  assert out.shape == (50, 4)
  np.testing.assert_array_equal(out, expected)
  np.testing.assert_array_equal(REP, before)  # pure


def test_noise_replaces_only_the_named_columns_with_the_keyed_draws():
  before = REP.copy()
  key = jax.random.PRNGKey(7)
  out = fc.remove_sensitive(REP, DIMS, ("shape", "scale"), "noise", key)
  assert out.shape == REP.shape
  keep = [0, 2, 3, 5]
  np.testing.assert_array_equal(out[:, keep], REP[:, keep])  # bitwise
  draws = np.asarray(jax.random.normal(key, (50, 2)))
  np.testing.assert_array_equal(out[:, [4, 1]], draws)  # k-th name -> k-th draw column
  assert not np.any(out[:, [4, 1]] == REP[:, [4, 1]])
  np.testing.assert_array_equal(REP, before)  # pure
  np.testing.assert_array_equal(out, fc.remove_sensitive(REP, DIMS, ("shape", "scale"), "noise",
                                                         key))
  other = fc.remove_sensitive(REP, DIMS, ("shape", "scale"), "noise", jax.random.PRNGKey(8))
  assert not np.array_equal(out, other)


def test_removal_rejects_missing_or_out_of_range_dims_and_bad_mode():
  with pytest.raises(ValueError, match="no sensitive dimension b for \\['pos_x'\\]"):
    fc.remove_sensitive(REP, DIMS, ("pos_x",), "drop")
  with pytest.raises(ValueError, match="outside the representation's 6 columns"):
    fc.remove_sensitive(REP, {"shape": 6}, ("shape",), "drop")
  with pytest.raises(ValueError, match="remove must be one of"):
    fc.remove_sensitive(REP, DIMS, ("shape",), "zero")


# ---------------------------------------------------------------------------------------------
# Early stopping.

def test_early_stopping_rule_on_a_constructed_sequence():
  losses = [1.0, 0.8, 0.9, 0.7, 0.7, 0.75, 0.71, 0.8, 0.9, 0.6]  # best 0.7 at epoch 3 (tie at 4)
  stopper = fc.EarlyStopping(patience=5)
  seen = []
  for loss in losses:
    seen.append(loss)
    if stopper.update(loss):
      break
  assert len(seen) == 3 + 1 + 5  # stops 5 epochs after the best (epoch 3), before the 0.6
  assert stopper.best_epoch == 3 and stopper.best_loss == 0.7


def test_training_stops_five_epochs_after_best_and_restores_its_params():
  # 64 noisy training labels, 10 inputs: validation loss falls, then rises as the MLP overfits.
  rng = np.random.default_rng(0)

  def noisy(n):
    x = rng.normal(size=(n, 10)).astype(np.float32)
    y = (x[:, 0] > 0).astype(int)
    flip = rng.random(n) < 0.25
    y[flip] = 1 - y[flip]
    return x, y

  (xt, yt), (xv, yv) = noisy(64), noisy(256)
  snapshots = {}
  out = fc.train_classifier(xt, yt, xv, yv, jax.random.PRNGKey(0), batch_size=16,
                            max_epochs=200, on_epoch=lambda e, p: snapshots.setdefault(e, p))
  val = [h["val_loss"] for h in out["history"]]
  best = int(np.argmin(val))
  assert best > 0  # the problem makes the rule do something (not a stop at the first epoch)
  assert out["stopped_early"] and out["best_epoch"] == best
  assert out["epochs_run"] == len(val) == best + 1 + 5
  assert min(val[best + 1:]) >= val[best]
  assert set(snapshots) == set(range(out["epochs_run"]))
  jax.tree.map(np.testing.assert_array_equal, out["params"], snapshots[best])
  leaves_best = jax.tree.leaves(out["params"])
  leaves_last = jax.tree.leaves(snapshots[out["epochs_run"] - 1])
  assert any(not np.array_equal(a, b) for a, b in zip(leaves_best, leaves_last))
  # the restored parameters reproduce the best validation loss
  _, _, evaluate = fc._functions(fc.HIDDEN_UNITS, fc.LEARNING_RATE, 16)
  assert float(evaluate(out["params"], xv, yv)[0]) == pytest.approx(val[best], rel=1e-6)
  # one compile of the epoch step for all epochs
  assert fc._functions(fc.HIDDEN_UNITS, fc.LEARNING_RATE, 16)[1]._cache_size() == 1


# ---------------------------------------------------------------------------------------------
# A planted representation.

def _planted(n=9000, seed=0):
  """dim 0 = a, dim 1 = (2y - 1) + 1.5 ε with P(y = a) = 0.75, dims 2-4 noise.

  Bayes rule (closed form): with dim 0 the classifier predicts ŷ = 1 iff dim 1 > ∓1.24 (a = 1/0),
  ΔDP(a) ≈ 0.68, accuracy ≈ 0.81; with a removed ŷ = [dim 1 > 0], ΔDP(a) = (2·0.75 − 1)(1 − 2Φ(−1/1.5))
  ≈ 0.25, accuracy = Φ(1/1.5) ≈ 0.75.
  """
  rng = np.random.default_rng(seed)
  a = rng.integers(0, 2, n)
  y = np.where(rng.random(n) < 0.75, a, 1 - a)
  rep = np.concatenate([a[:, None], (2 * y - 1)[:, None] + 1.5 * rng.normal(size=(n, 1)),
                        rng.normal(size=(n, 3))], axis=1).astype(np.float32)
  return rep, np.stack([a, y], axis=1)


@pytest.mark.slow
@pytest.mark.parametrize("remove", fc.REMOVE_MODES)
def test_removing_the_planted_a_dimension_lowers_parity_gap(remove):
  rep, attrs = _planted()
  rows = fc.audit(rep, attrs, ("a", "y"), {"a": 0}, "a", "y", remove, seed=0,
                  sizes=(4000, 1000, 4000))
  base, removed = rows
  assert base["removed"] == [] and removed["removed"] == ["a"] and removed["removed_dims"] == [0]
  assert base["demographic_parity"]["a"] > 0.5      # the unfair baseline reads a
  assert removed["demographic_parity"]["a"] < 0.35  # closed form 0.25
  assert removed["test_accuracy"] > 0.70            # closed form 0.75
  assert base["test_accuracy"] > 0.75               # closed form 0.81
  for row in rows:
    s = row["settings"]
    assert (s["remove"], s["seed"], s["patience"], s["target"]) == (remove, 0, 5, "y")
    assert s["sizes"] == {"train": 4000, "validation": 1000, "test": 4000}
    assert row["epochs_run"] == row["best_epoch"] + 6 or not row["stopped_early"]
  table = fc.to_markdown(rows)
  assert f"| y | a | {remove} | {removed['test_accuracy']:.3f} |" in table
  assert "ΔDP(a)" in table and "ΔEO(a)" in table and table.count("\n") == 4


# ---------------------------------------------------------------------------------------------
# Bad input (validated before any training).

def _bad(**overrides):
  rep, attrs = _planted(n=200)
  args = dict(representation=rep, attributes=attrs, attribute_names=("a", "y"),
              sensitive_dims={"a": 0}, subgroup="a", target_name="y", remove="drop", seed=0,
              sizes=(100, 50, 50))
  args.update(overrides)
  return fc.audit(**args)


@pytest.mark.parametrize("overrides, message", [
    (dict(target_name="a"), "target 'a' is in the audited subgroup"),
    (dict(target_name="pos_x"), "target 'pos_x' is not a known attribute"),
    (dict(subgroup="scale"), "subgroup attributes \\['scale'\\] are not known"),
    (dict(sensitive_dims={"y": 1}), "no sensitive dimension b for \\['a'\\]"),
    (dict(sensitive_dims={"a": 5}), "outside the representation's 5 columns"),
    (dict(remove="zero"), "remove must be one of \\['drop', 'noise'\\]"),
    (dict(sizes=(150, 50, 50)), "only 200 available"),
])
def test_bad_input_raises_naming_it(overrides, message):
  with pytest.raises(ValueError, match=message):
    _bad(**overrides)


def test_markdown_reads_none_as_na():
  row = {"removed": ["a"], "settings": {"target": "y", "remove": "drop"}, "test_accuracy": 0.5,
         "demographic_parity": {"a": None}, "equalized_odds": {"a": 0.25}, "best_epoch": 2,
         "epochs_run": 8, "run": "ffvae"}
  table = fc.to_markdown([row])
  assert table.splitlines()[0].startswith("| run | target |")
  assert "| ffvae | y | a | drop | 0.500 | n/a | 0.250 | 2 | 8 |" in table
