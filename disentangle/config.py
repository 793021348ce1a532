"""Configs: the one home of hyperparameters, and their validation.

Every experiment config (``experiments/configs/*.py::get_config(arg)``) starts from
:func:`base_config` plus the chosen method's section (``methods.<name>.default_config``), then
changes fields. :func:`validate` runs before anything is compiled: an unknown field, a wrong
type or an impossible value raises :class:`ConfigError` naming the field.
"""
from __future__ import annotations

import difflib
import json
import math
from typing import Any, Callable

import ml_collections

from disentangle import errors


class ConfigError(errors.UserError, ValueError):
  """A config field is unknown, of the wrong type, or holds an impossible value."""


# ---------------------------------------------------------------------------------------------
# The allowed values of fields that other modules read, each tuple's first entry the default.
# These modules import the names from here (the config imports no other part of the package).

# ``dataset.placement``: where the training set lives during training. 'auto' resolves per set
# and device to 'device' or 'host' (resolve; train/device_data.py).
PLACEMENTS = ("auto", "device", "host")
# ``dataset.source``: dSprites 'file', 'render' or 'auto'; any set 'tfds' (data.load_dataset).
# Training a dSprites-based set on 'auto' needs the official file unless
# ``dataset.synthetic_if_missing`` (the smoke variants): 'render' trains on the stand-in on purpose.
SOURCES = ("auto", "file", "render", "tfds")
# ``dataset.variant_draw``: colour / noisy / scream dSprites, one draw per row or per image
# (data/datasets/dsprites_variants.py).
VARIANT_DRAWS = ("per_image", "per_sample")
# ``eval.estimators``: the scikit-learn classifiers of disentanglement_lib's suite, the pinned
# version's defaults or 0.20's as Locatello et al.'s study ran them (metrics/estimators.py).
ESTIMATORS = ("current", "study2019")
# ``model.conv_impl``: the conv VAEs' 4x4 stride-2 layers, all with the same parameters and
# outputs (nn/layers.py): Flax's ('flax', the reference), XLA:CPU's fast rewrite ('fast':
# FastConv, FastConvTranspose) and the accelerators' form with no dilated operand ('gemm': the
# layers' products as batched matmuls, GemmConv and GemmConvTranspose). 'auto': BACKEND_DEFAULTS.
CONV_IMPLS = ("flax", "fast", "gemm")
# ``model.dtype``: the networks' compute dtype. Parameters, optimiser state, the likelihood, the
# KL terms, discriminators and the assignment's costs stay float32 (nn/networks.py).
COMPUTE_DTYPES = ("float32", "bfloat16")
# ``model.precision``: ``jax.lax.Precision`` of the networks' matmuls and convolutions. 'default'
# lets a GPU use TF32 for float32 operands (JAX's default); 'highest' is true float32.
PRECISIONS = ("default", "highest")
# ``seed_layout``: N seeds in one program, vmapped or unrolled (the layouts 'auto' resolves to,
# those `train.runs.Runs` maps); 'auto' per backend (BACKEND_DEFAULTS; train/seeds.py).
SEED_LAYOUTS_RESOLVED = ("vmap", "unroll")
SEED_LAYOUTS = ("auto", *SEED_LAYOUTS_RESOLVED)
# Where a step's exact assignment is solved (train/codes.py): inside the compiled step, or outside
# it with the host's solve of one group of runs overlapping the device's work on the other
# (where the program has codes.MIN_RUNS runs, on one process; else in the step).
ASSIGNMENT_PLACEMENTS = ("auto", "step", "overlapped")
# ``model.init``: the kernel initialisers; ``model.architecture``: CascadeVAE's tables or
# disentanglement_lib's networks; ``model.activation``: the encoder trunk's (nn/networks.py).
INITS = ("reference", "reference_flax_fan", "flax", "tensorflow")
ARCHITECTURES = ("cascade", "dlib")
# Encoder conv widths at 32x32 (nn/networks.py ENCODER_WIDTHS): CascadeVAE's / Dupont's.
ENCODER_WIDTH_SETS = ("cascade", "dupont")
ACTIVATIONS = ("relu", "leaky_relu")
# ``model.likelihood``: the reconstruction term (losses.log_likelihood).
LIKELIHOODS = ("bernoulli", "l1")
# ``eval.mig_estimator``: one of MIG's estimators, or 'both' (metrics/mig.py, metrics/papers.py);
# ``eval.mig_factors``: the factors MIG averages over (metrics/mig.py).
MIG_ESTIMATORS = ("histogram", "sampled")
MIG_FACTOR_SETS = ("protocol", "all", "chen_et_al")
# ``eval.use_discrete``: whether a discrete code enters the metrics (metrics/registry.py).
USE_DISCRETE = ("protocol", "include", "exclude")
# ``eval.representation``: what disentanglement_lib's suite scores (metrics/postprocess.py).
REPRESENTATIONS = ("mean", "sampled", "both")
# ``eval.select``: the checkpoint reported beside the final one (train/selection.py).
SELECT_RULES = ("final", "best_validation", "best_metric")

