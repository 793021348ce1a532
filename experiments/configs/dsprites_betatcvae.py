"""beta-TCVAE on dSprites (Chen et al. 2018; named by CascadeVAE, no table row).

The authors' dSprites command ``vae_quant.py --dataset shapes --beta 6 --tcvae``: alpha = gamma
= 1, beta = 6, minibatch-weighted sampling, 10 latents, batch 2048, Adam 1e-3, 50 epochs of the
737,280 images (18,000 iterations). The estimator needs the data set size N
(``betatcvae.dataset_size``). CascadeVAE publishes no beta-TCVAE number, so ``PUBLISHED`` is
empty; the factor score and the information estimates are computed as for the other methods.

Variants: ``m10`` (default), ``mss`` (minibatch-stratified sampling instead of MWS), ``batch64``
(the CascadeVAE dSprites protocol: batch 64, Adam 1e-4, 3e5 iterations), ``smoke`` (300 steps,
batch 64, rendered dSprites; not comparable). Combine: ``:mss,batch64,seed=3``.

``study``: Locatello et al. 2019's study (disentanglement_lib ``unsupervised_study_v1``): the
``batch64`` settings (10 latents, batch 64, Adam 1e-4 (0.9, 0.999, 1e-8), 3e5 iterations), beta in
{1, 2, 4, 6, 8, 10} (``beta1`` ... ``beta10``, default ``beta1``), alpha = gamma = 1; a data set of
the study by name (``common.STUDY_DATASETS``, default dSprites), ``dataset_size`` its number of
images. disentanglement_lib's ``beta_tc_vae`` adds (beta - 1) TC to the analytic KL, with the
minibatch-weighted TC estimate without its log(N M) constants (the same gradient as ``mws``);
here the three terms are estimated at the ELBO's sample z, so the KL part is its single-sample
estimate (the same expectation). disentanglement_lib's networks and initialisers
(``common.study_networks``). No table value: the study plots its scores
(``locatello2019_<data set>`` in ``experiments/tables.py``).
A grid row, or a data set of the study other than dSprites, implies ``study``.

Run: python -m experiments.dsprites_betatcvae --config=experiments/configs/dsprites_betatcvae.py:m10
"""
from disentangle import config as config_lib
from disentangle import methods
from experiments.configs import common

PUBLISHED = {}
DSPRITES_SIZE = config_lib.DSPRITES_SIZE
STUDY_BETAS = (1.0, 2.0, 4.0, 6.0, 8.0, 10.0)  # beta_tc_vae.beta of the study
STUDY_ROWS = {f"beta{int(v)}": v for v in STUDY_BETAS}
# N of each study set's training images (the dSprites variants keep dSprites' rows; smallNORB:
# both chunks, as the study trains (``common.study_dataset``; with dataset.train_split=train,
# set betatcvae.dataset_size=24300 too); Cars3D: 183 cars x 24 azimuths x 4 elevations).
STUDY_SIZES = {"dsprites": DSPRITES_SIZE, "color_dsprites": DSPRITES_SIZE,
               "noisy_dsprites": DSPRITES_SIZE, "scream_dsprites": DSPRITES_SIZE,
               "smallnorb": 48_600, "cars3d": 17_568, "shapes3d": 480_000}
VARIANTS = ("m10", "mss", "batch64", "smoke", "study", *STUDY_ROWS, *common.STUDY_DATASETS)


def get_config(arg=None):
  names, overrides = common.select_variants(__name__, arg, VARIANTS)
  c = methods.schema("betatcvae")
  c.dataset.name = "dsprites"
  c.model.latent_dim = 10
  c.batch_size = 2048
  c.optimizer.learning_rate = 1e-3
  c.num_steps = 50 * DSPRITES_SIZE // 2048  # 18,000
  c.betatcvae.alpha = 1.0
  c.betatcvae.beta = 6.0
  c.betatcvae.gamma = 1.0
  c.betatcvae.dataset_size = DSPRITES_SIZE
  c.betatcvae.estimator = "mss" if "mss" in names else "mws"
  c.eval.factor_score = True
  c.eval_every = 2_000
  c.checkpoint_every = 1_000
  c.log_every = 50
  study = common.study_variant(names, STUDY_ROWS)
  if study:
    c.betatcvae.beta = common.select_row(__name__, names, STUDY_ROWS, "beta1")
    c.eval.mig = True
    common.study_dataset(c, names)
    common.study_networks(c)
  if "batch64" in names or study:
    c.batch_size = 64
    c.optimizer.learning_rate = 1e-4
    c.num_steps = 300_000
    c.eval_every = 50_000
    c.checkpoint_every = 10_000
    c.log_every = 200
  if "smoke" in names:
    c.batch_size = 64
  if study:
    c.betatcvae.dataset_size = STUDY_SIZES[c.dataset.name]
  return common.finish(c, names, overrides)
