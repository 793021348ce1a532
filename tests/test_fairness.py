"""Fairness gaps and the flexibly-fair subgroups against hand-computed eight-row cases."""
import numpy as np
import pytest

from disentangle.metrics import fairness

# Eight rows; the expected numbers below are counted by hand from these columns.
PRED = np.array([1, 1, 0, 1, 0, 0, 1, 0])
A = np.array([1, 1, 1, 1, 0, 0, 0, 0])
Y = np.array([1, 0, 1, 1, 0, 1, 1, 0])
T = np.array([1, 1, 0, 0, 1, 0, 0, 0])
U = np.ones(8, int)  # constant: its "u=0" groups are empty


def test_demographic_parity_by_hand():
  # a=1: rows 0-3 predict 1,1,0,1 -> 3/4; a=0: rows 4-7 predict 0,0,1,0 -> 1/4.
  out = fairness.demographic_parity_gap(PRED, A)
  assert out["p_pred1_given_a1"] == pytest.approx(3 / 4)
  assert out["p_pred1_given_a0"] == pytest.approx(1 / 4)
  assert out["gap"] == pytest.approx(1 / 2)
  assert (out["count_a1"], out["count_a0"], out["num_examples"]) == (4, 4, 8)
  assert "definition" in out


def test_equalized_odds_by_hand():
  # y=1: a=1 rows 0,2,3 predict 1,0,1 -> 2/3; a=0 rows 5,6 predict 0,1 -> 1/2; gap 1/6.
  # y=0: a=1 row 1 predicts 1 -> 1; a=0 rows 4,7 predict 0,0 -> 0; gap 1.
  out = fairness.equalized_odds_gap(PRED, Y, A)
  assert out["per_y"][1]["gap"] == pytest.approx(1 / 6)
  assert out["per_y"][0]["gap"] == pytest.approx(1.0)
  assert (out["per_y"][1]["count_a1"], out["per_y"][1]["count_a0"]) == (3, 2)
  assert (out["per_y"][0]["count_a1"], out["per_y"][0]["count_a0"]) == (1, 2)
  assert out["gap"] == pytest.approx(1.0)


def test_gaps_against_brute_force_on_random_data():
  rng = np.random.default_rng(0)
  pred, y, a = (rng.integers(0, 2, 200) for _ in range(3))
  def rate(mask):
    return sum(p for p, m in zip(pred, mask) if m) / sum(mask)
  dp = abs(rate(a == 1) - rate(a == 0))
  eo = max(abs(rate((a == 1) & (y == v)) - rate((a == 0) & (y == v))) for v in (0, 1))
  assert fairness.demographic_parity_gap(pred, a)["gap"] == pytest.approx(dp, abs=1e-12)
  assert fairness.equalized_odds_gap(pred, y, a)["gap"] == pytest.approx(eo, abs=1e-12)


def test_empty_group_gives_none_never_zero():
  out = fairness.demographic_parity_gap(PRED, np.zeros(8, int))
  assert out["gap"] is None and out["p_pred1_given_a1"] is None
  assert (out["count_a1"], out["count_a0"]) == (0, 8)
  assert out["p_pred1_given_a0"] == pytest.approx(4 / 8)  # rows 0, 1, 3, 6 predict 1
  # a=1 only on rows 2, 3, both with y=1: the cell (a=1, y=0) is empty.
  a = np.array([0, 0, 1, 1, 0, 0, 0, 0])
  eo = fairness.equalized_odds_gap(PRED, Y, a)
  assert eo["gap"] is None and eo["per_y"][0]["gap"] is None
  # y=1: a=1 rows 2,3 predict 0,1 -> 1/2; a=0 rows 0,5,6 predict 1,0,1 -> 2/3.
  assert eo["per_y"][1]["gap"] == pytest.approx(1 / 6)


def test_subgroups_by_hand():
  groups = fairness.subgroups(np.stack([A, T, U], 1), ("s", "t", "u"))
  names = [g["name"] for g in groups]
  assert names == ["s", "t", "u",
                   "s=1&t=1", "s=1&t=0", "s=0&t=1", "s=0&t=0",
                   "s=1&u=1", "s=1&u=0", "s=0&u=1", "s=0&u=0",
                   "t=1&u=1", "t=1&u=0", "t=0&u=1", "t=0&u=0"]
  by = {g["name"]: g for g in groups}
  members = {"s": [0, 1, 2, 3], "t": [0, 1, 4], "u": list(range(8)),
             "s=1&t=1": [0, 1], "s=1&t=0": [2, 3], "s=0&t=1": [4], "s=0&t=0": [5, 6, 7],
             "s=1&u=0": [], "t=0&u=1": [2, 3, 5, 6, 7]}
  for name, rows in members.items():
    assert np.flatnonzero(by[name]["indicator"]).tolist() == rows, name
    assert (by[name]["count"], by[name]["count_rest"]) == (len(rows), 8 - len(rows))
  assert by["s=0&t=1"]["attributes"] == ("s", "t") and by["s=0&t=1"]["values"] == (0, 1)


def test_subgroup_gaps_by_hand():
  rows = {r["name"]: r for r in fairness.subgroup_gaps(PRED, Y, np.stack([A, T, U], 1),
                                                       ("s", "t", "u"))}
  dp = {name: r["demographic_parity"]["gap"] for name, r in rows.items()}
  # s=1&t=1: rows 0,1 -> 1; rest 2..7 -> 0,1,0,0,1,0 = 2/6.
  assert dp["s=1&t=1"] == pytest.approx(2 / 3)
  # s=0&t=1: row 4 -> 0; rest 0,1,2,3,5,6,7 -> 1,1,0,1,0,1,0 = 4/7.
  assert dp["s=0&t=1"] == pytest.approx(4 / 7)
  # s=0&t=0: rows 5,6,7 -> 1/3; rest 0..4 -> 3/5.
  assert dp["s=0&t=0"] == pytest.approx(4 / 15)
  # t: rows 0,1,4 -> 2/3; rest 2,3,5,6,7 -> 2/5.
  assert dp["t"] == pytest.approx(4 / 15)
  assert dp["s"] == pytest.approx(1 / 2)
  # Empty groups (and a group with an empty rest) give None, never 0.
  for name in ("u", "s=1&u=0", "s=0&u=0", "t=1&u=0", "t=0&u=0"):
    assert dp[name] is None, name
    assert rows[name]["equalized_odds"]["gap"] is None, name
  assert rows["s=1&u=0"]["count"] == 0 and rows["u"]["count_rest"] == 0


@pytest.mark.parametrize("call", [
    lambda: fairness.demographic_parity_gap([0, 2], [0, 1]),
    lambda: fairness.demographic_parity_gap([0, 1, 1], [0, 1]),
    lambda: fairness.subgroups(np.zeros((3, 2), int), ("a",)),
    lambda: fairness.subgroups(np.zeros((3, 2), int), ("a", "a")),
])
def test_bad_input_rejected(call):
  with pytest.raises(ValueError):
    call()
