"""The suite's metric code beside disentanglement_lib's own, timed on one shared representation.

  python -m benchmarks.dlib_suite [--config=experiments/configs/dsprites_cascade.py:m6]
      [--dlib=PATH] [--metrics=beta_vae,dci,...] [--suite_points=N] [--subset=K]
      [--dci_trees=together|sklearn] [--with_code]

Nothing is trained: a dSprites CascadeVAE (``m6``) with freshly initialised parameters encodes
the whole dataset once (`encodings.encode_ground_truth`, ``encode_s``); then, metric by metric
(ours, then disentanglement_lib's, interleaved so that both see the same load), both read those
encodings through a ground truth whose observations are row numbers: ours through
`encodings.EncodedGroundTruth` and `registry.run` (stage ``"run"``, the suite's names, timed by
``registry.run``), disentanglement_lib's ``compute_*`` through an adapter with its
``GroundTruthData`` interface whose representation function returns the stored means (timed
with ``time.perf_counter``). So the timings compare the metric code alone: sampling the points,
fitting the classifiers, the scores.

disentanglement_lib (``--dlib``: a checkout, or the bare git directory of one, default
``$DISENTANGLE_DLIB``; a bare directory's files are extracted with ``git archive`` into a
temporary folder) is imported as it is, its ``evaluation/metrics/*.py`` with a stand-in module
for ``gin`` (none of them touches TensorFlow at import): ``gin.configurable`` registers the
function and fills the parameters bound by the study's gin files
(``config/unsupervised_study_v1/metric_configs/*.gin``, IRS from ``config/sample/irs/irs.gin``:
10,000 train / 5,000 test points, batches of 64 for the beta-VAE and FactorVAE scores, 10,000
points for the variances, std pruning 0.05, 20 histogram bins). Each of its metrics gets a fresh
``np.random.RandomState(0)`` (``evaluation.random_seed = 0``); ours each get their own stream
of ``default_rng([0, 0])`` (`registry.metric_rng`). The points drawn differ, so values agree
within sampling noise, not digit for digit.

By default both sides read the means alone (the representation disentanglement_lib's functions
take); ``--with_code`` keeps the discrete code in ours, so that it also computes every
protocol with the code, as `evaluate_run` does (values compared: the means alone).

``--suite_points=N`` shrinks every metric to N train (N // 2 test or eval) points on both
sides (MIG: N points); ``--subset=K`` encodes only a complete sub-grid of at most K evenly
spaced values per factor instead of the 737,280 images (a quick check; the default is the
whole dataset). Prints one JSON line: per metric ``ours_s``, ``dlib_s``, ``ratio`` (dlib_s /
ours_s), the values side by side (``values``: {key: [ours, dlib]}), the settings of both
sides; ``encode_s``, the 1-minute load average at the start and the end, the cpu count. Our
DCI's time includes compiling its tree programs (as in `evaluate_run`). A function of
disentanglement_lib that raises is recorded as ``dlib_error`` (its explicitness fails when a
factor value is missing from the test split: a few hundred points on the whole grid).

The full run (the study's settings on the whole dataset; disentanglement_lib's DCI alone takes
minutes on two cores), on quiet cores:

  python -m benchmarks.dlib_suite --config=experiments/configs/dsprites_cascade.py:m6
"""
from __future__ import annotations

import argparse
import ast
import functools
import importlib
import inspect
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import types

import jax
import numpy as np

from benchmarks.eval import load_config
from disentangle import data as data_lib
from disentangle import methods
from disentangle.evaluation import encodings
from disentangle.metrics import registry

DEFAULT_DLIB = os.environ.get("DISENTANGLE_DLIB", "")
METRICS_DIR = "disentanglement_lib/evaluation/metrics"
GIN_FILES = tuple(f"disentanglement_lib/config/unsupervised_study_v1/metric_configs/{n}.gin"
                  for n in ("beta_vae_sklearn", "factor_vae_metric", "mig", "sap_score", "dci",
                            "modularity_explicitness", "unsupervised")
                  ) + ("disentanglement_lib/config/sample/irs/irs.gin",)

