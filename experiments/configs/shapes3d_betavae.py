"""beta-VAE on 3D Shapes (Burgess & Kim 2018) read through TFDS: factor score and MIG.

3D Shapes is served only by ``dataset.source='tfds'``: 480000 64x64x3 images on the full grid of
6 factors (floor hue 10, wall hue 10, object hue 10, scale 8, shape 4, orientation 15). No paper
of this project reports it; the settings are disentanglement_lib's study (Locatello et al. 2019):
batch 64, Adam 1e-4, 3e5 steps, 10 latents, beta = 4 (of 1, 2, 4, 6, 8, 16).

Prepare the set once (needs TensorFlow, on one machine), then point ``tfds_data_dir`` at it:
  tfds build shapes3d --data_dir=gs://bucket/tfds --file_format=array_record
  python -m experiments.shapes3d_betavae --config.dataset.tfds_data_dir=gs://bucket/tfds

Variants (``--config=experiments/configs/shapes3d_betavae.py:<variant>``):
- default: the run above.
- ``cpu``: the schedule at 1/5.
- ``smoke``: 300 steps on the project's ``synthetic_shapes3d`` builder (4096 drawn scenes, not a
  full grid; NOT 3D Shapes), prepared without TensorFlow:
    python -m disentangle.data.build --name=synthetic_shapes3d --data_dir=/tmp/tfds
    python -m experiments.shapes3d_betavae --config=experiments/configs/shapes3d_betavae.py:smoke \\
      --config.dataset.tfds_data_dir=/tmp/tfds
"""
from experiments.configs import common

VARIANTS = ("cpu", "smoke")


def get_config(arg=None):
  names, overrides = common.select_variants(__name__, arg, VARIANTS)
  c = common.tfds_betavae_config("shapes3d")
  c.dataset.train_split = "train"
  if "smoke" in names:
    c.dataset.tfds_name = "synthetic_shapes3d"
  return common.finish(c, names, overrides)
