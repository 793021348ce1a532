"""beta-VAE on smallNORB (LeCun et al. 2004) read through TFDS: factor score and MIG.

smallNORB is served only by ``dataset.source='tfds'``: 24300 training images resized 96 -> 64
(Lanczos, as disentanglement_lib), factors category 5, elevation 9, azimuth 18, lighting 6. The
instance (5 per category and split) is a nuisance, so every factor row is carried by 5 images:
not a full grid; observations for given factors are drawn among those 5 (logged). Settings as
disentanglement_lib's study (Locatello et al. 2019): batch 64, Adam 1e-4, 3e5 steps, 10 latents,
beta = 4. No paper of this project reports it.

  tfds build smallnorb --data_dir=gs://bucket/tfds --file_format=array_record
  python -m experiments.smallnorb_betavae --config.dataset.tfds_data_dir=gs://bucket/tfds

Variants: ``cpu`` (the schedule at 1/5).
"""
from experiments.configs import common

VARIANTS = ("cpu",)


def get_config(arg=None):
  names, overrides = common.select_variants(__name__, arg, VARIANTS)
  c = common.tfds_betavae_config("smallnorb")
  c.dataset.eval_split = "test"
  return common.finish(c, names, overrides)
