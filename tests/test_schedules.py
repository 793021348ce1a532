"""The cascade schedule (Algorithm 1) at and around each multiple of r."""
import numpy as np

from disentangle import schedules


def betas(t, **kw):
  args = dict(num_dims=4, beta_high=10.0, beta_low=1.0, relieve_every=100)
  args.update(kw)
  return np.asarray(schedules.cascade_betas(t, **args))


def test_all_high_before_first_multiple():
  for t in (1, 50, 99):
    np.testing.assert_array_equal(betas(t), [10, 10, 10, 10])


def test_one_relieved_per_multiple_in_index_order():
  for k in range(1, 6):
    r = 100
    before = betas(k * r - 1)
    at = betas(k * r)
    after = betas(k * r + 1)
    n_before, n_at = min(k - 1, 4), min(k, 4)
    np.testing.assert_array_equal(before, [1.0] * n_before + [10.0] * (4 - n_before))
    np.testing.assert_array_equal(at, [1.0] * n_at + [10.0] * (4 - n_at))
    np.testing.assert_array_equal(after, at)


def test_authors_variant_relieves_one_at_start():
  np.testing.assert_array_equal(betas(1, relieved_at_start=1), [1, 10, 10, 10])
  np.testing.assert_array_equal(betas(100, relieved_at_start=1), [1, 1, 10, 10])


def test_vectorised_over_steps_matches_loop():
  t = np.arange(0, 700, 7)
  n = np.asarray(schedules.num_relieved(t, num_dims=4, relieve_every=100))
  np.testing.assert_array_equal(n, np.minimum(t // 100, 4))


def test_linear_capacity():
  np.testing.assert_allclose(float(schedules.linear_capacity(50, c_min=0, c_max=5, num_steps=100)),
                             2.5)
  np.testing.assert_allclose(float(schedules.linear_capacity(500, c_min=0, c_max=5,
                                                             num_steps=100)), 5.0)


def _authors_relieved(t, *, num_dims, relieve_every, ntime):
  """The authors' ``run_batch`` rule, transcribed: k = iter // r, k + 1 before ntime, k after."""
  k = (t - 1) // relieve_every  # their iter counts from 0
  return min(k + 1, num_dims) if k < ntime else min(k, num_dims)


def test_pause_matches_the_authors_rule_away_from_period_boundaries():
  m, r, ntime = 6, 20_000, 4  # their dSprites settings: t_d = ntime * r = 8e4
  ts = np.arange(1, 300_001, 97)
  ours = np.asarray(schedules.num_relieved(ts, num_dims=m, relieve_every=r, relieved_at_start=1,
                                           pause_after=ntime * r))
  theirs = np.array([_authors_relieved(int(t), num_dims=m, relieve_every=r, ntime=ntime)
                     for t in ts])
  off_boundary = (ts % r) != 0
  np.testing.assert_array_equal(ours[off_boundary], theirs[off_boundary])
  # The pause: 4 dims relieved from 6e4 to 1e5 (two periods), then one more every r.
  assert [int(schedules.num_relieved(t, num_dims=m, relieve_every=r, relieved_at_start=1,
                                     pause_after=ntime * r))
          for t in (59_999, 60_001, 80_001, 99_999, 100_001, 120_001)] == [3, 4, 4, 4, 5, 6]
  # Without the pause the fifth dimension is relieved a period earlier.
  assert int(schedules.num_relieved(80_001, num_dims=m, relieve_every=r,
                                    relieved_at_start=1)) == 5
