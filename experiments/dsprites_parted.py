"""PartedVAE on dSprites entry point (Table 1-2: the authors' factor score).

Configs: experiments/configs/dsprites_parted.py, e.g.
python -m experiments.dsprites_parted --config=experiments/configs/dsprites_parted.py:smoke
"""
from disentangle import launch

if __name__ == "__main__":
  launch.main("experiments/configs/dsprites_parted.py")
