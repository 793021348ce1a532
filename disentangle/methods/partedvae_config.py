"""PartedVAE's config section ``parted``: defaults, per-field rules and cross-field checks.

The defaults are the MNIST settings of Table 6 and the authors' code; every field where the paper
is silent or the code differs from the text is documented in :mod:`disentangle.methods.partedvae`.
Registered through that module (``methods.register``): ``check`` runs after the per-field
``RULES`` in ``methods.validate``; ``check_data`` needs the training set (label class counts).
"""
from __future__ import annotations

import ml_collections
import numpy as np

from disentangle import config as config_lib
from disentangle import schedules
from disentangle.data.labels import labelled as labelled_lib


def default_config() -> ml_collections.ConfigDict:
  """The ``parted`` section; the values are the MNIST ones of Table 6 / the authors' code."""
  c = ml_collections.ConfigDict()
  c.discrete_sizes = (10,)     # L_i of each categorical variable c_i
  c.u_dim = 10                 # d_u per variable
  c.prior_c = ()               # p(c_i): one probability vector per variable; () = uniform
  c.temperature = 0.67         # Gumbel-softmax temperature in training
  c.sharpness_start = 1.0      # attention s(t) = min(start + step t, max) (authors' code);
  c.sharpness_step = 2e-4      # step 0 with max = start: the paper's plain sigmoid
  c.sharpness_max = 8.0
  c.u_kl = "expected"          # 'expected' (Eq. 2) or 'sampled' (authors' code)
  c.qc_scope = "global"        # q_hat(c) over the global batch ('global') or per shard ('local')
  c.gamma_z = 15.0
  c.gamma_u = 15.0
  c.gamma_h = 30.0
  c.gamma_c = 15.0
  c.gamma_bc = 30.0
  c.bc_threshold = 0.15        # delta
  c.z_capacity_min = 0.0       # C_z: min -> max over steps (linear), then constant
  c.z_capacity_max = 7.0
  c.z_capacity_steps = 100_000
  c.u_capacity_min = 0.0
  c.u_capacity_max = 7.0
  c.u_capacity_steps = 100_000
  # Semi-supervision: the dataset's target columns naming each variable's labels, in order.
  c.targets = ("digit",)
  c.num_labelled = 256         # size of the labelled subset (0: unsupervised)
  c.labelled_subset = "first"  # data.labels.labelled rule
  c.labelled_seed = 0          # the subset's own seed (not the run seed)
  c.labelled_batch_size = 64   # B_l distinct labelled images per step
  c.sup_learning_rate = 5e-4   # the supervised Adam (authors: 5e-4)
  c.unsupervised = True        # False: the supervised update only (the paper's classifier)
  c.require_labels_file = False  # CelebA: celeba/parted_labels.csv must exist (skin tone)
  # ReduceLROnPlateau (authors' settings for MNIST / CelebA; dSprites: patience 1, sup cooldown 2)
  c.plateau = True
  c.plateau_epoch_steps = 938  # iterations per epoch: the values averaged per plateau decision
  c.plateau_factor = 0.5
  c.plateau_patience = 2       # PyTorch's patience (reduce after patience + 1 bad epochs)
  c.plateau_rtol = 1e-2
  c.plateau_cooldown = 4
  c.sup_plateau_factor = 0.5
  c.sup_plateau_patience = 2
  c.sup_plateau_rtol = 1e-1
  c.sup_plateau_cooldown = 3
  return c


_OPEN_UNIT = config_lib.in_range(0, 1, low_open=True, high_open=True)
RULES = {
    "parted.discrete_sizes": config_lib.int_tuple(min_len=1, min_value=2),
    "parted.u_dim": config_lib.POSITIVE,
    "parted.temperature": config_lib.POSITIVE,
    "parted.sharpness_start": config_lib.POSITIVE,
    "parted.sharpness_step": config_lib.NONNEG,
    "parted.sharpness_max": config_lib.POSITIVE,
    "parted.u_kl": config_lib.one_of("expected", "sampled"),
    "parted.qc_scope": config_lib.one_of("global", "local"),
    "parted.gamma_z": config_lib.NONNEG,
    "parted.gamma_u": config_lib.NONNEG,
    "parted.gamma_h": config_lib.NONNEG,
    "parted.gamma_c": config_lib.NONNEG,
    "parted.gamma_bc": config_lib.NONNEG,
    "parted.bc_threshold": config_lib.PROBABILITY_OPEN1,
    **schedules.linear_capacity_rules("parted.z_capacity"),
    **schedules.linear_capacity_rules("parted.u_capacity"),
    "parted.num_labelled": config_lib.NONNEG,
    "parted.labelled_subset": config_lib.one_of(*labelled_lib.RULES),
    "parted.labelled_seed": config_lib.NONNEG,
    "parted.labelled_batch_size": config_lib.POSITIVE,
    "parted.sup_learning_rate": config_lib.POSITIVE,
    "parted.plateau_epoch_steps": config_lib.POSITIVE,
    "parted.plateau_factor": _OPEN_UNIT,
    "parted.plateau_patience": config_lib.NONNEG,
    "parted.plateau_rtol": config_lib.in_range(0, 1, low_open=True),
    "parted.plateau_cooldown": config_lib.NONNEG,
    "parted.sup_plateau_factor": _OPEN_UNIT,
    "parted.sup_plateau_patience": config_lib.NONNEG,
    "parted.sup_plateau_rtol": config_lib.in_range(0, 1, low_open=True),
    "parted.sup_plateau_cooldown": config_lib.NONNEG,
}
STEP_FIELDS = ("parted.z_capacity_steps", "parted.u_capacity_steps")
PRIOR_TOLERANCE = 1e-6


