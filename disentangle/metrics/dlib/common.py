"""What the registrations of disentanglement_lib's suite share (the family modules of `dlib`).

The settings every metric reads from the config (``eval.use_discrete``, ``eval.estimators``,
``eval.suite_points``; `split_settings`), the points drawn from the ground truth's whole grid
(`sets`, with a missing factor combination as `sampling.MetricInputError` through
`sampled_from_the_grid`) and the protocols of a representation with and without its discrete
code (`by_protocol`, `headline`). DCI's trees as recorded are `dci.TREES` and
`dci.estimator_record`.
"""
from __future__ import annotations

import functools

from disentangle.metrics import registry
from disentangle.metrics import sampling


def use_discrete(cfg) -> bool:
  return registry.resolve_use_discrete(cfg, False)


def estimators_of(cfg) -> str:
  """``eval.estimators``: today's scikit-learn defaults or the 2019 study's (`estimators`);
  checked by the metrics that build a classifier."""
  return registry.setting(cfg, "estimators")


def points(cfg, default: int, half: bool = False) -> int:
  """``eval.suite_points`` (0: disentanglement_lib's own number ``default``); a test or eval
  split (``half``) takes half of it."""
  n = int(registry.setting(cfg, "suite_points"))
  return default if n <= 0 else max(1, n // 2) if half else n


def headline(by_protocol: dict, key: str, use_discrete: bool, **extra) -> dict:
  """The result of the chosen protocol with ``value`` = its ``key``, every protocol beside it."""
  chosen = sampling.PROTOCOL_DISCRETE if (use_discrete and sampling.PROTOCOL_DISCRETE
                                          in by_protocol) else sampling.PROTOCOL
  out = dict(by_protocol[chosen], value=by_protocol[chosen][key], value_is=key,
             use_discrete=chosen == sampling.PROTOCOL_DISCRETE, **extra)
  if len(by_protocol) > 1:
    out["by_protocol"] = {p: dict(r, value=r[key]) for p, r in by_protocol.items()}
  return out


def require_ground_truth(inputs: registry.Inputs) -> None:
  sampling.check_ground_truth(inputs.ground_truth)


def describe_protocols(m: dict, key: str) -> str:
  others = [f"{p} {r['value']:.4f}" for p, r in m.get("by_protocol", {}).items()
            if p != m["protocol"]]
  return f"{m['protocol']}" + (f"; also {', '.join(others)}" if others else "")


def sampled_from_the_grid(compute):
  """``compute`` with a missing factor combination as `MetricInputError`: the suite's protocols
  draw factors from the whole grid, so a set that is not one (a subset of dSprites, say) cannot
  serve them; the other metrics of the evaluation still run."""
  @functools.wraps(compute)
  def wrapped(inputs, s):
    try:
      return compute(inputs, s)
    except KeyError as e:
      raise sampling.MetricInputError(
          f"the evaluated set does not hold every factor combination the protocol draws "
          f"({e.args[0] if e.args else e}); evaluate on the whole grid") from e
  return wrapped


def sets(inputs: registry.Inputs, s: dict, names=("train", "test")):
  """{name: (rep, factors of the factors with more than one value)}, the columns used, the code
  sizes; ``s['num_<name>']`` points each, drawn from the metric's stream."""
  require_ground_truth(inputs)
  sizes = [int(n) for n in inputs.ground_truth.factor_sizes]
  used = [k for k, n in enumerate(sizes) if n > 1]
  if not used:
    raise sampling.MetricInputError("no factor has more than one value")
  out = {}
  for name in names:
    rep, factors = sampling.sample_points(inputs.ground_truth, inputs.represent, s[f"num_{name}"],
                                          inputs.rng, inputs.encode_batch_size,
                                          minimum=2 if name == "train" else 1)
    out[name] = (rep, factors[:, used])
  return out, used, sampling.code_sizes(*(r for r, _ in out.values()))


def by_protocol(sets, code_sizes, extends: bool, fn) -> dict:
  """{protocol: fn(x_train, y_train, x_test, y_test, groups, protocol)} over the protocols."""
  by = {}
  (rep_tr, y_tr), (rep_te, y_te) = sets["train"], sets.get("test", (None, None))
  for protocol, with_codes in sampling.protocols(rep_tr, extends and bool(code_sizes)):
    x_tr, groups = sampling.features(rep_tr, with_codes, code_sizes)
    x_te = None if rep_te is None else sampling.features(rep_te, with_codes, code_sizes)[0]
    by[protocol] = dict(fn(x_tr, y_tr, x_te, y_te, groups, with_codes), protocol=protocol)
  return by


def split_settings(num_train: int, num_test: int, **extra):
  """Settings of a metric on a train and a test set of disentanglement_lib's sizes ``num_train``
  and ``num_test`` (`points`), with ``extra`` beside them."""
  def settings(cfg, stage):
    del stage
    return dict(num_train=points(cfg, num_train), num_test=points(cfg, num_test, half=True),
                use_discrete=use_discrete(cfg), estimators=estimators_of(cfg), **extra)
  return settings
