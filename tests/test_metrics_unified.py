"""disentanglement_lib's unified scores (`metrics.dlib.unified`): hand-computed matrices."""
import math

import numpy as np
import pytest

from disentangle.metrics import registry
from disentangle.metrics.dlib import unified
from tests import synthetic_factors as syn

ON = {"unified_scores": True}  # switched on in the run stage by its eval field


def _components_with_an_edge(r, t):
  """Union-find over latents (0..d-1) and factors (d..d+k-1) joined where r >= t and r != 0."""
  d, k = r.shape
  parent = list(range(d + k))
  def find(a):
    while parent[a] != a:
      a = parent[a]
    return a
  for i in range(d):
    for j in range(k):
      if r[i, j] >= t and r[i, j] != 0:
        parent[find(i)] = find(d + j)
  return len({find(i) for i in range(d) if any(r[i, j] >= t and r[i, j] != 0
                                                for j in range(k))})


def test_precision_against_union_find():
  rng = np.random.default_rng(0)
  for shape in ((3, 2), (5, 4), (6, 6)):
    r = rng.random(shape) * (rng.random(shape) < 0.5)
    for t in np.unique(r):
      assert unified.precision(r, t) == _components_with_an_edge(r, t), (shape, t)


def test_precision_curve_by_hand():
  # Thresholds .6, .2, .2, 0: one component at each (the .2 edges join everything).
  out = unified.precision_curve(np.array([[0.6, 0.2], [0.2, 0.0]]))
  assert out == {"area_precision": pytest.approx(0.4 + 0.2), "max_precision": 1}
  # Two separate latents: 2 components from threshold 1 down: area (2 + 2) / 2 x 1.
  out = unified.precision_curve(np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]))
  assert out == {"area_precision": pytest.approx(2.0), "max_precision": 2}


def test_aggregations_by_hand():
  r = np.array([[0.6, 0.2], [0.2, 0.0]])
  y = np.array([[0, 0], [1, 0], [0, 1], [1, 1]])  # each factor 2 values, equally often: ln 2
  out = unified.aggregate(r, y)
  h = -(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25))
  assert out["dci_disentanglement_per_code"] == pytest.approx([1 - h, 1.0], abs=1e-8)
  assert out["dci_disentanglement"] == pytest.approx(0.8 * (1 - h) + 0.2 * 1.0, abs=1e-8)
  # Columns (.6, .2) and (.2, 0): completeness 1 - H as above, and 1.
  assert out["dci_completeness_per_factor"] == pytest.approx([1 - h, 1.0], abs=1e-8)
  assert out["sap_per_factor"] == pytest.approx([0.4, 0.2])
  assert out["sap"] == pytest.approx(0.3)
  assert out["mig_per_factor"] == pytest.approx([0.4 / math.log(2), 0.2 / math.log(2)])
  # Row (.6, .2): 1 - .04 / .36; row (.2, 0): 1.
  assert out["modularity_per_code"] == pytest.approx([1 - 0.04 / 0.36, 1.0])
  assert out["modularity"] == pytest.approx((2 - 0.04 / 0.36) / 2)


def test_identity_and_duplicated_codes_on_the_mutual_information_matrix():
  y = syn.identity_observations(400, np.random.default_rng(0), num_factors=3, num_values=4)
  x = y.astype(np.float64)
  out = unified.unified_scores(x, y, x, y, ("mutual_information_matrix",))
  m = out["mutual_information_matrix"]
  # Each latent holds its factor's whole entropy; the plug-in MI of independent ones is small.
  assert 0.95 < m["mig"] <= 1.0 and m["modularity"] > 0.95
  assert np.diag(m["matrix"]) == pytest.approx([math.log(4)] * 3, rel=0.01)
  dup = unified.unified_scores(np.hstack([x, x]), y, np.hstack([x, x]), y,
                               ("mutual_information_matrix",))["mutual_information_matrix"]
  assert dup["mig"] == pytest.approx(0.0) and dup["max_precision"] == 3


def test_registered_scores_every_matrix_with_its_settings():
  # 300 training points of 3 codes: the compiled boosted-trees stage of the DCI tests.
  over = {"unified_scores": {"num_train": 300, "num_test": 100}}
  out, _ = registry.run(syn.inputs(syn.identity), ON, names=["unified_scores"], overrides=over)
  m = out["unified_scores"]
  assert set(m["by_matrix"]) == set(unified.MATRICES)
  assert m["value"] == m["by_matrix"]["importance_gbt_matrix"]["dci_disentanglement"] > 0.9
  assert m["by_matrix"]["accuracy_svm_matrix"]["sap"] > 0.3
  assert (m["num_train"], m["num_test"], m["num_bins"]) == (300, 100, 20)
  assert m["svm"]["estimator"] == "LinearSVC" and m["svm"]["fits"] == 9
  logged = registry.METRICS["unified_scores"].log_values(m)
  assert logged["unified_mutual_information_matrix_mig"] > 0.9
