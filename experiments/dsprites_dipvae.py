"""DIP-VAE-I / DIP-VAE-II entry point (Kumar et al. 2018; disentanglement_lib's study).

Configs: experiments/configs/dsprites_dipvae.py, e.g.
python -m experiments.dsprites_dipvae --config=experiments/configs/dsprites_dipvae.py:ii,smoke
"""
from disentangle import launch

if __name__ == "__main__":
  launch.main("experiments/configs/dsprites_dipvae.py")