# our registered name: (dlib module, function, gin scopes, {our key: dlib's key})
PAIRS = {
    "factor_score_dlib": ("factor_vae", "compute_factor_vae", ("factor_vae_score", "prune_dims"),
                          {"eval_accuracy": "eval_accuracy",
                           "train_accuracy": "train_accuracy"}),
    "beta_vae": ("beta_vae", "compute_beta_vae_sklearn", ("beta_vae_sklearn",),
                 {"eval_accuracy": "eval_accuracy", "train_accuracy": "train_accuracy"}),
    "mig": ("mig", "compute_mig", ("mig", "discretizer"), {"score": "discrete_mig"}),
    "sap": ("sap_score", "compute_sap", ("sap_score",), {"score": "SAP_score"}),
    "dci": ("dci", "compute_dci", ("dci",),
            {k: k for k in ("disentanglement", "completeness", "informativeness_train",
                            "informativeness_test")}),
    "modularity": ("modularity_explicitness", "compute_modularity_explicitness",
                   ("modularity_explicitness", "discretizer"),
                   {"modularity": "modularity_score", "explicitness_train":
                    "explicitness_score_train", "explicitness_test": "explicitness_score_test"}),
    # (its ``num_active_dims`` is the sum of the active means, not a count: not compared)
    "irs": ("irs", "compute_irs", ("irs", "discretizer"), {"score": "IRS"}),
    "unsupervised": ("unsupervised_metrics", "unsupervised_metrics",
                     ("unsupervised_metrics", "discretizer"),
                     {k: k for k in ("gaussian_total_correlation",
                                     "gaussian_wasserstein_correlation",
                                     "gaussian_wasserstein_correlation_norm",
                                     "mutual_info_score")}),
}
# the settings --suite_points replaces: (gin parameter, the share of N it takes)
POINTS = {"num_train": 1.0, "num_test": 0.5, "num_eval": 0.5, "num_variance_estimate": 1.0}


# -- disentanglement_lib, imported with a stand-in for gin ------------------------------------

class _Gin:
  """The part of gin the metric modules touch: ``configurable`` and ``REQUIRED``; bindings are
  read from gin files (``name.param = literal`` or ``= @configurable``)."""

  REQUIRED = object()

  def __init__(self):
    self.registry, self.bindings = {}, {}

  def configurable(self, name=None, blacklist=(), **unused):
    del blacklist, unused
    if callable(name):
      return self.configurable(name.__name__)(name)

    def decorate(fn):
      gin_name = name or fn.__name__

      @functools.wraps(fn)
      def bound(*args, **kwargs):
        for param, value in self.bindings.get(gin_name, {}).items():
          kwargs.setdefault(param, value)
        call = inspect.signature(fn).bind(*args, **kwargs)
        call.apply_defaults()
        unbound = [p for p, v in call.arguments.items() if v is self.REQUIRED]
        if unbound:
          raise TypeError(f"{gin_name}: no gin binding for {unbound}")
        return fn(*args, **kwargs)

      bound.gin_name = gin_name
      self.registry[gin_name] = bound
      return bound
    return decorate

  def parse(self, text: str) -> None:
    for line in text.splitlines():
      line = line.split("#", 1)[0].strip()
      if not line or "=" not in line:
        continue
      key, value = (s.strip() for s in line.split("=", 1))
      scope, param = key.rsplit(".", 1)
      if scope in ("evaluation", "dataset"):
        continue
      value = value if value.startswith("@") else ast.literal_eval(value)
      old = self.bindings.setdefault(scope, {}).get(param, value)
      if old != value:
        raise ValueError(f"gin files bind {key} to both {old!r} and {value!r}")
      self.bindings[scope][param] = value

  def settings(self, scopes) -> dict:
    """{scope.param: value} bound in ``scopes`` (a configurable as ``@name``)."""
    return {f"{scope}.{param}": (f"@{v.gin_name}" if callable(v) else v)
            for scope in scopes for param, v in self.bindings.get(scope, {}).items()}

  def resolve(self) -> None:
    for params in self.bindings.values():
      for param, value in params.items():
        if isinstance(value, str) and value.startswith("@"):
          params[param] = self.registry[value[1:]]


def _tree(dlib: str, tmp: str) -> pathlib.Path:
  """A folder holding ``disentanglement_lib/``: ``dlib`` itself, or its files extracted there
  from the git directory ``dlib``."""
  path = pathlib.Path(dlib)
  if (path / "disentanglement_lib").is_dir():
    return path
  paths = ["disentanglement_lib/__init__.py", "disentanglement_lib/evaluation/__init__.py",
           METRICS_DIR, *GIN_FILES]
  archive = subprocess.run(["git", "--git-dir", str(path), "archive", "HEAD", *paths],
                           check=True, capture_output=True).stdout
  subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
  return pathlib.Path(tmp)


