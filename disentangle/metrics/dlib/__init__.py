"""disentanglement_lib's metric suite (Locatello et al. 2019), one module per family.

Each module holds its family's computation, as disentanglement_lib computes it (the module doc
cites the file it follows), and its registration in `disentangle.metrics.registry`:

- `factor_vae`: the FactorVAE score in disentanglement_lib's protocol (``factor_score_dlib``;
  computed by `disentangle.metrics.factor_vae`, which the papers' protocols share);
- `beta_vae` (``beta_vae``), `sap` (``sap``), `dci` (``dci``), `modularity` (``modularity``,
  with explicitness), `irs` (``irs``), `unsupervised` (``unsupervised``);
- `udr`: the points each run encodes for UDR (``udr_sample``; the score itself is computed
  across the seeds of a table row by `disentangle.evaluation.aggregate`);
- disentanglement_lib's later scores, each switched on by its run flag because each costs more
  than the rest of the suite: `downstream` (``downstream_logistic``, ``downstream_trees``,
  ``reduced_downstream``, ``strong_downstream``; ``eval.downstream``), `fairness` (Locatello
  et al. 2019b, ``fairness_dlib``; ``eval.fairness_dlib``) and `unified` (``unified_scores``;
  ``eval.unified_scores``);
- `common`: what their registrations share (settings, points, protocols).

Every metric here reads the evaluation's ground truth through `Inputs.ground_truth` (with the
whole dataset's encodings when the caller made them, so points are looked up, not encoded), with
disentanglement_lib's study settings (`config/unsupervised_study_v1/metric_configs/*.gin`), on
its own random stream, and reports the continuous means alone (``protocol='disentanglement_lib'``)
and, for an encoder with a discrete code where the definition extends, with the code too
(``'disentanglement_lib+discrete_codes'``, under ``by_protocol``); ``value`` is the one
``eval.use_discrete`` picks ('protocol': the means alone). The reduced and strong downstream
tasks, the fairness score and the unified scores read the means alone. All are computed by
``evaluate_run`` (stage ``"run"``); none at eval steps.

The modules are imported below in the order they register, after the papers' metrics
(`disentangle.metrics.papers`): that order is `NAMES`, the order of the keys of the results,
the reports and the tables.
"""
# isort: off
from disentangle.metrics.dlib import factor_vae
from disentangle.metrics.dlib import beta_vae
from disentangle.metrics.dlib import sap
from disentangle.metrics.dlib import dci
from disentangle.metrics.dlib import modularity
from disentangle.metrics.dlib import irs
from disentangle.metrics.dlib import unsupervised
from disentangle.metrics.dlib import udr
from disentangle.metrics.dlib import downstream
from disentangle.metrics.dlib import fairness
from disentangle.metrics.dlib import unified
# isort: on

NAMES = ("factor_score_dlib", "beta_vae", "sap", "dci", "modularity", "irs", "unsupervised",
         "udr_sample", "downstream_logistic", "downstream_trees", "reduced_downstream",
         "strong_downstream", "fairness_dlib", "unified_scores")

__all__ = ["NAMES", "beta_vae", "dci", "downstream", "factor_vae", "fairness", "irs",
           "modularity", "sap", "udr", "unified", "unsupervised"]
