"""Small synthetic ground truth and representations for the known-answer metric tests."""
import numpy as np

from disentangle.data.ground_truth import InMemoryGroundTruth
from disentangle.metrics import registry

SIZES = (3, 4, 5)


def grid(sizes=SIZES, copies=1):
  rows = np.indices(sizes).reshape(len(sizes), -1).T.astype(np.int64)
  return np.repeat(rows, copies, axis=0)


def dataset(sizes=SIZES, copies=1):
  """Observations = the factor values themselves (float), as disentanglement_lib's
  ``IdentityObservationsData``; a representation is any function of them."""
  factors = grid(sizes, copies)
  return InMemoryGroundTruth(factors, factors.astype(np.float64), sizes)


def identity(x):
  return np.asarray(x, np.float64)


def zeros(x):
  return np.zeros_like(np.asarray(x, np.float64))


def noise(seed=0):
  gen = np.random.default_rng(seed)
  return lambda x: gen.normal(size=np.asarray(x).shape)


def duplicated(x):
  x = identity(x)
  return np.hstack([x, x])


def permuted_rescaled(x):
  x = identity(x)
  return x[:, ::-1] * np.resize([3.0, 0.2, 7.0], x.shape[1]) + 1.5


def mixed(x):
  """Factors 0 and 1 rotated into each other (each dim carries both); factor 2 alone."""
  x = identity(x)
  return np.stack([x[:, 0] + x[:, 1], x[:, 0] - x[:, 1], x[:, 2]], axis=1)


def code_carries_factor0(x):
  """Means carry factors 1 and 2; a discrete code carries factor 0."""
  x = identity(x)
  return {"mean": x[:, 1:], "discrete": np.rint(x[:, 0]).astype(np.int64)}


def inputs(represent, data=None, seed=0):
  data = data if data is not None else dataset()
  return registry.Inputs("run", np.random.default_rng([seed, 1]), ground_truth=data,
                         represent=represent, encode_batch_size=256)


def identity_observations(num_points, rng, num_factors=5, num_values=5):
  """disentanglement_lib's ``IdentityObservationsData`` (observations = factors), smaller:
  factors [n, K] uniform over ``num_values`` values, as floats."""
  return rng.integers(0, num_values, size=(num_points, num_factors))


def small_settings(**extra):
  """Registry overrides that shrink the suite's points for unit tests."""
  split = dict(num_train=300, num_test=200)
  return {"sap": split, "dci": split, "modularity": split, "irs": {"num_train": 400},
          "unsupervised": {"num_train": 400},
          "beta_vae": dict(batch_size=16, num_train=300, num_eval=300),
          "factor_score_dlib": dict(num_votes=300, num_eval_votes=300, batch_size=16,
                                    num_variance_points=300),
          "downstream_logistic": dict(num_train=(10, 100), num_points=100, num_test=100),
          "downstream_trees": dict(num_train=(10, 100), num_points=100, num_test=100),
          "reduced_downstream": dict(num_train=(100,), num_points=100, num_test=100),
          "strong_downstream": dict(num_train=(100,), num_points=100, num_test=100),
          "fairness_dlib": dict(num_train=300, num_test_points_per_class=20),
          "unified_scores": dict(num_train=300, num_test=200), **extra}


def as_rep(mean):
  from disentangle.metrics.representation import as_representation  # pylint: disable=g-import-not-at-top
  return as_representation(mean)


def shuffled_per_point(seed=0):
  """disentanglement_lib's 'bad' representation: each point's factor values in a random order,
  so every latent carries every factor equally."""
  gen = np.random.default_rng(seed)
  def fn(x):
    x = identity(x).copy()
    for row in x:
      row[:] = gen.permutation(row)
    return x
  return fn
