"""beta-VAE on dSprites: CascadeVAE Table 1 (disentanglement score, 10 seeds, mean (std) / best).

Variants (``--config=experiments/configs/dsprites_betavae.py:<variant>``):
- ``beta10_m5``: beta = 10, m = 5. Published 70.11 (7.54), best 84.62.
- ``beta4_m10`` (default): beta = 4, m = 10. Published 74.41 (7.68), best 88.38.
- ``smoke``: a few hundred steps on rendered dSprites, in minutes on a CPU (not comparable).
Append ``,seed=N`` or any ``field=value`` to a variant, e.g. ``:beta10_m5,seed=3``.

Settings: batch 64, Adam 3e-4, 3e5 iterations (the dSprites protocol of supplement B).
"""
from experiments.configs import common

PUBLISHED = {
    "beta10_m5": {"factor_score": {"mean": 70.11, "std": 7.54, "best": 84.62}},
    "beta4_m10": {"factor_score": {"mean": 74.41, "std": 7.68, "best": 88.38}},
}
VARIANTS = ("beta10_m5", "beta4_m10", "smoke")


def get_config(arg=None):
  names, overrides = common.select_variants(__name__, arg, VARIANTS)
  m, beta = (5, 10.0) if "beta10_m5" in names else (10, 4.0)
  c = common.dsprites_config("betavae", latent_dim=m, learning_rate=3e-4)
  c.betavae.beta = beta
  return common.finish(c, names, overrides)
