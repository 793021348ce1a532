"""Chen et al. (2018) estimators against Gaussian closed forms."""
import numpy as np
import pytest
from scipy import integrate
from scipy import stats

from disentangle.metrics import Representation
from disentangle.metrics import discrete_mutual_information
from disentangle.metrics import estimate_entropies
from disentangle.metrics import information_report
from disentangle.metrics import kl_per_dim
from disentangle.metrics import mutual_information_per_dim
from disentangle.metrics import total_correlation


def test_kl_per_dim_against_quadrature():
  mu, sigma = 0.7, 0.4
  want, _ = integrate.quad(
      lambda z: stats.norm.pdf(z, mu, sigma) * (stats.norm.logpdf(z, mu, sigma)
                                                - stats.norm.logpdf(z)), -10, 10)
  got = kl_per_dim(np.array([[mu], [-mu]]), np.full((2, 1), 2 * np.log(sigma)))
  assert got[0] == pytest.approx(want, rel=1e-6)
  np.testing.assert_allclose(kl_per_dim(np.zeros((3, 2)), np.zeros((3, 2))), 0.0)


@pytest.mark.slow
def test_mutual_information_of_gaussian_channel():
  # x ~ N(0, 1), q(z|x) = N(x, s^2): I(x; z) = 1/2 log(1 + 1/s^2) per dimension.
  rng = np.random.default_rng(0)
  s = np.array([0.3, 0.5, 1.0, 2.0])
  x = rng.standard_normal((6000, 4))
  logvar = np.broadcast_to(2 * np.log(s), x.shape)
  got = mutual_information_per_dim(x, logvar, rng, num_samples=2000)
  np.testing.assert_allclose(got, 0.5 * np.log1p(1 / s**2), atol=0.06)


def test_marginal_and_joint_entropies_of_gaussian_aggregate():
  rng = np.random.default_rng(1)
  s = 0.5
  x = rng.standard_normal((6000, 2))
  marginal, joint = estimate_entropies(x, np.full(x.shape, 2 * np.log(s)), rng, num_samples=2000)
  h1 = 0.5 * np.log(2 * np.pi * np.e * (1 + s**2))  # q(z_j) = N(0, 1 + s^2)
  np.testing.assert_allclose(marginal, h1, atol=0.05)
  assert joint == pytest.approx(2 * h1, abs=0.08)


@pytest.mark.slow
@pytest.mark.parametrize("rho", [0.0, 0.8])
def test_total_correlation_of_correlated_gaussian(rho):
  # Aggregate q(z) = N(0, [[1, rho], [rho, 1]]) with q(z|x) = N(x, s^2 I):
  # TC = KL(q(z) || q(z_1) q(z_2)) = -1/2 log(1 - rho^2).
  rng = np.random.default_rng(2)
  s = 0.3
  cov = np.array([[1 - s**2, rho], [rho, 1 - s**2]])
  x = rng.multivariate_normal(np.zeros(2), cov, size=8000)
  got = total_correlation(x, np.full(x.shape, 2 * np.log(s)), rng, num_samples=3000)
  assert got == pytest.approx(-0.5 * np.log(1 - rho**2), abs=0.05)


def test_discrete_mutual_information():
  labels = np.repeat(np.arange(4), 25)
  assert discrete_mutual_information(labels) == pytest.approx(np.log(4))
  assert discrete_mutual_information(np.eye(3)[labels % 3]) == pytest.approx(
      discrete_mutual_information(labels % 3))
  assert discrete_mutual_information(np.full((10, 5), 0.2)) == pytest.approx(0.0, abs=1e-12)
  # half the points certain of class 0, half uniform over {0, 1}: H([.75, .25]) - log(2) / 2.
  q = np.array([[1.0, 0.0]] * 5 + [[0.5, 0.5]] * 5)
  want = -(0.75 * np.log(0.75) + 0.25 * np.log(0.25)) - 0.5 * np.log(2)
  assert discrete_mutual_information(q) == pytest.approx(want)


def test_information_report_has_numbers_and_settings():
  rng = np.random.default_rng(3)
  rep = Representation(mean=rng.standard_normal((500, 3)), logvar=np.zeros((500, 3)),
                       discrete=rng.integers(0, 2, 500))
  out = information_report(rep, rng, num_samples=200)
  assert out["num_samples"] == 200 and out["num_points"] == 500
  assert out["mi_per_dim"].shape == (3,) and out["kl_per_dim"].shape == (3,)
  assert out["estimator"] == "chen2018_dataset_mixture" and "discrete_mi" in out


# The small random cases have more labels than half their samples, which scikit-learn warns of.
@pytest.mark.filterwarnings("ignore:The number of unique classes:UserWarning")
def test_plugin_mutual_information_is_sklearns_bit_for_bit():
  from sklearn import metrics as skm  # pylint: disable=g-import-not-at-top

  from disentangle.metrics.information import plugin_mutual_information  # pylint: disable=g-import-not-at-top
  gen = np.random.default_rng(0)
  for t in range(300):
    n = int(gen.integers(2, 3000))
    a = gen.integers(0, int(gen.integers(1, 25)), n)
    b = (a * 3 + gen.integers(0, 2, n)) % 7 if t % 3 == 0 else gen.integers(0, 40, n)
    assert plugin_mutual_information(a, b) == skm.mutual_info_score(a, b), t
  # A closed form: two independent fair bits share nothing; a bit with itself shares log 2.
  bit = np.arange(1000) % 2
  assert plugin_mutual_information(bit, bit) == pytest.approx(np.log(2), rel=1e-15)
  assert plugin_mutual_information(bit, np.arange(1000) // 500) == 0.0


def test_the_metrics_read_one_discretiser_and_one_plugin_mi_and_keep_sklearns_numbers():
  import importlib  # pylint: disable=g-import-not-at-top

  from sklearn import metrics as skm  # pylint: disable=g-import-not-at-top

  from disentangle.metrics import sampling  # pylint: disable=g-import-not-at-top
  from disentangle.metrics.dlib import modularity  # pylint: disable=g-import-not-at-top
  from disentangle.metrics.dlib import unsupervised  # pylint: disable=g-import-not-at-top
  mig = importlib.import_module("disentangle.metrics.mig")  # the package exports mig(), the function
  assert mig.histogram_discretize is sampling.histogram_discretize
  gen = np.random.default_rng(1)
  z = gen.normal(size=(2000, 4))
  factors = np.stack([np.digitize(z[:, 0], [-1, 0, 1]), gen.integers(0, 5, 2000)], axis=1)
  codes = sampling.histogram_discretize(z, 20)
  # disentanglement_lib's calls: mutual_info_score(factor, code) for MIG and modularity,
  # mutual_info_score(code_i, code_j) for the unsupervised score.
  ref = np.array([[skm.mutual_info_score(factors[:, k], codes[:, j]) for k in range(2)]
                  for j in range(4)])
  np.testing.assert_array_equal(modularity.mutual_information(codes, factors), ref)
  np.testing.assert_array_equal(
      mig.mutual_information_matrix_histogram(Representation(mean=z), factors, 20), ref)
  pairs = [skm.mutual_info_score(codes[:, i], codes[:, j])
           for i in range(4) for j in range(4) if i != j]
  assert unsupervised.mutual_info_score(codes) == sum(pairs) / 12