# The dataset names (``dataset.name``, ``dataset.eval_name``); ``data`` loads them and takes its
# registry (``data.DATASETS``, ``data.DLIB_SETS``, ``data.TFDS_ONLY``) from here.
# disentanglement_lib's dSprites views (data/datasets/dsprites_variants.py) and MPI3D sets
# (data/datasets/mpi3d.py).
DSPRITES_VARIANTS = ("color_dsprites", "noisy_dsprites", "scream_dsprites", "dsprites_noshape")
MPI3D_DATASETS = ("mpi3d_toy", "mpi3d_realistic", "mpi3d_real")
# disentanglement_lib's sets (data/ground_truth/named_data.py) beyond dSprites and the TFDS ones.
DLIB_DATASETS = DSPRITES_VARIANTS + ("cars3d",) + MPI3D_DATASETS
# The sets read from their files (or TFDS); then those read only from TFDS (source='tfds').
DATASETS = ("dsprites", "mnist", "fashion_mnist", "chairs", "celeba", "dsprites_unfair",
            *DLIB_DATASETS)
TFDS_ONLY_DATASETS = ("shapes3d", "smallnorb")

# The splits each dataset accepts (``dataset.train_split``, ``dataset.eval_split``; checked per
# set by ``data.check_split``, which reads them from here). MNIST / Fashion-MNIST: the official
# 60000 / 10000, and the training file cut into 'train50k' / 'valid10k'
# (``data.VALIDATION_SPLITS``). dSprites, Chairs: 'train' = 'all' images. CelebA: 'train' = 'all'
# 202599 images (as the papers train), 'official_train' / 'official_valid' / 'official_test' the
# official partition (162770 / 19867 / 19962, list_eval_partition.txt).
SPLITS: dict[str, tuple[str, ...]] = {
    "dsprites": ("train", "all"),
    "dsprites_unfair": ("train", "all"),
    "mnist": ("train", "test", "train50k", "valid10k"),
    "fashion_mnist": ("train", "test", "train50k", "valid10k"),
    "chairs": ("train", "all"),
    "celeba": ("train", "all", "official_train", "official_valid", "official_test"),
    "shapes3d": ("train", "all"),
    "smallnorb": ("train", "test", "all"),  # 'all' = train + test (48600), as disentanglement_lib
    **{name: ("train", "all") for name in DLIB_DATASETS},  # 'train' = 'all', as in the papers
}
# Every split name of some dataset.
ALL_SPLITS = tuple(dict.fromkeys(s for splits in SPLITS.values() for s in splits))

# dSprites' size: its full factor grid, 3 shapes x 6 scales x 40 orientations x 32 x 32 positions
# (data/datasets/dsprites.py).
DSPRITES_SIZE = 737_280

# dsprites_unfair (FFVAE App. B; data/datasets/dsprites_unfair.py): P(shape, x) ∝ (i_S/3)^q_shape
# + (i_X/32)^q_x with indices counted from unfair_index_base; unfair_size rows drawn with
# unfair_seed. The ``dataset.unfair_*`` fields' defaults.
UNFAIR_DEFAULTS = {"unfair_q_shape": 1.0, "unfair_q_x": 3.0, "unfair_index_base": 1,
                   "unfair_size": DSPRITES_SIZE, "unfair_seed": 0}


