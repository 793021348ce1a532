"""Pieces shared by the experiment configs (the settings of CascadeVAE supplement B).

Every ``get_config`` ends with :func:`finish`: the ``cpu`` budget (:func:`scale_schedule`), the
``smoke`` variant, then the ``field=value`` overrides of its argument, in that order.
"""
import fractions
import pathlib
import sys

from disentangle import config as config_lib
from disentangle import methods
from disentangle.data.datasets import dsprites_draws

NEVER = 2**31 - 1  # a t_d no run reaches: the CascadeVAE-C ablation (no discrete code)
# The ``cpu`` variants: a fifth of the paper's schedule (MNIST CascadeVAE: 2.4e4 of 1.2e5
# iterations, r = 2e3 of 1e4), every schedule scaled alike by scale_schedule.
CPU_FRACTION = fractions.Fraction(1, 5)
# Periods scaled too, rounded to whole steps (a field the config lacks is skipped): evaluation,
# checkpoints and PartedVAE's plateau epoch (the steps one ReduceLROnPlateau decision averages).
PERIODS = ("eval_every", "checkpoint_every", "parted.plateau_epoch_steps")


def _config_name(module_name: str) -> str:
  """The config file's name (``config_flags`` loads it as module ``config_config``)."""
  path = getattr(sys.modules.get(module_name), "__file__", None)
  return pathlib.Path(path).stem if path else module_name


def select_variants(module_name: str, arg, known) -> tuple[list[str], dict]:
  names, overrides = config_lib.parse_arg(arg)
  unknown = [n for n in names if n not in known]
  if unknown:
    raise config_lib.variant_error(_config_name(module_name), unknown, known)
  return names, overrides


def select_row(module_name: str, names: list[str], rows: dict, default: str):
  """The one table row named among the variants (``default`` when none is named)."""
  chosen = [n for n in names if n in rows]
  if len(chosen) > 1:
    raise config_lib.ConfigError(f"{module_name}: choose one table row, got {chosen}")
  return rows[chosen[0] if chosen else default]


def method_config(method: str, dataset: str, *, num_steps: int, learning_rate: float,
                  latent_dim: int, batch_size: int = 64):
  """``method``'s config schema on ``dataset`` with the papers' shared settings filled in."""
  c = methods.schema(method)
  c.dataset.name = dataset
  c.num_steps = num_steps
  c.batch_size = batch_size
  c.optimizer.learning_rate = learning_rate
  c.model.latent_dim = latent_dim
  return c


def long_run_config(method: str, dataset: str, *, latent_dim: int, learning_rate: float,
                    factor_score: bool = True):
  """A 3e5-iteration run at batch 64 (CascadeVAE Table 1, disentanglement_lib, FFVAE App. D):
  evaluated every 5e4 iterations (the factor score when ``factor_score``), checkpoints every 1e4."""
  c = method_config(method, dataset, num_steps=300_000, learning_rate=learning_rate,
                    latent_dim=latent_dim)
  c.eval.factor_score = factor_score
  c.eval_every = 50_000
  c.checkpoint_every = 10_000
  return c


def dsprites_config(method: str, *, latent_dim: int, learning_rate: float):
  """A dSprites run of the CascadeVAE Table 1 protocol: batch 64, 3e5 iterations, the score."""
  return long_run_config(method, "dsprites", latent_dim=latent_dim, learning_rate=learning_rate)


def tfds_betavae_config(dataset: str):
  """beta-VAE as disentanglement_lib's study (Locatello et al. 2019) on a TFDS ground-truth set:
  batch 64, Adam 1e-4, 3e5 iterations, 10 latents, beta = 4; factor score and MIG."""
  c = long_run_config("betavae", dataset, latent_dim=10, learning_rate=1e-4)
  c.betavae.beta = 4.0
  c.dataset.source = "tfds"
  c.eval.mig = True
  return c


# Locatello et al. 2019's study (disentanglement_lib ``config/unsupervised_study_v1``): its seven
# data sets, named as here; a study config takes one of them as a variant (default dSprites).
STUDY_DATASETS = ("dsprites", "color_dsprites", "noisy_dsprites", "scream_dsprites", "smallnorb",
                  "cars3d", "shapes3d")


