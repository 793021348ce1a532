"""CascadeVAE on 3D Chairs: CascadeVAE Figs. 10-11 (qualitative: traversals and I(x; z_j)).

Supplement B.4: S = 3, lambda' = 0.01, r = 2e4, t_d = 6e4, 1.5e5 iterations, Adam 1e-4, batch 64,
beta_h = 10, 64x64 images (Table 1 networks). m and beta_l are not given in the paper: we use
m = 10 and beta_l = 1.0. Chairs is unlabelled: there is no number to compare with.
The data is not available offline: put the 64x64 images (86,366 in the paper) under
``<data_dir>/chairs``; ``smoke`` uses generated stand-ins.

Run: python -m experiments.chairs_cascade --config=experiments/configs/chairs_cascade.py
"""
from experiments.configs import common

PUBLISHED = {}
VARIANTS = ("smoke",)


def get_config(arg=None):
  names, overrides = common.select_variants(__name__, arg, VARIANTS)
  c = common.cascade_config("chairs", num_discrete=3, penalty=0.01, relieve_every=20_000,
                            discrete_start=60_000, num_steps=150_000, learning_rate=1e-4,
                            latent_dim=10, beta_low=1.0)
  return common.finish(c, names, overrides, discrete_start=100)
