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
