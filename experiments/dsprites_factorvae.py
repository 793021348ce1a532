"""FactorVAE entry point (CascadeVAE Table 1 baseline); configs: experiments/configs/dsprites_factorvae.py.

python -m experiments.dsprites_factorvae --config=experiments/configs/dsprites_factorvae.py:smoke
"""
from disentangle import launch

if __name__ == "__main__":
  launch.main("experiments/configs/dsprites_factorvae.py")