def base_config() -> ml_collections.ConfigDict:
  """Fields shared by every method. Method sections are added by the experiment configs."""
  c = ml_collections.ConfigDict()
  c.method = "betavae"
  c.seed = 0
  c.num_seeds = 1             # >1 trains independent seeds at once, one run dir each
  c.seed_layout = SEED_LAYOUTS[0]  # num_seeds > 1: 'vmap', 'unroll', 'auto' (unroll on CPU;
                                   # train/seeds.py)
  c.sweep = ""                # 'field=v1|v2;field2=...': a grid of runs x seeds (train/runs.py)
  c.assignment_placement = "auto"  # ASSIGNMENT_PLACEMENTS: a step's exact assignment in the
                                   # compiled step, or overlapped with the device's work (two
                                   # groups of runs; train/codes.py); 'auto': BACKEND_DEFAULTS
  c.num_steps = 1000
  c.batch_size = 64           # the global batch, split over all devices / processes
  c.weight_decay = 0.0        # L2 on kernels added to the loss (authors' CascadeVAE code: 4e-5)

  c.dataset = ml_collections.ConfigDict()
  c.dataset.name = "dsprites"
  c.dataset.data_dir = ""                 # '' = $DISENTANGLE_DATA_DIR if set, else ~/disentangle_data
  c.dataset.train_split = "train"         # SPLITS; CelebA 'train' = all 202599 images
  c.dataset.eval_name = ""                # set evaluated on; '' = the training set (dataset.name)
  c.dataset.source = SOURCES[0]           # SOURCES: dSprites 'file', 'render' or 'auto'; 'tfds'
  c.dataset.tfds_data_dir = ""            # source 'tfds': prepared sets (gs://... ok); '' = TFDS's
  c.dataset.tfds_name = ""                # source 'tfds': builder to read; '' = catalog name
  c.dataset.synthetic_if_missing = False  # smoke variants: stand-ins for missing files
                                          # (dSprites on 'auto': the renderer)
  c.dataset.allow_download = True
  c.dataset.placement = PLACEMENTS[0]     # 'device' (the set on the device, batches gathered in
                                          # the step), 'host' or 'auto' (train/device_data.py)
  c.dataset.eval_split = "test"           # split of the evaluated set (SPLITS)
  # colour / noisy / scream dSprites: 'per_image' (one draw per row) or 'per_sample' (anew for
  # every image, as disentanglement_lib; data/datasets/dsprites_variants.py)
  c.dataset.variant_draw = VARIANT_DRAWS[0]
  c.dataset.update(UNFAIR_DEFAULTS)       # dsprites_unfair's law and draw (UNFAIR_DEFAULTS)

  c.model = ml_collections.ConfigDict()
  c.model.latent_dim = 10
  c.model.init = INITS[0]             # INITS; 'tensorflow': tf.layers' defaults
  c.model.architecture = ARCHITECTURES[0]  # 'cascade' (CascadeVAE Tables 5-6) / 'dlib' (its study)
  c.model.posterior_head = "logvar"
  c.model.conv_impl = "auto"         # CONV_IMPLS (same numbers); 'auto': BACKEND_DEFAULTS
  c.model.dtype = "float32"           # compute dtype (COMPUTE_DTYPES); parameters stay float32
  c.model.precision = "default"       # matmul / convolution precision (PRECISIONS)
  c.model.hidden_units = 256          # dense layer of encoder and decoder (FFVAE App. C: 128)
  c.model.encoder_widths = ENCODER_WIDTH_SETS[0]  # 32 px convs: 'cascade' (32, 32, 64) / 'dupont' (32, 64, 64)
  c.model.activation = ACTIVATIONS[0]  # encoder trunk: 'relu' / 'leaky_relu' (slope leaky_slope)
  c.model.leaky_slope = 0.01
  c.model.activation_last = 0         # the activation follows the trunk's last N layers (0 = all)
  c.model.likelihood = LIKELIHOODS[0]  # reconstruction: 'bernoulli' / 'l1' (losses.log_likelihood)

  c.optimizer = ml_collections.ConfigDict()
  c.optimizer.learning_rate = 3e-4
  c.optimizer.b1 = 0.9
  c.optimizer.b2 = 0.999
  c.optimizer.eps = 1e-8

  c.log_every = 100
  c.profile = ml_collections.ConfigDict()
  c.profile.num_steps = 0         # > 0: trace that many steps with jax.profiler into
                                  # <workdir>/profile (TensorBoard, Perfetto; train/profiling.py)
  c.profile.first_step = 10       # tracing starts after this step (compilation and warm-up done)
  c.eval_every = 5000
  c.checkpoint_every = 5000
  c.keep_checkpoints = 2
  c.progress_bar = True

  c.eval = ml_collections.ConfigDict()
  c.eval.num_images = 64          # reconstructions / traversals in the PNGs
  c.eval.num_points = 10000       # points for accuracy / information estimates (0 = all)
  c.eval.factor_score = False     # CascadeVAE supplement C score (ground-truth data only)
  c.eval.factor_score_votes = 800
  c.eval.partedvae_score = False  # PartedVAE's factor score at eval steps (evaluate_run: always)
  c.eval.cluster_accuracy = False # discrete code vs labels (needs a discrete code and labels)
  c.eval.information = True       # I(x; z_j), KL_j, TC at eval steps
  c.eval.mig = False              # MIG at eval steps too (evaluate_run always computes it)
  # MIG's estimator: 'histogram' (disentanglement_lib) / 'sampled' (Chen et al.) / 'both' (value:
  # histogram; the sampled one beside it)
  c.eval.mig_estimator = MIG_ESTIMATORS[0]
  # The factors MIG averages over: 'all' / 'chen_et_al' (dSprites without shape, their code) /
  # 'protocol' (sampled: Chen et al.'s, histogram: all; metrics/mig.py)
  c.eval.mig_factors = MIG_FACTOR_SETS[0]
  # The discrete code in the metrics: 'protocol' (each metric's published one: score yes, MIG no)
  # / 'include' / 'exclude'
  c.eval.use_discrete = USE_DISCRETE[0]
  c.eval.repeats = 1                  # metrics that sample run R times from R streams: mean, std
  c.eval.suite_points = 0             # disentanglement_lib's suite: points per metric (0: its own,
                                      # 10,000 train / 5,000 test; N: N train, N / 2 test)
  c.eval.max_points = 0               # experiments.evaluate: 0, the papers' protocols (dSprites'
                                      # 737,280 images encoded); N >= 100, at most N images encoded
                                      # (a thinned factor grid) and N points per metric
                                      # (evaluation/evaluate_run.py)
  c.eval.dci_trees = "together"       # DCI's GradientBoostingClassifier(): 'together' (the trees of
                                      # a stage grown at once, metrics/boosted_trees.py) /
                                      # 'sklearn' (scikit-learn's own, one tree at a time)
  # disentanglement_lib's later scores, in the run stage (evaluate) when switched on: each costs
  # more than the rest of the suite (metrics/dlib/downstream.py, fairness.py, unified.py).
  c.eval.downstream = False           # downstream tasks: plain (logistic, boosted trees), reduced,
                                      # strong
  c.eval.fairness_dlib = False        # the unfairness of Locatello et al. 2019b
  c.eval.unified_scores = False       # the unified scores
  c.eval.estimators = ESTIMATORS[0]   # the suite's scikit-learn classifiers: 'current' (the pinned
                                      # version's defaults) / 'study2019' (0.20's, as Locatello et
                                      # al.'s study ran them: metrics/estimators.py)
  # What disentanglement_lib's suite scores: 'mean' / 'sampled' (mean + sigma eps) / 'both', as
  # its mean.gin and sampled.gin postprocessing (metrics/postprocess.py)
  c.eval.representation = REPRESENTATIONS[0]
  c.eval.udr_correlation = "lasso"    # UDR's R across a row's seeds (aggregate,
                                      # metrics/dlib/udr.py): 'lasso' (disentanglement_lib's
                                      # default) / 'spearman'
  # Which checkpoint the results report beside the final one (train/selection.py):
  # 'final' (no selection), 'best_validation' (best eval.select_metric on the held-out
  # validation split, e.g. MNIST 'valid10k'; needs dataset.train_split = its training part,
  # 'train50k'), 'best_metric' (best eval.select_metric on the evaluated data itself, as the
  # authors' dSprites code; only where no held-out split exists).
  c.eval.select = SELECT_RULES[0]
  c.eval.select_metric = "accuracy"   # a registered metric computed at eval steps
  c.eval.background = True            # in-training evaluation on a worker thread beside the steps
                                      # (train/background.py); False: in the loop (same files)

  c.mesh = ml_collections.ConfigDict()
  c.mesh.num_devices = 0          # 0 = all devices
  c.mesh.runs = 0                 # devices along the runs axis (0 = as many as divide the runs)
  c.mesh.data = 0                 # devices splitting each batch (0 = the devices left)
  c.xla = ml_collections.ConfigDict()
  c.xla.cpu_ynn_dot = True        # XLA:CPU: YNNPACK for dots only, not convs (train/host.py;
                                  # benchmarks.train_step)
  c.distributed = ml_collections.ConfigDict()
  c.distributed.initialize = False
  c.distributed.coordinator_address = ""
  c.distributed.num_processes = 0
  c.distributed.process_id = -1
  return c