def study_dataset(c, names: list[str]) -> None:
  """The study's data set named among the variants, read as this project reads it: the TFDS-only
  sets (``data.TFDS_ONLY``) through ``dataset.source='tfds'``; the others from their files
  (dSprites and its variants: the official file, else rendered).

  smallNORB as disentanglement_lib reads it (``data/ground_truth/norb.py``, lines 34-37 and
  89-94): the training and the testing chunks concatenated (48,600 images, 10 instances per
  category; the instance a nuisance factor, lines 58-60), trained and scored on that same set:
  ``dataset.train_split = dataset.eval_split = 'all'`` (TFDS ``train+test``). The split of
  ``smallnorb_betavae`` (train on TFDS ``train``, 24,300 images, score on ``test``, the other
  five instances) stays an option: ``dataset.train_split=train,dataset.eval_split=test``.

  The colour, noisy and scream dSprites as disentanglement_lib draws them
  (``data/ground_truth/dsprites.py``: ``ColorDSprites`` / ``NoisyDSprites`` / ``ScreamDSprites``
  ``sample_observations_from_factors``, lines 120-131, 153-158 and 185-198): a new colour /
  noise / patch every time an image is sampled, in training (from the stream of run seed, step
  and row of the batch) and in evaluation (from the evaluation's own stream):
  ``dataset.variant_draw = 'per_sample'`` (``disentangle/data/datasets/dsprites_variants.py``).
  ``dataset.variant_draw=per_image`` (one draw per row, fixed) stays an option.
  """
  chosen = [n for n in names if n in STUDY_DATASETS]
  if len(chosen) > 1:
    raise config_lib.ConfigError(f"choose one data set of the study, got {chosen}")
  if not chosen:
    return
  c.dataset.name = chosen[0]
  if chosen[0] in ("smallnorb", "shapes3d"):
    c.dataset.source = "tfds"
    c.dataset.train_split = "train"
    if chosen[0] == "smallnorb":
      c.dataset.train_split = c.dataset.eval_split = "all"
  if chosen[0] in dsprites_draws.NAMES:
    c.dataset.variant_draw = "per_sample"


def study_networks(c) -> None:
  """disentanglement_lib's networks and initialisers, as its study trained them: its
  ``conv_encoder`` / ``deconv_decoder`` (``model.architecture='dlib'``: 2x2 kernels in the third
  and fourth convolutions, separate mean and log-variance heads), TensorFlow's default
  initialisers for every layer (``model.init='tensorflow'``: Glorot-uniform kernels, zero biases;
  ``methods/shared/architectures.py`` passes none) and, for FactorVAE, the same for its
  ``fc_discriminator`` (``factorvae.disc_init='tensorflow'``). ``model.architecture=cascade``,
  ``model.init=reference``, ``factorvae.disc_init=flax`` give the shared networks of the
  CascadeVAE tables instead (``disentangle/nn/networks.py``)."""
  c.model.architecture = "dlib"
  c.model.init = "tensorflow"
  if c.method == "factorvae":
    c.factorvae.disc_init = "tensorflow"


def study_variant(names: list[str], rows: dict) -> bool:
  """Whether the variants ask for the study's settings: ``study``, one of its grid ``rows`` or
  one of its data sets other than dSprites (each implies ``study``)."""
  return any(n == "study" or n in rows or (n in STUDY_DATASETS and n != "dsprites")
             for n in names)


def grid_sweep(c, module_name: str, names: list[str], rows: dict, field: str) -> None:
  """With the ``grid`` variant, every row's value of ``field`` as one program (``c.sweep``);
  ConfigError when a single row is named beside it."""
  if "grid" not in names:
    return
  chosen = [n for n in names if n in rows]
  if chosen:
    raise config_lib.ConfigError(f"{module_name}: 'grid' runs every "
                                 f"{field.rpartition('.')[2]}; drop {chosen}")
  c.sweep = f"{field}=" + "|".join(str(v) for v in rows.values())


def study_config(module_name: str, method: str, names: list[str], rows: dict, field: str,
                 default_row: str):
  """The study's settings for ``method`` (disentanglement_lib ``unsupervised_study_v1``: 3e5
  steps at batch 64, Adam 1e-4, 10 latents, MIG evaluated) with ``<method>.<field>`` from the
  row named among the variants (default ``default_row``), the study's data set
  (:func:`study_dataset`) and its networks (:func:`study_networks`)."""
  c = long_run_config(method, "dsprites", latent_dim=10, learning_rate=1e-4)
  c.eval.mig = True
  c[method][field] = select_row(module_name, names, rows, default_row)
  study_dataset(c, names)
  study_networks(c)
  return c


# Variants that keep a published row's setting (the paper's 50,000 training images, a checkpoint
# kept on held-out data): combined with a row, `aggregate` prints that row's published numbers.
PROTOCOL_VARIANTS = ("best_validation",)


def best_validation(c, metric: str = "accuracy") -> None:
  """The comparable protocol for MNIST / Fashion-MNIST: train on the first 50,000 training
  images, keep the checkpoint with the best ``metric`` on the last 10,000 (``valid10k``), and
  report the test figure at it beside the final one (``train/selection.py``)."""
  c.eval.select = "best_validation"
  c.eval.select_metric = metric
  c.dataset.train_split = "train50k"


