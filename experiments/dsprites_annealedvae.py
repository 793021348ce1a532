"""AnnealedVAE entry point (Burgess et al. 2018; disentanglement_lib's study).

Configs: experiments/configs/dsprites_annealedvae.py, e.g.
python -m experiments.dsprites_annealedvae \
  --config=experiments/configs/dsprites_annealedvae.py:smoke
"""
from disentangle import launch

if __name__ == "__main__":
  launch.main("experiments/configs/dsprites_annealedvae.py")