def parse_arg(arg: str | None) -> tuple[list[str], dict[str, str]]:
  """``'smoke,seed=3'`` -> (['smoke'], {'seed': '3'}): big_vision's ``get_config(arg)`` style."""
  names, kv = [], {}
  for token in (arg or "").split(","):
    token = token.strip()
    if not token:
      continue
    if "=" in token:
      k, v = token.split("=", 1)
      kv[k.strip()] = v.strip()
    else:
      names.append(token)
  return names, kv


def apply_overrides(config: ml_collections.ConfigDict, overrides: dict[str, str]) -> None:
  """Set dotted fields from strings, parsed to the type of the existing value."""
  for key, text in overrides.items():
    parent, leaf = field_parent(config, key)
    old = parent[leaf]
    if isinstance(old, ml_collections.ConfigDict):
      fields = sorted(old.keys())
      raise ConfigError(f"config field {key!r} is a section: set one of its fields "
                        f"{[f'{key}.{f}' for f in fields]}")
    try:
      if isinstance(old, bool):
        value = {"true": True, "1": True, "false": False, "0": False}[text.lower()]
      elif isinstance(old, int):
        value = int(float(text)) if float(text).is_integer() else int(text)
      elif isinstance(old, float):
        value = float(text)
      else:
        value = text
    except (KeyError, ValueError):
      raise ConfigError(f"config field {key!r}: cannot parse {text!r} as "
                        f"{type(old).__name__}") from None
    with config.unlocked() if hasattr(config, "unlocked") else _null():
      parent[leaf] = value


