"""AnnealedVAE on dSprites as in disentanglement_lib's study (Locatello et al. 2019).

The study's settings (`config/unsupervised_study_v1/sweep.py`, `model_configs/shared.gin`):
gamma = 1000, the capacity C rising from 0 to c_max over 100,000 of the 300,000 iterations,
c_max in {5, 10, 25, 50, 75, 100}; batch 64, Adam 1e-4 (0.9, 0.999, 1e-8), 10 latents, Bernoulli
decoder. The study reports its scores as distributions over 50 seeds per setting (figures), no
table cell, so ``PUBLISHED`` is empty; evaluation computes the factor score and MIG, and
``experiments.evaluate`` the whole disentanglement_lib suite. The networks and initialisers are
disentanglement_lib's (``common.study_networks``: ``model.architecture='dlib'``,
``model.init='tensorflow'``); ``model.architecture=cascade,model.init=reference`` gives the shared
ones of CascadeVAE supplement Table 5.

Variants: ``c5``, ``c10``, ``c25`` (default), ``c50``, ``c75``, ``c100``: one value of c_max;
``grid``: the six values as one program (``config.sweep``, a run directory each); ``cpu``: the
schedule at 1/5 (C reaches c_max at the same third of the run); ``smoke`` (300 steps, rendered
dSprites; not comparable); a data set of the study by name (``common.STUDY_DATASETS``,
default dSprites; ``locatello2019_<data set>`` in ``experiments/tables.py``). Combine:
``:c50,seed=3``, ``:grid,num_seeds=2``.

Run: python -m experiments.dsprites_annealedvae \\
  --config=experiments/configs/dsprites_annealedvae.py:c25
"""
from experiments.configs import common

PUBLISHED = {}
C_MAX_GRID = (5.0, 10.0, 25.0, 50.0, 75.0, 100.0)  # annealed_vae.c_max of the study
ROWS = {f"c{int(v)}": v for v in C_MAX_GRID}
VARIANTS = (*common.STUDY_DATASETS, *ROWS, "grid", "cpu", "smoke")


def get_config(arg=None):
  names, overrides = common.select_variants(__name__, arg, VARIANTS)
  c = common.long_run_config("annealedvae", "dsprites", latent_dim=10, learning_rate=1e-4)
  c.eval.mig = True
  c.annealedvae.gamma = 1000.0
  c.annealedvae.iteration_threshold = 100_000
  c.annealedvae.c_max = common.select_row(__name__, names, ROWS, "c25")
  common.grid_sweep(c, __name__, names, ROWS, "annealedvae.c_max")
  common.study_dataset(c, names)
  common.study_networks(c)
  return common.finish(c, names, overrides)
