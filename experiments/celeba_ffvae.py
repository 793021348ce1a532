"""FFVAE on CelebA (main paper; confirm before comparing); configs:
experiments/configs/celeba_ffvae.py.

python -m experiments.celeba_ffvae --config=experiments/configs/celeba_ffvae.py:smoke
"""
from disentangle import launch

if __name__ == "__main__":
  launch.main("experiments/configs/celeba_ffvae.py")
