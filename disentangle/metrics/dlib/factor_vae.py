"""The FactorVAE score (Kim & Mnih 2018) in disentanglement_lib's protocol, in `registry`.

As disentanglement_lib computes it (`evaluation/metrics/factor_vae.py::compute_factor_vae` with the
study's settings in `config/unsupervised_study_v1/metric_configs/`: 10,000 points for the
variances, std pruning 0.05, 10,000 training and 5,000 evaluation votes of 64): the score
itself is `disentangle.metrics.factor_vae.factor_vae_score` with ``protocol='disentanglement_lib'``
(the papers' protocols of the same score are registered by `disentangle.metrics.papers`); here
it is registered as ``factor_score_dlib`` with the suite's settings (`common`), on the means
alone and, for a code with a discrete part, with it too (``by_protocol``).
"""
from __future__ import annotations

from typing import Optional

from disentangle.metrics import registry
from disentangle.metrics import sampling
from disentangle.metrics.dlib import common
from disentangle.metrics.factor_vae import factor_vae_score


@common.sampled_from_the_grid
def _factor_score_dlib(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Kim & Mnih's score as disentanglement_lib (`metrics.factor_vae_score`,
  ``protocol='disentanglement_lib'``: 10,000 variance points, std pruning 0.05, 10,000 training
  and 5,000 evaluation votes of 64; value: the evaluation accuracy)."""
  common.require_ground_truth(inputs)
  by = {}
  for protocol, with_codes in ((sampling.PROTOCOL, False), (sampling.PROTOCOL_DISCRETE, True)):
    r = factor_vae_score(inputs.ground_truth, inputs.represent, inputs.rng,
                         protocol="disentanglement_lib", use_discrete=with_codes,
                         encode_batch_size=inputs.encode_batch_size,
                         **{k: s[k] for k in ("num_votes", "num_eval_votes", "batch_size",
                                              "num_variance_points") if s.get(k) is not None})
    if with_codes and r["discrete_dim"] is None:
      break  # no discrete code: the means alone
    by[protocol] = dict(r, protocol=protocol)
  return common.headline(by, "eval_accuracy", s["use_discrete"])


def _votes(cfg) -> dict:
  """The score's own numbers (`factor_vae_score`'s defaults) unless ``eval.suite_points`` is set."""
  if not common.points(cfg, 0):
    return {}
  return {"num_votes": common.points(cfg, 0), "num_eval_votes": common.points(cfg, 0, half=True),
          "num_variance_points": common.points(cfg, 0)}


registry.register(registry.Metric(
    "factor_score_dlib", "FactorVAE score (dlib)", _factor_score_dlib,
    lambda cfg, stage: dict(_votes(cfg), use_discrete=common.use_discrete(cfg)),
    training_flag="", ground_truth=True, sampled=True, postprocessed=True,
    describe=lambda m: (f"{common.describe_protocols(m, 'eval_accuracy')}: {m['num_votes']} "
                        f"train / {m['num_eval_votes']} eval votes x {m['batch_size']}, "
                        f"variances over {m['num_variance_points']} points, std pruning "
                        f"{m['prune_std']}, train accuracy {m['train_accuracy']:.4f}")))
