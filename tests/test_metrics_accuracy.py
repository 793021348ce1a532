"""Identity-mapping accuracy (PartedVAE Sec. 5.2) and per-variable accuracy (CelebA, App. B)."""
import numpy as np
import pytest

from disentangle import metrics
from disentangle.metrics import registry
from disentangle.metrics.representation import as_representation


def test_classification_accuracy_against_hand_made_predictions():
  labels = np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1])
  predictions = labels.copy()
  predictions[[1, 5, 11]] = [7, 4, 0]  # three mistakes
  out = metrics.classification_accuracy(labels, predictions)
  assert out["accuracy"] == pytest.approx(9 / 12)
  assert out["num_correct"] == 9 and out["num_examples"] == 12 and out["num_skipped"] == 0
  assert out["mapping"] == "identity"


def test_identity_mapping_is_not_the_best_mapping():
  # A perfect clustering under relabelling: Hungarian and many-to-one say 1, identity says 0.
  labels = np.array([0, 0, 1, 1, 2, 2])
  predictions = np.array([1, 1, 2, 2, 0, 0])
  assert metrics.classification_accuracy(labels, predictions)["accuracy"] == 0.0
  assert metrics.cluster_accuracy(labels, predictions)["one_to_one"] == 1.0


def test_unknown_labels_are_skipped():
  labels = np.array([-1, 0, 1, -1, 1])
  predictions = np.array([0, 0, 0, 1, 1])  # the -1 rows would count one right, one wrong
  out = metrics.classification_accuracy(labels, predictions)
  assert out["accuracy"] == pytest.approx(2 / 3)
  assert out["num_examples"] == 3 and out["num_skipped"] == 2
  assert metrics.classification_accuracy([-1, -1], [0, 1])["accuracy"] is None
  with pytest.raises(ValueError):
    metrics.classification_accuracy([0, 1], [0, 1, 2])


def test_per_variable_accuracy_by_hand():
  targets = np.array([[0, 1, -1], [1, 1, -1], [2, 0, -1], [3, -1, -1]])
  codes = np.array([[0, 1, 0], [1, 0, 1], [0, 0, 1], [3, 1, 0]])
  out = metrics.per_variable_accuracy(targets, codes, ("hair", "bangs", "skin"))
  assert out["accuracy"]["hair"] == pytest.approx(3 / 4)
  assert out["accuracy"]["bangs"] == pytest.approx(2 / 3)  # the -1 row skipped
  assert out["accuracy"]["skin"] is None
  assert out["variables_without_labels"] == ["skin"]
  assert out["mean"] == pytest.approx((3 / 4 + 2 / 3) / 2)
  assert out["per_variable"]["bangs"]["num_skipped"] == 1


def test_registered_direct_and_per_variable_accuracies():
  labels = np.array([0, 1, 2, 0, 1, 2])
  codes = np.array([[0, 1], [2, 1], [1, 0], [0, 0], [2, 1], [1, 0]])
  rep = as_representation({"mean": np.zeros((6, 2)), "discrete_codes": codes})
  targets = np.stack([labels, np.array([1, 1, 0, -1, 1, 1])], axis=1)
  inputs = registry.Inputs("run", np.random.default_rng(0), rep=rep, labels=labels,
                           labelled_rep=rep, targets=targets, target_names=("digit", "thick"),
                           labelled_points="test split", code_named=True)
  out, _ = registry.run(inputs, {}, names=["accuracy", "accuracy_direct", "variable_accuracy"])
  assert out["accuracy_direct"]["value"] == pytest.approx(2 / 6)  # rows 0 and 3
  # Classes 1 and 2 swapped: the Hungarian mapping undoes the swap, the identity does not.
  assert out["accuracy"]["value"] == 1.0
  var = out["variable_accuracy"]
  assert var["accuracy"] == {"digit": pytest.approx(2 / 6), "thick": pytest.approx(4 / 5)}
  assert var["value"] == pytest.approx((2 / 6 + 0.8) / 2)
  logged = registry.METRICS["variable_accuracy"].log_values(var)
  assert logged["variable_accuracy/thick"] == pytest.approx(0.8)
  # Without targets, or with a column count that is not the code count: not applicable.
  inputs.targets = targets[:, :1]
  out, _ = registry.run(inputs, {}, names=["variable_accuracy"])
  assert "variable_accuracy" not in out


def test_shape_accuracy_direct_on_factor_rows():
  factors = np.array([[0, 3], [1, 2], [2, 1], [1, 0]])
  rep = as_representation({"mean": np.zeros((4, 1)), "discrete": np.array([0, 1, 1, 1])})
  inputs = registry.Inputs("run", np.random.default_rng(0), factors=factors, factor_rep=rep,
                           factor_names=("shape", "x"), factor_points="whole_dataset",
                           ground_truth=object(), code_named=True)
  out, _ = registry.run(inputs, {}, names=["shape_accuracy_direct"])
  assert out["shape_accuracy_direct"]["value"] == pytest.approx(3 / 4)
  assert out["shape_accuracy_direct"]["mapping"] == "identity"


def test_direct_accuracies_only_for_a_code_named_by_labels():
  """An unsupervised code (CascadeVAE, JointVAE, PartedVAE without labels) has no identity
  mapping to labels: the one-to-one accuracy is reported, the direct ones are not."""
  labels = np.array([0, 1, 2, 0, 1, 2])
  rep = as_representation({"mean": np.zeros((6, 1)), "discrete": np.array([1, 2, 0, 1, 2, 0])})
  factors = np.stack([labels, np.zeros(6, int)], axis=1)
  inputs = registry.Inputs("run", np.random.default_rng(0), rep=rep, labels=labels,
                           labelled_rep=rep, factors=factors, factor_rep=rep,
                           factor_names=("shape", "x"), ground_truth=object())
  names = ["accuracy", "accuracy_direct", "shape_accuracy", "shape_accuracy_direct"]
  out, _ = registry.run(inputs, {}, names=names)
  assert out["accuracy"]["value"] == 1.0 and out["shape_accuracy"]["value"] == 1.0
  assert "accuracy_direct" not in out and "shape_accuracy_direct" not in out
  inputs.code_named = True
  out, _ = registry.run(inputs, {}, names=names)
  assert out["accuracy_direct"]["value"] == 0.0 and out["shape_accuracy_direct"]["value"] == 0.0


def test_code_named_by_labels_follows_the_batch_spec():
  from disentangle import methods  # pylint: disable=g-import-not-at-top
  from disentangle.evaluation import evaluator  # pylint: disable=g-import-not-at-top
  from experiments.configs import dsprites_parted  # pylint: disable=g-import-not-at-top
  from experiments.configs import mnist_cascade  # pylint: disable=g-import-not-at-top
  from experiments.configs import mnist_parted  # pylint: disable=g-import-not-at-top
  named = {(mod.__name__, v): evaluator.code_named_by_labels(
      methods.build(mod.get_config(v), (32, 32, 1)))
      for mod, v in [(mnist_cascade, "m10"), (mnist_parted, "labels256"),
                     (dsprites_parted, "unsup"), (dsprites_parted, "labels1000")]}
  assert list(named.values()) == [False, True, False, True], named
