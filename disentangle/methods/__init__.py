"""Method registry: ``config.method`` -> (class, default config section, validation rules)."""
from __future__ import annotations

import ml_collections

from disentangle import config as config_lib
from disentangle.methods import anchorvae
from disentangle.methods import betatcvae
from disentangle.methods import betavae
from disentangle.methods import cascadevae
from disentangle.methods import factorvae
from disentangle.methods import jointvae
from disentangle.methods.base import TrainState, VAEMethod  # noqa: F401

# name -> (class, config section name, module with default_config and RULES)
REGISTRY = {
    "betavae": (betavae.BetaVAE, "betavae", betavae),
    "cascadevae": (cascadevae.CascadeVAE, "cascade", cascadevae),
    "factorvae": (factorvae.FactorVAE, "factorvae", factorvae),
    "jointvae": (jointvae.JointVAE, "jointvae", jointvae),
    "betatcvae": (betatcvae.BetaTCVAE, "betatcvae", betatcvae),
    "anchorvae": (anchorvae.AnchorVAE, "anchorvae", anchorvae),
}


def schema(method: str) -> ml_collections.ConfigDict:
  """The full default config of ``method``: the base fields plus the method's section."""
  if method not in REGISTRY:
    raise config_lib.ConfigError(
        f"config field 'method' must be one of {sorted(REGISTRY)}, got {method!r}")
  _, section, module = REGISTRY[method]
  c = config_lib.base_config()
  c.method = method
  c[section] = module.default_config()
  return c


def validate(config) -> None:
  """Check ``config`` against its method's schema (unknown fields, types, values)."""
  if "method" not in config:
    raise config_lib.ConfigError("config field 'method' is missing")
  s = schema(config.method)  # raises for an unknown method
  config_lib.validate(config, s, REGISTRY[config.method][2].RULES)


def build(config, image_shape, *, mesh=None):
  """Instantiate the method named by ``config.method`` (``mesh``: the trainer's device mesh)."""
  validate(config)
  cls, _, _ = REGISTRY[config.method]
  method = cls(config, image_shape)
  method.mesh = mesh
  return method