def check(config) -> None:
  """Cross-field rules of the ``parted`` section (after the per-field ``RULES``)."""
  p = config.parted
  sizes = tuple(p.discrete_sizes)
  if p.prior_c:
    if len(p.prior_c) != len(sizes):
      raise config_lib.ConfigError(
          f"config field 'parted.prior_c' must hold one probability vector per variable "
          f"({len(sizes)} for parted.discrete_sizes={sizes}), got {len(p.prior_c)}")
    for i, (vec, size) in enumerate(zip(p.prior_c, sizes)):
      vec = np.asarray(vec, np.float64)
      if vec.shape != (size,):
        raise config_lib.ConfigError(f"config field 'parted.prior_c' vector {i} must have "
                                     f"{size} entries, got {tuple(vec.shape)}")
      if np.any(vec < 0):
        raise config_lib.ConfigError(f"config field 'parted.prior_c' vector {i} has a "
                                     f"negative entry: {vec.tolist()}")
      if abs(vec.sum() - 1.0) > PRIOR_TOLERANCE:
        raise config_lib.ConfigError(f"config field 'parted.prior_c' vector {i} must sum to 1 "
                                     f"(tolerance {PRIOR_TOLERANCE}), sums to {vec.sum()!r}")
  for kind in ("z", "u"):
    lo, hi = p[f"{kind}_capacity_min"], p[f"{kind}_capacity_max"]
    if hi < lo:
      raise config_lib.ConfigError(f"config field 'parted.{kind}_capacity_max' ({hi}) must be "
                                   f">= 'parted.{kind}_capacity_min' ({lo})")
  if p.sharpness_max < p.sharpness_start:
    raise config_lib.ConfigError(f"config field 'parted.sharpness_max' ({p.sharpness_max}) must "
                                 f"be >= 'parted.sharpness_start' ({p.sharpness_start})")
  if p.num_labelled:
    if len(p.targets) != len(sizes):
      raise config_lib.ConfigError(
          f"config field 'parted.targets' must name one label column per variable "
          f"({len(sizes)}), got {list(p.targets)}")
    if p.num_labelled < p.labelled_batch_size:
      raise config_lib.ConfigError(
          f"config field 'parted.num_labelled' ({p.num_labelled}) must be 0 or >= "
          f"'parted.labelled_batch_size' ({p.labelled_batch_size})")
  elif not p.unsupervised:
    raise config_lib.ConfigError("config field 'parted.unsupervised' is False (supervised only) "
                                 "but 'parted.num_labelled' is 0: nothing would be trained")


def smoke(c) -> None:
  """The smoke run: capacities reach their maxima and plateau epochs last 50 steps."""
  c.parted.z_capacity_steps = c.num_steps
  c.parted.u_capacity_steps = c.num_steps
  c.parted.plateau_epoch_steps = 50


def check_data(config, dataset) -> None:
  """Label classes must fit their variables: ``dataset.target_sizes[name] <= L_i``.

  Raises ``ConfigError`` naming ``parted.targets``. (Unknown names are caught by the input
  pipeline's ``make_source``, which lists the valid ones.)
  """
  p = config.parted
  if not p.num_labelled:
    return
  sizes = dict(getattr(dataset, "target_sizes", {}))
  for name, size in zip(p.targets, p.discrete_sizes):
    if name in sizes and sizes[name] > size:
      raise config_lib.ConfigError(
          f"config field 'parted.targets': label {name!r} has {sizes[name]} classes, more than "
          f"its variable's size {size} (parted.discrete_sizes={tuple(p.discrete_sizes)})")


def require_labels_file(config) -> None:
  """``parted.require_labels_file`` on CelebA: ``MissingDataError`` unless the file exists."""
  if not (config.parted.require_labels_file and config.dataset.name == "celeba"):
    return
  from disentangle.data import files  # pylint: disable=g-import-not-at-top
  from disentangle.data.datasets import celeba  # pylint: disable=g-import-not-at-top
  root, _ = files.data_dir_origin(config.dataset.data_dir)
  path = celeba.parted_labels_path(root)
  if not path.is_file():
    raise files.MissingDataError(
        f"parted.require_labels_file: {path} not found (the authors' per-image one-hot label "
        f"rows, e.g. their warm_up_labels.csv, are not public)")
