"""DIP-VAE-I and DIP-VAE-II on dSprites as in disentanglement_lib's study (Locatello et al. 2019).

The study's settings (`config/unsupervised_study_v1/sweep.py`, `model_configs/shared.gin`):
lambda_od in {1, 2, 5, 10, 20, 50} for each type, lambda_d = 10 lambda_od for DIP-VAE-I and
lambda_d = lambda_od for DIP-VAE-II (``dipvae.lambda_d_factor``); batch 64, Adam 1e-4 (0.9, 0.999,
1e-8), 300,000 iterations, 10 latents, Bernoulli decoder. The study reports its scores as
distributions over 50 seeds per setting (figures), no table cell, so ``PUBLISHED`` is empty;
evaluation computes the factor score and MIG, and ``experiments.evaluate`` the whole
disentanglement_lib suite. The networks and initialisers are disentanglement_lib's
(``common.study_networks``: ``model.architecture='dlib'``, ``model.init='tensorflow'``);
``model.architecture=cascade,model.init=reference`` gives the shared ones of CascadeVAE supplement
Table 5.

Variants: ``i`` (default) or ``ii``: the DIP type; ``lod1``, ``lod2``, ``lod5``, ``lod10``
(default), ``lod20``, ``lod50``: one value of lambda_od; ``grid``: the six values as one program
(``config.sweep``, a run directory each); ``cpu``: the schedule at 1/5; ``smoke`` (300 steps,
rendered dSprites; not comparable); a data set of the study by name (``common.STUDY_DATASETS``,
default dSprites; ``locatello2019_<data set>`` in ``experiments/tables.py``). Combine:
``:ii,lod5,seed=3``, ``:ii,grid,num_seeds=2``.

Run: python -m experiments.dsprites_dipvae --config=experiments/configs/dsprites_dipvae.py:i,lod10
"""
from experiments.configs import common

PUBLISHED = {}
LAMBDA_OD_GRID = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0)  # dip_vae.lambda_od of the study, both types
LAMBDA_D_FACTOR = {"i": 10.0, "ii": 1.0}            # dip_vae.lambda_d_factor of the study
ROWS = {f"lod{int(v)}": v for v in LAMBDA_OD_GRID}
TYPES = {t: t for t in LAMBDA_D_FACTOR}
VARIANTS = (*common.STUDY_DATASETS, *TYPES, *ROWS, "grid", "cpu", "smoke")


def get_config(arg=None):
  names, overrides = common.select_variants(__name__, arg, VARIANTS)
  c = common.long_run_config("dipvae", "dsprites", latent_dim=10, learning_rate=1e-4)
  c.eval.mig = True
  c.dipvae.dip_type = common.select_row(__name__, names, TYPES, "i")
  c.dipvae.lambda_d_factor = LAMBDA_D_FACTOR[c.dipvae.dip_type]
  c.dipvae.lambda_od = common.select_row(__name__, names, ROWS, "lod10")
  common.grid_sweep(c, __name__, names, ROWS, "dipvae.lambda_od")
  common.study_dataset(c, names)
  common.study_networks(c)
  return common.finish(c, names, overrides)
