"""beta-TCVAE on dSprites (Chen et al. 2018; named by CascadeVAE, no table row).

The authors' dSprites command ``vae_quant.py --dataset shapes --beta 6 --tcvae``: alpha = gamma
= 1, beta = 6, minibatch-weighted sampling, 10 latents, batch 2048, Adam 1e-3, 50 epochs of the
737,280 images (18,000 iterations). The estimator needs the data set size N
(``betatcvae.dataset_size``). CascadeVAE publishes no beta-TCVAE number, so ``PUBLISHED`` is
empty; the factor score and the information estimates are computed as for the other methods.

Variants: ``m10`` (default), ``mss`` (minibatch-stratified sampling instead of MWS), ``batch64``
(the CascadeVAE dSprites protocol: batch 64, Adam 1e-4, 3e5 iterations), ``smoke`` (300 steps,
batch 64, rendered dSprites; not comparable). Combine: ``:mss,batch64,seed=3``.

Run: python -m experiments.dsprites_betatcvae --config=experiments/configs/dsprites_betatcvae.py:m10
"""
from disentangle import methods
from experiments.configs import common

PUBLISHED = {}
VARIANTS = ("m10", "mss", "batch64", "smoke")
DSPRITES_SIZE = 737_280


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
  if "batch64" in names:
    c.batch_size = 64
    c.optimizer.learning_rate = 1e-4
    c.num_steps = 300_000
    c.eval_every = 50_000
    c.checkpoint_every = 10_000
    c.log_every = 200
  if "smoke" in names:
    c.batch_size = 64
  return common.finish(c, names, overrides)
