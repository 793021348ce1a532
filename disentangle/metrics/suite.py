"""Registration of disentanglement_lib's metric suite (Locatello et al. 2019) in `registry`.

Every metric here reads the evaluation's ground truth through `Inputs.ground_truth` (with the
whole dataset's encodings when the caller made them, so points are looked up, not encoded), with
disentanglement_lib's study settings (`config/unsupervised_study_v1/metric_configs/*.gin`), on
its own random stream, and reports the continuous means alone (``protocol='disentanglement_lib'``)
and, for an encoder with a discrete code where the definition extends, with the code too
(``'disentanglement_lib+discrete_codes'``, under ``by_protocol``); ``value`` is the one
``eval.use_discrete`` picks ('protocol': the means alone). All are computed by ``evaluate_run``
(stage ``"run"``); none at eval steps.
"""
from __future__ import annotations

from typing import Optional

from disentangle.metrics import beta_vae
from disentangle.metrics import registry
from disentangle.metrics import sampling
from disentangle.metrics.factor_vae import factor_vae_score


def _use_discrete(cfg) -> bool:
  return registry.resolve_use_discrete(cfg, False)


def _headline(by_protocol: dict, key: str, use_discrete: bool, **extra) -> dict:
  """The result of the chosen protocol with ``value`` = its ``key``, every protocol beside it."""
  chosen = sampling.PROTOCOL_DISCRETE if (use_discrete and sampling.PROTOCOL_DISCRETE
                                          in by_protocol) else sampling.PROTOCOL
  out = dict(by_protocol[chosen], value=by_protocol[chosen][key], value_is=key,
             use_discrete=chosen == sampling.PROTOCOL_DISCRETE, **extra)
  if len(by_protocol) > 1:
    out["by_protocol"] = {p: dict(r, value=r[key]) for p, r in by_protocol.items()}
  return out


def _require_ground_truth(inputs: registry.Inputs) -> None:
  sampling.check_ground_truth(inputs.ground_truth)


def _describe_protocols(m: dict, key: str) -> str:
  others = [f"{p} {r['value']:.4f}" for p, r in m.get("by_protocol", {}).items()
            if p != m["protocol"]]
  return f"{m['protocol']}" + (f"; also {', '.join(others)}" if others else "")


# -- FactorVAE score, disentanglement_lib's protocol --------------------------------------------

def _factor_score_dlib(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Kim & Mnih's score as disentanglement_lib (`metrics.factor_vae_score`,
  ``protocol='disentanglement_lib'``: 10,000 variance points, std pruning 0.05, 10,000 training
  and 5,000 evaluation votes of 64; value: the evaluation accuracy)."""
  _require_ground_truth(inputs)
  by = {}
  variants = [(sampling.PROTOCOL, False)] + (
      [(sampling.PROTOCOL_DISCRETE, True)] if s["use_discrete"] else [])
  for protocol, with_codes in variants:
    r = factor_vae_score(inputs.ground_truth, inputs.represent, inputs.rng,
                         protocol="disentanglement_lib", use_discrete=with_codes,
                         encode_batch_size=inputs.encode_batch_size,
                         **{k: s[k] for k in ("num_votes", "num_eval_votes", "batch_size",
                                              "num_variance_points") if s.get(k) is not None})
    if with_codes and r["discrete_dim"] is None:
      break  # no discrete code: the means alone
    by[protocol] = dict(r, protocol=protocol)
  return _headline(by, "eval_accuracy", s["use_discrete"])


# -- β-VAE score ----------------------------------------------------------------------------------

def _beta_vae(inputs: registry.Inputs, s: dict) -> Optional[dict]:
  """Higgins et al.'s score as disentanglement_lib (`metrics.beta_vae.beta_vae_score`)."""
  _require_ground_truth(inputs)
  by = beta_vae.beta_vae_score(inputs.ground_truth, inputs.represent, inputs.rng,
                               batch_size=s["batch_size"], num_train=s["num_train"],
                               num_eval=s["num_eval"], use_discrete=s["use_discrete"],
                               encode_batch_size=inputs.encode_batch_size)
  return _headline(by, "eval_accuracy", s["use_discrete"])


registry.register(registry.Metric(
    "factor_score_dlib", "FactorVAE score (dlib)", _factor_score_dlib,
    lambda cfg, stage: {"use_discrete": _use_discrete(cfg)}, training_flag="",
    ground_truth=True, sampled=True,
    describe=lambda m: (f"{_describe_protocols(m, 'eval_accuracy')}: {m['num_votes']} train / "
                        f"{m['num_eval_votes']} eval votes x {m['batch_size']}, variances over "
                        f"{m['num_variance_points']} points, std pruning {m['prune_std']}, "
                        f"train accuracy {m['train_accuracy']:.4f}")))
registry.register(registry.Metric(
    "beta_vae", "β-VAE score", _beta_vae,
    lambda cfg, stage: {"batch_size": beta_vae.BATCH_SIZE, "num_train": beta_vae.NUM_TRAIN,
                        "num_eval": beta_vae.NUM_EVAL, "use_discrete": _use_discrete(cfg)},
    training_flag="", ground_truth=True, sampled=True,
    describe=lambda m: (f"{_describe_protocols(m, 'eval_accuracy')}: {m['num_train']} train / "
                        f"{m['num_eval']} eval points, pairs of {m['batch_size']}, logistic "
                        f"regression, train accuracy {m['train_accuracy']:.4f}")))
