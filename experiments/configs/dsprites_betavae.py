"""beta-VAE on dSprites: CascadeVAE Table 1 (disentanglement score, 10 seeds, mean (std) / best).

Variants (``--config=experiments/configs/dsprites_betavae.py:<variant>``):
- ``beta10_m5``: beta = 10, m = 5. Published 70.11 (7.54), best 84.62.
- ``beta4_m10`` (default): beta = 4, m = 10. Published 74.41 (7.68), best 88.38.
- ``smoke``: a few hundred steps on rendered dSprites, in minutes on a CPU (not comparable).
- ``study``: Locatello et al. 2019's study (disentanglement_lib ``unsupervised_study_v1``): 10
  latents, batch 64, Adam 1e-4 (0.9, 0.999, 1e-8), 3e5 iterations, Bernoulli decoder, beta in
  {1, 2, 4, 6, 8, 16} (``beta1`` ... ``beta16``, default ``beta1``, shared.gin's ``vae.beta``);
  a data set of the study by name (``common.STUDY_DATASETS``, default dSprites). No table value:
  the study plots its scores (``experiments/tables.py``, ``locatello2019_<data set>``).
  A grid row, or a data set of the study other than dSprites, implies ``study``.
Append ``,seed=N`` or any ``field=value`` to a variant, e.g. ``:beta10_m5,seed=3``.

Settings: batch 64, Adam 3e-4, 3e5 iterations (the dSprites protocol of supplement B).
"""
from experiments.configs import common

PUBLISHED = {
    "beta10_m5": {"factor_score": {"mean": 70.11, "std": 7.54, "best": 84.62}},
    "beta4_m10": {"factor_score": {"mean": 74.41, "std": 7.68, "best": 88.38}},
}
STUDY_BETAS = (1.0, 2.0, 4.0, 6.0, 8.0, 16.0)  # vae.beta of the study
STUDY_ROWS = {f"beta{int(v)}": v for v in STUDY_BETAS}
VARIANTS = ("beta10_m5", "beta4_m10", "smoke", "study", *STUDY_ROWS, *common.STUDY_DATASETS)


def get_config(arg=None):
  names, overrides = common.select_variants(__name__, arg, VARIANTS)
  if common.study_variant(names, STUDY_ROWS):
    c = common.study_config(__name__, "betavae", names, STUDY_ROWS, "beta", "beta1")
    return common.finish(c, names, overrides)
  m, beta = (5, 10.0) if "beta10_m5" in names else (10, 4.0)
  c = common.dsprites_config("betavae", latent_dim=m, learning_rate=3e-4)
  c.betavae.beta = beta
  return common.finish(c, names, overrides)
