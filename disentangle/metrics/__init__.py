"""Host-side (numpy) evaluation metrics with disentanglement_lib's calling convention.

Each metric takes a ground-truth dataset (`disentangle.data.ground_truth`), a representation
function (observations -> `Representation`) and a numpy Generator, and returns a dict holding
its number(s) and every setting that produced them. `registry` lists the metrics the evaluation
runs (each registered once; read by the evaluator, ``experiments.evaluate`` and the tables):
`papers` registers the metrics of the papers this project reproduces, then `dlib` (one module
per family) disentanglement_lib's suite. The modules both use (`factor_vae`, `mig`,
`information`, `sampling`, `estimators`, `representation`, ...) stand at this level.
"""
# isort: off
# The order of these two imports is the order of registration (`registry.METRICS`), which orders
# the keys of the results, the reports and the tables: the papers' metrics first.
from disentangle.metrics import papers
from disentangle.metrics import dlib
# isort: on
from disentangle.metrics import registry
from disentangle.metrics.accuracy import classification_accuracy
from disentangle.metrics.accuracy import per_variable_accuracy
from disentangle.metrics.clustering import cluster_accuracy
from disentangle.metrics.factor_vae import factor_vae_score
from disentangle.metrics.information import discrete_mutual_information
from disentangle.metrics.information import estimate_entropies
from disentangle.metrics.information import information_report
from disentangle.metrics.information import kl_per_dim
from disentangle.metrics.information import mutual_information_per_dim
from disentangle.metrics.information import plugin_mutual_information
from disentangle.metrics.information import total_correlation
from disentangle.metrics.mig import mig
from disentangle.metrics.representation import Representation
from disentangle.metrics.representation import as_representation
from disentangle.metrics.representation import encode_in_batches

__all__ = [
    "Representation",
    "as_representation",
    "classification_accuracy",
    "cluster_accuracy",
    "discrete_mutual_information",
    "dlib",
    "encode_in_batches",
    "estimate_entropies",
    "factor_vae_score",
    "information_report",
    "kl_per_dim",
    "mig",
    "mutual_information_per_dim",
    "papers",
    "per_variable_accuracy",
    "plugin_mutual_information",
    "registry",
    "total_correlation",
]
