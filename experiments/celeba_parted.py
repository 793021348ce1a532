"""PartedVAE on CelebA entry point (Figs. 6-8, 10: eight variables, 0.5% labels).

Configs: experiments/configs/celeba_parted.py, e.g.
python -m experiments.celeba_parted --config=experiments/configs/celeba_parted.py:smoke
"""
from disentangle import launch

if __name__ == "__main__":
  launch.main("experiments/configs/celeba_parted.py")
