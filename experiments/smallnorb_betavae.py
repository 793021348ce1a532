"""beta-VAE on smallnorb through TFDS. Configs: experiments/configs/smallnorb_betavae.py.

python -m experiments.smallnorb_betavae --config.dataset.tfds_data_dir=<prepared TFDS folder>
"""
from disentangle import launch

if __name__ == "__main__":
  launch.main("experiments/configs/smallnorb_betavae.py")