def field_parent(config, path: str):
  """``(section, leaf)`` of the dotted field ``path`` (``section[leaf]`` is its value);
  :class:`ConfigError` naming the nearest known field when ``config`` lacks it. The one walker of
  dotted paths over a config."""
  parts = path.split(".")
  node = config
  for p in parts[:-1]:
    if p not in node or not isinstance(node[p], (ml_collections.ConfigDict,
                                                 ml_collections.FrozenConfigDict)):
      raise unknown_field(path, config)
    node = node[p]
  if parts[-1] not in node:
    raise unknown_field(path, config)
  return node, parts[-1]


def get_field(config, path: str):
  """The value of the dotted field ``path`` (``'dataset.placement'``); ConfigError if unknown."""
  node, leaf = field_parent(config, path)
  return node[leaf]


def has_field(config, path: str) -> bool:
  """Whether ``config`` has the dotted field ``path``."""
  try:
    field_parent(config, path)
  except ConfigError:
    return False
  return True


def set_field(config, path: str, value) -> None:
  """Set the existing dotted field ``path`` to ``value`` as is (no parsing; ConfigError if
  unknown)."""
  node, leaf = field_parent(config, path)
  node[leaf] = value


def unknown_field(path: str, config) -> ConfigError:
  """The error for a field ``path`` that ``config`` (a config or ``{dotted field: value}``) lacks,
  with the nearest known field's name."""
  known = list(fields_of(config))
  same_leaf = [p for p in known if p.split(".")[-1] == path.split(".")[-1]]
  near = same_leaf or difflib.get_close_matches(path, known, n=1, cutoff=0.75)
  hint = f" (did you mean {near[0]!r}?)" if near else ""
  return ConfigError(f"unknown config field {path!r}{hint}")


class _null:
  def __enter__(self):
    return self

  def __exit__(self, *a):
    return False


def variant_error(config_name: str, unknown: list[str], known: list[str]) -> ConfigError:
  return ConfigError(f"{config_name}: unknown variant(s) {unknown}; known variants: {sorted(known)}")


# Implementation choices with identical numbers whose 'auto' resolves per backend. CPU: the faster
# step ('fast' convolutions, one decoder call per class; `benchmarks.train_step`,
# benchmarks/README.md, "The train step: fast layers and host settings"). GPU: the convolution
# form with no zero-stuffed operand and exactly the layers' multiply-adds in XLA:GPU's lowering of
# the vmapped step (`benchmarks.gpu_lowering`, benchmarks/README.md, "The step as a GPU gets it");
# `benchmarks.gpu_levers` times every form on a GPU. Other backends: the program with fewer
# top-level operations ('flax' convolutions, the classes' decoder calls stacked).
BACKEND_DEFAULTS = {
    "model.conv_impl": {"cpu": "fast", "gpu": "gemm", "other": "flax"},
    "cascade.unary_batching": {"cpu": "per_class", "other": "stacked"},
    # XLA:CPU runs the grouped convolutions of vmapped seeds slower than N plain ones; a GPU runs
    # them as fast and compiles them faster than unrolled copies (train/seeds.py).
    "seed_layout": {"cpu": "unroll", "other": "vmap"},
    # From codes.MIN_RUNS runs on one process, a GPU's device work hides the host's solves of the
    # other group of runs (`benchmarks.gpu_levers`, benchmarks/README.md); on the CPU the host
    # and the device share the cores.
    "assignment_placement": {"gpu": "overlapped", "other": "step"},
}
# ``dataset.placement='auto'``: the training set goes to the device when its compact form takes
# at most this share of one device's memory and, on the CPU backend, is held in memory already
# (train/device_data.py).
DEVICE_SHARE = 0.25


