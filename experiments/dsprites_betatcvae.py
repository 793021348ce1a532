"""beta-TCVAE entry point (Chen et al. 2018).

Configs: experiments/configs/dsprites_betatcvae.py, e.g.
python -m experiments.dsprites_betatcvae --config=experiments/configs/dsprites_betatcvae.py:smoke
"""
from disentangle import launch

if __name__ == "__main__":
  launch.main("experiments/configs/dsprites_betatcvae.py")
