"""beta-VAE on shapes3d through TFDS. Configs: experiments/configs/shapes3d_betavae.py.

python -m experiments.shapes3d_betavae --config.dataset.tfds_data_dir=<prepared TFDS folder>
"""
from disentangle import launch

if __name__ == "__main__":
  launch.main("experiments/configs/shapes3d_betavae.py")