def resolve(field: str, value: str, backend: str | None = None, *, size: int = 0,
            limit: int = 0, in_memory: bool = True) -> str:
  """``value`` of ``field``, with ``'auto'`` replaced: the one place where every ``'auto'`` is
  decided. ``BACKEND_DEFAULTS`` for ``backend`` (default: JAX's); ``dataset.placement`` from
  the compact training set's ``size`` and one device's memory ``limit`` (bytes) and whether the
  set is ``in_memory`` (``DEVICE_SHARE``)."""
  if value != "auto":
    return value
  if backend is None:
    import jax  # pylint: disable=g-import-not-at-top
    backend = jax.default_backend()
  if field == "dataset.placement":
    fits = size <= DEVICE_SHARE * limit and (in_memory or backend != "cpu")
    return "device" if fits else "host"
  table = BACKEND_DEFAULTS[field]
  return table.get(backend, table["other"])


# ---------------------------------------------------------------------------------------------
# 'auto' resolved once, when a run is set up.

# The fields a run's ``config.json`` holds resolved (:func:`resolve_run`): the backend's choices
# (BACKEND_DEFAULTS) and where the training set lives (``dataset.placement``, decided from the set
# and the device's memory, train/device_data.py). Under REQUESTED the file keeps what was asked.
RESOLVED_FIELDS = (*BACKEND_DEFAULTS, "dataset.placement")
REQUESTED = "requested"


def _resolved_values(config, backend: str | None) -> dict:
  """{field: value} of every BACKEND_DEFAULTS field of ``config`` that holds ``'auto'``."""
  return {field: resolve(field, "auto", backend) for field in BACKEND_DEFAULTS
          if has_field(config, field) and get_field(config, field) == "auto"}


def resolve_run(config, backend: str | None = None, *, placement: str | None = None):
  """``config`` with every backend-dependent ``'auto'`` (:data:`BACKEND_DEFAULTS`: the
  convolutions' form, the unary passes' batching, the seeds' layout) resolved for ``backend``
  (default: JAX's) and, when given, ``dataset.placement`` set to ``placement`` (``'device'`` or
  ``'host'``, as `train.device_data.prepare` decided). The one place where a run's ``'auto'``
  is decided: the trainer resolves its config when it sets a run up, and `methods.build` the
  config of a method built outside a run; the modules read the resolved values. ``config``
  itself when nothing changes, else an unlocked copy."""
  changes = _resolved_values(config, backend)
  if placement is not None and config.dataset.placement != placement:
    changes["dataset.placement"] = placement
  if not changes:
    return config
  out = copy(config)
  for field, value in changes.items():
    set_field(out, field, value)
  return out


# ---------------------------------------------------------------------------------------------
# Validation.

Rule = tuple[Callable[[Any], bool], str]

# The shared validators: every RULES table (base, methods, datasets) is built from these.
POSITIVE: Rule = (lambda v: v > 0, "> 0")
NONNEG: Rule = (lambda v: v >= 0, ">= 0")
PROBABILITY_OPEN1: Rule = (lambda v: 0 <= v < 1, "in [0, 1)")


def one_of(*options) -> Rule:
  """The value is one of ``options`` (the message lists them)."""
  return (lambda v: v in options, f"one of {list(options)}")


def in_range(low, high, *, low_open=False, high_open=False) -> Rule:
  """low <= v <= high, with either end open on request; ``None`` leaves that end free."""
  def ok(v):
    if low is not None and (v <= low if low_open else v < low):
      return False
    return not (high is not None and (v >= high if high_open else v > high))
  lo = "" if low is None else ("(" if low_open else "[") + f"{low}, "
  hi = "" if high is None else f"{high}" + (")" if high_open else "]")
  what = f"in {lo}{hi}" if low is not None and high is not None else (
      f"{'>' if low_open else '>='} {low}" if high is None else f"{'<' if high_open else '<='} {high}")
  return (ok, what)


def int_tuple(*, min_len: int = 1, min_value: int | None = None) -> Rule:
  """A tuple of ints (no bools), at least ``min_len`` long, each >= ``min_value``."""
  def ok(v):
    return (isinstance(v, (tuple, list)) and len(v) >= min_len and all(
        isinstance(k, int) and not isinstance(k, bool) and (min_value is None or k >= min_value)
        for k in v))
  what = f"a tuple of at least {min_len} int(s)" + (
      f" >= {min_value}" if min_value is not None else "")
  return (ok, what)


