"""Host-side (numpy) evaluation metrics with disentanglement_lib's calling convention.

Each metric takes a ground-truth dataset (`disentangle.data.ground_truth`), a representation
function (observations -> `Representation`) and a numpy Generator, and returns a dict holding
its number(s) and every setting that produced them. `registry` lists the metrics the evaluation
runs (each registered once; read by the evaluator, ``experiments.evaluate`` and the tables).
"""
from disentangle.metrics.accuracy import classification_accuracy, per_variable_accuracy
from disentangle.metrics.clustering import cluster_accuracy
from disentangle.metrics.factor_vae import factor_vae_score
from disentangle.metrics.information import (discrete_entropy, discrete_mutual_information,
                                             estimate_entropies, gaussian_entropy_per_dim,
                                             information_report, kl_per_dim,
                                             mutual_information_per_dim,
                                             plugin_mutual_information, total_correlation)
from disentangle.metrics.mig import mig
from disentangle.metrics import registry
from disentangle.metrics import registered  # the papers' metrics, registered in the registry
from disentangle.metrics import suite  # disentanglement_lib's suite, registered after them
from disentangle.metrics.representation import (Representation, as_representation,
                                                encode_factors, encode_in_batches)

__all__ = [
    "Representation",
    "as_representation",
    "classification_accuracy",
    "cluster_accuracy",
    "discrete_entropy",
    "discrete_mutual_information",
    "encode_factors",
    "encode_in_batches",
    "estimate_entropies",
    "factor_vae_score",
    "gaussian_entropy_per_dim",
    "information_report",
    "kl_per_dim",
    "mig",
    "mutual_information_per_dim",
    "per_variable_accuracy",
    "plugin_mutual_information",
    "registered",
    "registry",
    "suite",
    "total_correlation",
]