def import_dlib(root: pathlib.Path, points: int = 0):
  """(disentanglement_lib's metric modules by name, the gin stand-in with the study's bindings;
  ``points`` > 0 replaces the numbers of points as ``--suite_points``)."""
  gin = _Gin()
  stub = types.ModuleType("gin")
  stub.configurable, stub.REQUIRED = gin.configurable, gin.REQUIRED
  stub.tf = types.ModuleType("gin.tf")
  sys.modules.update({"gin": stub, "gin.tf": stub.tf})
  sys.path.insert(0, str(root))
  modules = {m: importlib.import_module(f"disentanglement_lib.evaluation.metrics.{m}")
             for m in ("utils", *(p[0] for p in PAIRS.values()))}
  for f in GIN_FILES:
    gin.parse((root / f).read_text())
  gin.resolve()
  if points > 0:
    for params in gin.bindings.values():
      for param, share in POINTS.items():
        if param in params:
          params[param] = max(1, int(points * share))
  return modules, gin


class DlibGroundTruth:
  """disentanglement_lib's ``GroundTruthData`` over the encoded rows: observations are row
  numbers of ``encoded`` (`encodings.EncodedGroundTruth`), factors drawn as its
  ``SplitDiscreteStateSpace`` draws them (one ``randint`` per factor)."""

  def __init__(self, encoded: encodings.EncodedGroundTruth):
    self.encoded = encoded
    self.means = np.asarray(encoded.rep.mean)

  @property
  def num_factors(self) -> int:
    return len(self.encoded.factor_sizes)

  @property
  def factors_num_values(self) -> list[int]:
    return list(self.encoded.factor_sizes)

  def sample_factors(self, num, random_state):
    return np.stack([random_state.randint(n, size=num) for n in self.factors_num_values], 1)

  def sample_observations_from_factors(self, factors, random_state):
    del random_state  # rows are unique on a grid
    return self.encoded.sample_observations_from_factors(factors, None)

  def sample(self, num, random_state):
    factors = self.sample_factors(num, random_state)
    return factors, self.sample_observations_from_factors(factors, random_state)

  def sample_observations(self, num, random_state):
    return self.sample(num, random_state)[1]

  def represent(self, rows):
    """disentanglement_lib's representation function: the stored means of ``rows``."""
    return self.means[np.asarray(rows, np.int64)]


# -- the encoded dataset ------------------------------------------------------------------------

class SubGrid:
  """A complete sub-grid of a grid dataset: at most ``k`` evenly spaced values per factor;
  factor classes renumbered 0..n-1, row i of the sub-grid is image ``rows[i]`` of ``dataset``."""

  def __init__(self, dataset, k: int):
    self.dataset = dataset
    self.values = [np.unique(np.linspace(0, n - 1, min(n, k)).round().astype(np.int64))
                   for n in dataset.factor_sizes]
    self.factor_sizes = tuple(len(v) for v in self.values)
    self.factor_names = tuple(getattr(dataset, "factor_names", ()))
    self._grid = np.indices(self.factor_sizes).reshape(len(self.values), -1).T
    full = np.stack([v[self._grid[:, j]] for j, v in enumerate(self.values)], 1)
    self.rows = dataset.indices_of_factors(full)
    self.num_examples = len(self.rows)

  def factors_of(self, indices):
    return self._grid[np.asarray(indices, np.int64)]

  def get_images(self, indices):
    return self.dataset.get_images(self.rows[np.asarray(indices, np.int64)])

  def sample_factors(self, num, rng):
    return np.stack([rng.integers(0, n, size=num) for n in self.factor_sizes], 1)


def encode(config, subset: int):
  """(EncodedGroundTruth of the whole dataset or its sub-grid, encoding timings)."""
  d = config.dataset
  dataset = data_lib.load_dataset(d.name, data_dir=d.data_dir, source=d.source,
                                  synthetic_if_missing=d.synthetic_if_missing,
                                  allow_download=False)
  method = methods.build(config, dataset.image_shape)
  params = jax.jit(method.init)(jax.random.PRNGKey(0)).params
  if subset:
    dataset = SubGrid(dataset, subset)
  encoded, _, timings = encodings.encode_ground_truth(dataset, encodings.jit_represent(
      method, config), params)
  return encoded, dataset, timings


# -- the comparison ---------------------------------------------------------------------------

