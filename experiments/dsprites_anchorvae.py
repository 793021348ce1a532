"""AnchorVAE entry point (CascadeVAE Table 1 baseline).

Configs: experiments/configs/dsprites_anchorvae.py, e.g.
python -m experiments.dsprites_anchorvae --config=experiments/configs/dsprites_anchorvae.py:smoke
"""
from disentangle import launch

if __name__ == "__main__":
  launch.main("experiments/configs/dsprites_anchorvae.py")
