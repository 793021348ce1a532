"""Method registry: ``config.method`` -> class, config section, defaults, rules, schedules, smoke.

Each method module brings ``default_config()`` (its config section), ``RULES`` (built from the
shared validators of :mod:`disentangle.config`), ``STEP_FIELDS`` (its fields that count
iterations) and optionally ``smoke(config)`` (its part of the smoke shrinking). A new method is
added with :func:`register`; :func:`build` instantiates ``cls(config, image_shape, mesh=mesh)``.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import jax
import jax.numpy as jnp
import ml_collections

from disentangle import config as config_lib
from disentangle.methods import anchorvae
from disentangle.methods import annealedvae
from disentangle.methods import betatcvae
from disentangle.methods import betavae
from disentangle.methods import cascadevae
from disentangle.methods import dipvae
from disentangle.methods import factorvae
from disentangle.methods import ffvae
from disentangle.methods import jointvae
from disentangle.methods import partedvae
from disentangle.methods import weakvae
from disentangle.methods.base import TrainState


@dataclasses.dataclass(frozen=True)
class MethodSpec:
  """A registered method: what ``config.method`` builds and how its config is checked. One entry
  of ``REGISTRY``, made by :func:`register`.

  Attributes:
    cls: the `base.VAEMethod` subclass that :func:`build` instantiates.
    section: its config section, e.g. ``"cascade"``.
    default_config: ``() -> ConfigDict``, the section's defaults.
    rules: ``"section.field" -> (predicate, description)``, checked by :func:`validate`.
    step_fields: the dotted fields that count iterations (:func:`step_fields`).
    smoke: ``smoke(config, **kwargs)``, the method's part of the smoke shrinking; None: none.
    check: ``check(config)``, cross-field rules raising ``ConfigError``; None: none.
  """
  cls: type                                 # a VAEMethod subclass
  section: str                              # its config section, e.g. "cascade"
  default_config: Callable[[], ml_collections.ConfigDict]
  rules: dict                               # "section.field" -> (predicate, description)
  step_fields: tuple[str, ...] = ()         # dotted fields that count iterations
  smoke: Callable | None = None             # smoke(config, **kwargs): shrink the schedule
  check: Callable | None = None             # check(config): cross-field rules, ConfigError


REGISTRY: dict[str, MethodSpec] = {}


@functools.lru_cache(maxsize=None)
def _fields(method: str) -> tuple:
  return tuple(config_lib.flatten(_schema(method)))


@functools.lru_cache(maxsize=None)
def _schema(method: str) -> ml_collections.ConfigDict:
  """Built once per method (a study plans thousands of configs); :func:`schema` copies it."""
  s = spec(method)
  c = config_lib.base_config()
  c.method = method
  c[s.section] = s.default_config()
  c.lock()
  return c


def register(name: str, cls, section: str, default_config: Callable, rules: dict | None = None,
             *, step_fields=(), smoke: Callable | None = None,
             check: Callable | None = None) -> None:
  """Make ``config.method = name`` build ``cls`` with the config section ``section``."""
  REGISTRY[name] = MethodSpec(cls, section, default_config, dict(rules or {}),
                              tuple(step_fields), smoke, check)
  _fields.cache_clear()
  _schema.cache_clear()


def _register_module(name: str, cls, section: str, module) -> None:
  register(name, cls, section, module.default_config, module.RULES,
           step_fields=module.STEP_FIELDS, smoke=getattr(module, "smoke", None),
           check=getattr(module, "check", None))


_register_module("betavae", betavae.BetaVAE, "betavae", betavae)
_register_module("cascadevae", cascadevae.CascadeVAE, "cascade", cascadevae)
_register_module("factorvae", factorvae.FactorVAE, "factorvae", factorvae)
_register_module("jointvae", jointvae.JointVAE, "jointvae", jointvae)
_register_module("betatcvae", betatcvae.BetaTCVAE, "betatcvae", betatcvae)
_register_module("anchorvae", anchorvae.AnchorVAE, "anchorvae", anchorvae)
_register_module("partedvae", partedvae.PartedVAE, "parted", partedvae)
_register_module("ffvae", ffvae.FFVAE, "ffvae", ffvae)
_register_module("annealedvae", annealedvae.AnnealedVAE, "annealedvae", annealedvae)
_register_module("dipvae", dipvae.DIPVAE, "dipvae", dipvae)
_register_module("weakvae", weakvae.WeakVAE, "weakvae", weakvae)


def spec(method: str) -> MethodSpec:
  if method not in REGISTRY:
    raise config_lib.ConfigError(
        f"config field 'method' must be one of {sorted(REGISTRY)}, got {method!r}")
  return REGISTRY[method]


def schema(method: str) -> ml_collections.ConfigDict:
  """The full default config of ``method``: the base fields plus the method's section (a new,
  unlocked config each call)."""
  return config_lib.copy(_schema(method))


def schema_fields(method: str) -> dict:
  """``{dotted field: default}`` of :func:`schema` (built once per method; a new dict each call)."""
  return dict(_fields(method))


def validate(config) -> None:
  """Check ``config`` against its method's schema (unknown fields, types, values)."""
  if "method" not in config:
    raise config_lib.ConfigError("config field 'method' is missing")
  fields = schema_fields(config.method)  # raises for an unknown method
  config_lib.validate(config, fields, REGISTRY[config.method].rules)
  if REGISTRY[config.method].check is not None:
    REGISTRY[config.method].check(config)  # the method's cross-field rules


def step_fields(method: str) -> tuple[str, ...]:
  """The dotted config fields of ``method`` that count iterations (to scale schedules)."""
  return spec(method).step_fields


def smoke(config, **kwargs) -> None:
  """The method's own part of the smoke shrinking (a no-op for methods without one)."""
  fn = spec(config.method).smoke
  if fn is not None:
    fn(config, **kwargs)


def build(config, image_shape, *, mesh=None):
  """Instantiate ``config``'s method (``mesh``: the trainer's device mesh).

  ``config`` must be valid: :func:`validate` runs once, where a config enters (the entry point,
  ``trainer.train`` for a library caller, ``evaluate_run``; before data or directories; tests and
  benchmarks build from shipped configs). Its backend-dependent ``'auto'`` values are resolved
  (`config.resolve_run`; a run's config is resolved already): the method reads resolved values.
  """
  return REGISTRY[config.method].cls(config_lib.resolve_run(config), image_shape, mesh=mesh)


# -- seeds -------------------------------------------------------------------------------------
def seed_keys(seed: int, num_seeds: int) -> jax.Array:
  """[num_seeds, 2] keys ``PRNGKey(seed + i)``: the init keys of the seeds trained at once."""
  return jnp.stack([jax.random.PRNGKey(seed + i) for i in range(num_seeds)])


def init_fn(method, num_seeds: int) -> Callable:
  """keys [N, 2] -> the initial state: vmapped over seeds when N > 1, else the plain state."""
  if num_seeds > 1:
    return jax.vmap(method.init)
  return lambda keys: method.init(keys[0])


def init_states_of(method, seeds, *, out_shardings=None) -> TrainState:
  """The initial state of each run of ``seeds`` (``PRNGKey(seed)``; a sweep repeats seeds),
  stacked when there are several, jit-built."""
  keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])
  return jax.jit(init_fn(method, len(keys)), out_shardings=out_shardings)(keys)