def _num(v):
  return None if v is None else round(float(v), 6)


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", default="experiments/configs/dsprites_cascade.py:m6")
  parser.add_argument("--dlib", default=DEFAULT_DLIB,
                      help="disentanglement_lib: a checkout or its (bare) git directory "
                      "(default: $DISENTANGLE_DLIB)")
  parser.add_argument("--metrics", default=",".join(PAIRS),
                      help=f"comma-separated, of {','.join(PAIRS)}")
  parser.add_argument("--suite_points", type=int, default=0,
                      help="train points per metric on both sides (0: the study's 10,000)")
  parser.add_argument("--subset", type=int, default=0,
                      help="encode a sub-grid of at most K values per factor (0: every image)")
  parser.add_argument("--dci_trees", choices=("together", "sklearn"), default="together",
                      help="our DCI's trees (eval.dci_trees)")
  parser.add_argument("--with_code", action="store_true",
                      help="ours also computes the protocols with the discrete code")
  args = parser.parse_args(argv)
  if not args.dlib:
    parser.error("--dlib: a checkout of disentanglement_lib (or its bare git directory) is "
                 "required, or set $DISENTANGLE_DLIB")
  names = [n for n in args.metrics.split(",") if n]
  unknown = sorted(set(names) - set(PAIRS))
  if unknown:
    raise SystemExit(f"unknown metrics {unknown}; choose from {list(PAIRS)}")
  record = {"config": args.config, "cpu_count": os.cpu_count(),
            "load_average_1min": round(os.getloadavg()[0], 2),
            "suite_points": args.suite_points, "subset": args.subset,
            "dci_trees": args.dci_trees, "with_code": args.with_code}
  with tempfile.TemporaryDirectory() as tmp:
    modules, gin = import_dlib(_tree(args.dlib, tmp), args.suite_points)
  config, _, _ = load_config(args.config)
  encoded, dataset, enc = encode(config, args.subset)
  record.update({"num_images": encoded.num_examples, "factor_sizes": list(encoded.factor_sizes),
                 "encode_s": round(enc["total_s"], 2), "render_s": round(enc["images_s"], 2)})
  if not args.with_code:
    encoded = encodings.EncodedGroundTruth(encoded.factors, encoded.rep.without_discrete(),
                                           encoded.factor_sizes, dataset.sample_factors)
  inputs = registry.Inputs("run", np.random.default_rng([0, 0]), ground_truth=encoded,
                           represent=encoded.represent, factors=encoded.factors,
                           factor_rep=encoded.rep, factor_points="whole_dataset",
                           factor_names=tuple(getattr(dataset, "factor_names", ())),
                           encode_batch_size=encodings.ENCODE_BATCH)
  eval_config = {"suite_points": args.suite_points, "dci_trees": args.dci_trees}
  mig_points = args.suite_points or registry.MIG_NUM_POINTS
  overrides = {"mig": {"num_points": mig_points, "estimator": "histogram"}}
  ground_truth = DlibGroundTruth(encoded)
  out = {}
  for name in names:
    module, fn_name, scopes, keys = PAIRS[name]
    errors = {}
    ours, timings = registry.run(inputs, eval_config, names=[name], overrides=overrides,
                                 errors=errors)
    fn = getattr(modules[module], fn_name)
    t0, dlib_error = time.perf_counter(), None
    try:
      theirs = fn(ground_truth, ground_truth.represent, np.random.RandomState(0))
    except Exception as e:  # pylint: disable=broad-except  (e.g. a class missing from a split)
      theirs, dlib_error = {}, f"{type(e).__name__}: {e}"
    dlib_s = None if dlib_error else time.perf_counter() - t0
    mine = ours.get(name, {})
    ours_s = timings.get(f"{name}_s")
    out[name] = {
        "ours_s": None if ours_s is None else round(ours_s, 3),
        "dlib_s": None if dlib_s is None else round(dlib_s, 3),
        "ratio": None if not ours_s or dlib_s is None else round(dlib_s / ours_s, 2),
        "values": {k: [_num(mine.get(k)), _num(theirs.get(v))] for k, v in keys.items()},
        "ours_protocols": list(mine.get("by_protocol", {})) or [mine.get("protocol")],
        "dlib_settings": gin.settings(scopes),
        "ours_settings": {k: mine[k] for k in ("num_train", "num_test", "num_eval",
                                               "num_votes", "num_eval_votes", "batch_size",
                                               "num_variance_points", "num_points", "num_bins")
                          if k in mine}}
    if errors:
      out[name]["ours_error"] = errors[name]
    if dlib_error:
      out[name]["dlib_error"] = dlib_error
    print(f"{name}: ours {out[name]['ours_s']} s, disentanglement_lib {out[name]['dlib_s']} s",
          file=sys.stderr, flush=True)
  record["metrics"] = out
  record["ours_total_s"] = round(sum(m["ours_s"] or 0.0 for m in out.values()), 2)
  record["dlib_total_s"] = round(sum(m["dlib_s"] or 0.0 for m in out.values()), 2)
  record["load_average_1min_end"] = round(os.getloadavg()[0], 2)
  print(json.dumps(record, default=str), flush=True)


if __name__ == "__main__":
  main()