RULES: dict[str, Rule] = {
    "seed": NONNEG,
    "num_seeds": POSITIVE,
    "seed_layout": one_of(*SEED_LAYOUTS),
    "assignment_placement": one_of(*ASSIGNMENT_PLACEMENTS),
    "num_steps": POSITIVE,
    "batch_size": POSITIVE,
    "weight_decay": NONNEG,
    "dataset.name": one_of(*DATASETS, *TFDS_ONLY_DATASETS),
    "dataset.source": one_of(*SOURCES),
    "dataset.placement": one_of(*PLACEMENTS),
    "dataset.variant_draw": one_of(*VARIANT_DRAWS),
    "dataset.train_split": one_of(*ALL_SPLITS),
    "dataset.eval_split": one_of(*ALL_SPLITS),
    "dataset.eval_name": one_of("", *DATASETS, *TFDS_ONLY_DATASETS),
    "dataset.unfair_q_shape": NONNEG,
    "dataset.unfair_q_x": NONNEG,
    "dataset.unfair_index_base": one_of(0, 1),
    "dataset.unfair_size": POSITIVE,
    "dataset.unfair_seed": NONNEG,
    "model.latent_dim": POSITIVE,
    "model.init": one_of(*INITS),
    "model.architecture": one_of(*ARCHITECTURES),
    "model.posterior_head": one_of("logvar", "softplus_sigma"),
    "model.conv_impl": one_of("auto", *CONV_IMPLS),
    "model.dtype": one_of(*COMPUTE_DTYPES),
    "model.precision": one_of(*PRECISIONS),
    "model.hidden_units": POSITIVE,
    "model.encoder_widths": one_of(*ENCODER_WIDTH_SETS),
    "model.activation": one_of(*ACTIVATIONS),
    "model.leaky_slope": NONNEG,
    "model.activation_last": NONNEG,
    "model.likelihood": one_of(*LIKELIHOODS),
    "optimizer.learning_rate": POSITIVE,
    "optimizer.b1": PROBABILITY_OPEN1,
    "optimizer.b2": PROBABILITY_OPEN1,
    "optimizer.eps": POSITIVE,
    "log_every": POSITIVE,
    "profile.num_steps": NONNEG,
    "profile.first_step": NONNEG,
    "eval_every": POSITIVE,
    "checkpoint_every": POSITIVE,
    "keep_checkpoints": POSITIVE,
    "eval.num_images": POSITIVE,
    "eval.num_points": NONNEG,
    "eval.factor_score_votes": POSITIVE,
    "eval.mig_estimator": one_of(*MIG_ESTIMATORS, "both"),
    "eval.mig_factors": one_of(*MIG_FACTOR_SETS),
    "eval.use_discrete": one_of(*USE_DISCRETE),
    "eval.repeats": POSITIVE,
    "eval.suite_points": NONNEG,
    "eval.max_points": (lambda v: v == 0 or v >= 100, "0 (the papers' protocols) or >= 100"),
    "eval.dci_trees": one_of("together", "sklearn"),
    "eval.estimators": one_of(*ESTIMATORS),
    "eval.representation": one_of(*REPRESENTATIONS),
    "eval.udr_correlation": one_of("lasso", "spearman"),
    "eval.select": one_of(*SELECT_RULES),
    "mesh.num_devices": NONNEG,
    "mesh.runs": NONNEG,
    "mesh.data": NONNEG,
}


def flatten(config, prefix=""):
  """``(dotted path, value)`` of every field of ``config`` (sections walked, not yielded)."""
  for key in config.keys():
    value = config[key]
    path = f"{prefix}{key}"
    if isinstance(value, (ml_collections.ConfigDict, ml_collections.FrozenConfigDict)):
      yield from flatten(value, path + ".")
    else:
      yield path, value


def fields_of(config) -> dict:
  """``{dotted path: value}`` of ``config``; a dict of dotted paths is returned as it is."""
  return config if isinstance(config, dict) else dict(flatten(config))


def _type_ok(expected, value) -> bool:
  if isinstance(expected, bool) or isinstance(value, bool):
    return isinstance(expected, bool) and isinstance(value, bool)
  if isinstance(expected, float):
    return isinstance(value, (int, float))
  if isinstance(expected, int):
    return isinstance(value, int)
  if isinstance(expected, (tuple, list)):
    return isinstance(value, (tuple, list))
  return isinstance(value, type(expected))


