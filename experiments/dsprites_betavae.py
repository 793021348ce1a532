"""beta-VAE on dSprites (CascadeVAE Table 1 baseline). Configs: experiments/configs/dsprites_betavae.py.

python -m experiments.dsprites_betavae --config=experiments/configs/dsprites_betavae.py:smoke
"""
from disentangle import launch

if __name__ == "__main__":
  launch.main("experiments/configs/dsprites_betavae.py")
