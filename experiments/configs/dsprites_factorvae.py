"""FactorVAE on dSprites: CascadeVAE Table 1 baseline (disentanglement score, 10 seeds).

Variants: ``m5`` (default): 81.09 (2.63), best 85.12; ``m10``: 82.15 (0.88), best 88.25;
``smoke``. Kim & Mnih's dSprites settings: gamma = 35, Adam 1e-4, discriminator Adam 1e-4
(0.5, 0.9), batch 64; 3e5 iterations as the other dSprites runs.

``study``: Locatello et al. 2019's study (disentanglement_lib ``unsupervised_study_v1``): 10
latents, batch 64, Adam 1e-4 (0.9, 0.999, 1e-8), discriminator Adam 1e-4 (0.5, 0.9), 6 x 1000
units, 3e5 iterations, gamma in {10, 20, 30, 40, 50, 100} (``gamma10`` ... ``gamma100``, default
``gamma10``); a data set of the study by name (``common.STUDY_DATASETS``, default dSprites). No
table value: the study plots its scores (``locatello2019_<data set>`` in ``experiments/tables.py``).
A grid row, or a data set of the study other than dSprites, implies ``study``. Its networks and
initialisers are disentanglement_lib's (``common.study_networks``, the discriminator's too).

The study's FactorVAE makes 150,000 updates, not 300,000 (``STUDY_STEPS``): disentanglement_lib's
``FactorVAE.model_fn`` (``methods/unsupervised/vae.py``, lines 255-263) passes
``global_step=tf.train.get_global_step()`` to both ``minimize`` calls, the VAE's and the
discriminator's, grouped in one ``train_op``, so the global step grows by 2 per iteration, and
``train.py`` (``tpu_estimator.train(..., steps=training_steps)``) stops on the global step.
Measured with disentanglement_lib's own code (commit 86a644d, ``FactorVAE().model_fn`` with
``conv_encoder`` / ``deconv_decoder`` / ``fc_discriminator``, the study's Adam settings, batch 8 of
random binary 64x64 images) under TensorFlow 1.15.5 (CPU, Python 3.7): ``train_op`` run 10, 20
and 51 times in a session: global step 20, 40, 102; ``TPUEstimator(use_tpu=False)`` as
``train.py`` builds it (``iterations_per_loop`` 500 or 1), ``train(steps=N)`` for N = 10, 20, 51:
6, 11, 26 iterations (global step 12, 22, 52), i.e. N // 2 + 1 (TensorFlow's ``StopAtStepHook``
checks the step read before each run). ``model.training_steps = 300000`` thus made 150,001 VAE
and 150,001 discriminator updates; here 150,000 of each (one step fewer keeps every schedule
fraction whole). ``num_steps=300000`` gives the 300,000 updates the study's text states.

Run: python -m experiments.dsprites_factorvae --config=experiments/configs/dsprites_factorvae.py:m5
"""
from experiments.configs import common

PUBLISHED = {
    "m5": {"factor_score": {"mean": 81.09, "std": 2.63, "best": 85.12}},
    "m10": {"factor_score": {"mean": 82.15, "std": 0.88, "best": 88.25}},
}
STUDY_GAMMAS = (10.0, 20.0, 30.0, 40.0, 50.0, 100.0)  # factor_vae.gamma of the study
STUDY_ROWS = {f"gamma{int(v)}": v for v in STUDY_GAMMAS}
# model.training_steps = 300000 (shared.gin) counts two global steps per FactorVAE iteration.
STUDY_STEPS = 150_000
VARIANTS = ("m5", "m10", "smoke", "study", *STUDY_ROWS, *common.STUDY_DATASETS)


def get_config(arg=None):
  names, overrides = common.select_variants(__name__, arg, VARIANTS)
  if common.study_variant(names, STUDY_ROWS):
    c = common.study_config(__name__, "factorvae", names, STUDY_ROWS, "gamma", "gamma10")
    c.num_steps = STUDY_STEPS
    return common.finish(c, names, overrides)
  c = common.dsprites_config("factorvae", latent_dim=10 if "m10" in names else 5,
                             learning_rate=1e-4)
  return common.finish(c, names, overrides)
