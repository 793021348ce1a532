"""AnchorVAE on dSprites: CascadeVAE Table 1 (disentanglement score, 10 seeds).

"For AnchorVAE, we experimented anchoring 5 latent dimensions out of total 5 and 20 dimensions":
beta_l on the first 5 dimensions, beta_h on the rest, constant over training (see
:mod:`disentangle.methods.anchorvae` for this reading and the choice beta_h = 10).

| variant                 | m  | anchored | beta_l | beta_h | published            |
|-------------------------|----|----------|--------|--------|----------------------|
| ``anchor5_m5`` (default)| 5  | 5        | 10.0   | unused | 76.36 (4.96) / 82.75 |
| ``anchor5_m20``         | 20 | 5        | 7.0    | 10.0   | 72.44 (6.85) / 83.25 |

Settings: batch 64, Adam 3e-4, 3e5 iterations (the dSprites protocol of supplement B, as the
beta-VAE rows). ``smoke``: 300 steps on rendered dSprites (not comparable).

Run: python -m experiments.dsprites_anchorvae --config=experiments/configs/dsprites_anchorvae.py:anchor5_m20
"""
from experiments.configs import common

PUBLISHED = {
    "anchor5_m5": {"factor_score": {"mean": 76.36, "std": 4.96, "best": 82.75}},
    "anchor5_m20": {"factor_score": {"mean": 72.44, "std": 6.85, "best": 83.25}},
}
ROWS = {"anchor5_m5": (5, 10.0), "anchor5_m20": (20, 7.0)}  # variant: (m, beta_l)
VARIANTS = tuple(ROWS) + ("smoke",)


def get_config(arg=None):
  names, overrides = common.select_variants(__name__, arg, VARIANTS)
  m, beta_low = common.select_row(__name__, names, ROWS, "anchor5_m5")
  c = common.dsprites_config("anchorvae", latent_dim=m, learning_rate=3e-4)
  c.anchorvae.num_anchor = 5
  c.anchorvae.beta_low = beta_low
  c.anchorvae.beta_high = 10.0
  return common.finish(c, names, overrides)