def finish(c, names: list[str], overrides: dict, *, cpu_fraction=CPU_FRACTION, **smoke_kwargs):
  """The end of every ``get_config``: ``cpu``, then ``smoke``, then the ``field=value`` overrides.

  ``cpu``: the whole schedule shortened to ``cpu_fraction`` (default :data:`CPU_FRACTION`; a
  config whose step is slow passes its own) by :func:`scale_schedule`.
  ``smoke``: minutes on a CPU (:func:`smoke`), on rendered dSprites or, for the data sets that
  must be downloaded, generated stand-ins in the canonical format when the files are missing.
  The config is validated once, by ``trainer.train``, after any command-line overrides.
  """
  if "cpu" in names:
    scale_schedule(c, cpu_fraction)
  if "smoke" in names:
    if c.dataset.name == "dsprites":
      c.dataset.source = "render"
    else:
      c.dataset.synthetic_if_missing = True
    smoke(c, **smoke_kwargs)
  config_lib.apply_overrides(c, overrides)
  return c


def schedule_fields(c) -> tuple[str, ...]:
  """The dotted fields of ``c`` that count iterations: ``num_steps`` and the method's own."""
  return ("num_steps",) + tuple(methods.step_fields(c.method))


def scale_schedule(c, fraction, *, round_steps: bool = False) -> dict:
  """Shorten ``c`` to ``fraction`` of its run with every schedule scaled alike.

  ``num_steps`` and every iteration-counting field of the method (``methods.step_fields``:
  CascadeVAE's r and t_d, JointVAE's capacity steps, ...) are multiplied by ``fraction``, so that
  each event (a dimension relieved, the discrete step starting, a capacity reaching its maximum)
  falls at the same fraction of the run as in the full config. Those products must be whole
  numbers (a :class:`ConfigError` names the field otherwise: choose a fraction that divides it),
  unless ``round_steps``: then each is rounded to the nearest whole step, at least 1 (0 stays 0),
  and the events fall within half a step of their place. :data:`NEVER` stays never. The
  :data:`PERIODS` (evaluation, checkpoints, PartedVAE's plateau epoch) are scaled too, rounded to
  whole steps.

  Returns:
    ``{field: [before, after]}`` of every field that changed.
  """
  f = fractions.Fraction(fraction).limit_denominator(1_000_000)
  if not 0 < f <= 1:
    raise config_lib.ConfigError(f"scale_schedule: fraction must be in (0, 1], got {fraction}")
  changed = {}
  with c.unlocked():
    for path in schedule_fields(c):
      parent, leaf = config_lib.field_parent(c, path)
      before = parent[leaf]
      if before == NEVER:
        continue
      scaled = before * f
      if scaled.denominator != 1 and not round_steps:
        raise config_lib.ConfigError(
            f"config field {path!r} ({before}) times {f} is not a whole number of steps: "
            f"choose a fraction that divides it")
      parent[leaf] = int(scaled) if scaled.denominator == 1 else max(1, round(scaled))
      if parent[leaf] != before:
        changed[path] = [before, parent[leaf]]
    for path in PERIODS:
      if not config_lib.has_field(c, path):
        continue
      parent, leaf = config_lib.field_parent(c, path)
      before = parent[leaf]
      parent[leaf] = max(1, round(before * f))
      if parent[leaf] != before:
        changed[path] = [before, parent[leaf]]
  return changed


def cascade_config(dataset: str, *, num_discrete: int, penalty: float, relieve_every: int,
                   discrete_start: int, num_steps: int, learning_rate: float, latent_dim: int,
                   beta_low: float):
  """CascadeVAE with supplement B's settings: batch 64, beta_h = 10, Adam."""
  c = method_config("cascadevae", dataset, num_steps=num_steps, learning_rate=learning_rate,
                    latent_dim=latent_dim)
  c.model.posterior_head = "softplus_sigma"  # the authors' code
  c.cascade.num_discrete = num_discrete
  c.cascade.penalty = penalty
  c.cascade.beta_high = 10.0
  c.cascade.beta_low = beta_low
  c.cascade.relieve_every = relieve_every
  c.cascade.discrete_start = discrete_start
  c.checkpoint_every = 10_000
  c.eval_every = 10_000
  c.log_every = 200
  return c


# ``eval.max_points`` of the smoke variants: `experiments.evaluate` encodes a thinned grid of at
# most this many images (dSprites: 720 of 737,280) and gives each metric at most this many points.
SMOKE_MAX_POINTS = 1000


def smoke(c, *, steps: int = 300, synthetic: bool = False, **method_kwargs) -> None:
  """Shrink a config to minutes on a CPU: same code path, tiny schedule (not comparable).

  The method's own part (e.g. CascadeVAE's r and t_d: ``relieve_every=``, ``discrete_start=``)
  is ``methods.smoke``, which dispatches to the method module's ``smoke``.
  """
  c.num_steps = steps
  c.log_every = 25
  c.eval_every = steps
  c.checkpoint_every = 100
  c.eval.num_points = 2000
  c.eval.factor_score_votes = 100
  c.eval.max_points = SMOKE_MAX_POINTS  # experiments.evaluate in about a minute on a 2-core CPU
  methods.smoke(c, **method_kwargs)
  if synthetic:
    c.dataset.synthetic_if_missing = True
