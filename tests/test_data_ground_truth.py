"""InMemoryGroundTruth: sampling returns observations with exactly the requested factors."""
import numpy as np
import pytest

from disentangle.data import ground_truth


def _dataset(rng):
  sizes = (3, 4, 5)
  grid = np.stack(np.meshgrid(*[np.arange(s) for s in sizes], indexing="ij"), -1).reshape(-1, 3)
  keep = rng.random(len(grid)) < 0.7
  factors = np.concatenate([grid[keep], grid[keep][:10]])  # some combinations twice
  # Each observation is a 2x2 image whose pixels encode its own row and factors.
  obs = np.zeros((len(factors), 2, 2), np.uint8)
  obs[:, 0, 0], obs[:, 0, 1], obs[:, 1, 0] = factors.T
  obs[:, 1, 1] = np.arange(len(factors))
  return ground_truth.InMemoryGroundTruth(factors, obs, sizes), factors, obs


def test_observations_have_exactly_the_requested_factors():
  rng = np.random.default_rng(0)
  ds, factors, _ = _dataset(rng)
  assert isinstance(ds, ground_truth.GroundTruthData)
  requested = ds.sample_factors(400, rng)
  assert {tuple(r) for r in requested} <= {tuple(r) for r in factors}
  out = ds.sample_observations_from_factors(requested, rng)
  assert out.dtype == np.float32 and out.shape == (400, 2, 2, 1)
  decoded = np.rint(out[..., 0] * 255).astype(int)
  np.testing.assert_array_equal(decoded[:, 0, 0], requested[:, 0])
  np.testing.assert_array_equal(decoded[:, 0, 1], requested[:, 1])
  np.testing.assert_array_equal(decoded[:, 1, 0], requested[:, 2])
  np.testing.assert_array_equal(factors[decoded[:, 1, 1]], requested)


def test_duplicates_are_both_drawn_and_missing_factors_raise():
  rng = np.random.default_rng(1)
  ds, factors, _ = _dataset(rng)
  dup = factors[-1]
  rows = {int(np.rint(ds.sample_observations_from_factors(dup[None], rng)[0, 1, 1, 0] * 255))
          for _ in range(60)}
  assert rows == set(np.flatnonzero((factors == dup).all(1)).tolist())
  absent = next(c for c in np.ndindex(3, 4, 5) if not (factors == c).all(1).any())
  with pytest.raises(KeyError):
    ds.sample_observations_from_factors(np.array([absent]), rng)


def test_sample_factors_is_uniform_over_rows():
  rng = np.random.default_rng(2)
  factors = np.array([[0, 0]] * 3 + [[1, 1]])
  ds = ground_truth.InMemoryGroundTruth(factors, np.zeros((4, 2, 2)))
  draws = ds.sample_factors(20000, rng)
  assert abs((draws[:, 0] == 0).mean() - 0.75) < 0.02