def validate(config, schema, rules: dict[str, Rule] | None = None) -> None:
  """Raise :class:`ConfigError` naming the first bad field of ``config`` against ``schema``.

  ``schema`` is the default config of the method (base + method section), or its ``{dotted field:
  default}``: ``config`` may not have fields the schema lacks, each value must have the schema's
  type (ints are accepted for floats), and each value must satisfy ``RULES`` plus the method's
  ``rules``.
  """
  schema_flat = fields_of(schema)
  all_rules = dict(RULES, **(rules or {}))
  for path, value in flatten(config):
    if path not in schema_flat:
      raise unknown_field(path, schema_flat)
    expected = schema_flat[path]
    if not _type_ok(expected, value):
      raise ConfigError(f"config field {path!r} must be {type(expected).__name__}, "
                        f"got {type(value).__name__} {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
      raise ConfigError(f"config field {path!r} must be finite, got {value!r}")
    if path in all_rules:
      ok, what = all_rules[path]
      if not ok(value):
        raise ConfigError(f"config field {path!r} must be {what}, got {value!r}")


def copy(config) -> ml_collections.ConfigDict:
  """An unlocked copy of ``config`` (its field references resolved): a change to one leaves the
  other as it was. What ``ConfigDict(config.to_dict())`` gives, without rebuilding every field
  through ``ConfigDict.__setattr__`` (several times slower; a study plans thousands of runs)."""
  out = config.copy_and_resolve_references()
  out.unlock()
  return out


# Options retired after a measurement (benchmarks/HISTORY.md, "Retired options"): a saved config
# that holds one reads as the run it was. A retired field is dropped (its retired values computed
# what the code computes now); a retired value reads as the value that computes the same numbers
# up to float rounding. A new config naming either is refused (RULES, unknown fields).
RETIRED_FIELDS = ("cascade.reuse_passes",)
RETIRED_VALUES = {"model.conv_impl": {"phase": "gemm"}, "model.precision": {"high": "highest"}}
# A retired field read into the field that replaced it: (new field, {old value: new value}); a
# saved config with neither reads as the old field's first value (the code before either).
RENAMED_FIELDS = {"assignment_overlap": ("assignment_placement",
                                         {False: "step", True: "overlapped"})}


def drop_retired(config) -> ml_collections.ConfigDict:
  """``config`` (a saved run's) without :data:`RETIRED_FIELDS`, its :data:`RETIRED_VALUES`
  and :data:`RENAMED_FIELDS` replaced."""
  with config.unlocked() if hasattr(config, "unlocked") else _null():
    for old, (new, values) in RENAMED_FIELDS.items():
      if not has_field(config, new):
        value = get_field(config, old) if has_field(config, old) else next(iter(values))
        config[new] = values[value]
      if old in config:
        del config[old]
    for path in RETIRED_FIELDS:
      section, _, leaf = path.rpartition(".")
      node = get_field(config, section) if has_field(config, section) else None
      if isinstance(node, ml_collections.ConfigDict) and leaf in node:
        del node[leaf]
    for path, values in RETIRED_VALUES.items():
      if has_field(config, path) and get_field(config, path) in values:
        set_field(config, path, values[get_field(config, path)])
  return config


def fill_missing(config, schema, backend: str | None = None) -> ml_collections.ConfigDict:
  """``config`` (a saved run's ``config.json``) as a run of today's code on ``backend`` (default:
  JAX's), in place. Every field of ``schema`` it lacks is added with the schema's default (a
  config written before those fields existed reads as the run it was: the defaults are what the
  code did before a field was added); a retired option reads as the run it was
  (:func:`drop_retired`); the :data:`REQUESTED` record is dropped, and an ``'auto'`` that a run
  written before runs recorded their resolved values still holds is resolved as
  :func:`resolve_run` resolves it. Fields the schema lacks are kept (validation names them)."""
  drop_retired(config)
  with config.unlocked() if hasattr(config, "unlocked") else _null():
    if REQUESTED in config and REQUESTED not in schema:
      del config[REQUESTED]
    _fill(config, schema)
    for field, value in _resolved_values(config, backend).items():
      set_field(config, field, value)
  return config


def _fill(config, schema) -> None:
  for key in schema.keys():
    value = schema[key]
    if key not in config:
      config[key] = copy(value) if isinstance(value, ml_collections.ConfigDict) else value
    elif isinstance(value, ml_collections.ConfigDict) and isinstance(
        config[key], ml_collections.ConfigDict):
      _fill(config[key], value)


def to_json(config, *, requested=None) -> str:
  """``config`` as JSON; with ``requested`` (the config as asked, before :func:`resolve_run`),
  beside it under :data:`REQUESTED` the values asked of the :data:`RESOLVED_FIELDS` (a run's
  ``config.json``: the values that computed it, and the ``'auto'`` that chose them)."""
  out = config.to_dict()
  if requested is not None:
    out[REQUESTED] = {}
    for field in RESOLVED_FIELDS:
      if has_field(requested, field):
        *sections, leaf = field.split(".")
        node = out[REQUESTED]
        for section in sections:
          node = node.setdefault(section, {})
        node[leaf] = get_field(requested, field)
  return json.dumps(out, indent=2, sort_keys=True, default=str)
