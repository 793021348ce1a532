"""FFVAE entry point (Creager et al. 2019, DSpritesUnfair); configs:
experiments/configs/dsprites_unfair_ffvae.py.

python -m experiments.dsprites_unfair_ffvae \
  --config=experiments/configs/dsprites_unfair_ffvae.py:smoke
Then: python -m experiments.evaluate --workdir=RUN (MIG on balanced dSprites, both estimators)
and python -m experiments.fair_classification --workdir=RUN (fairness.json / fairness.md).
"""
from disentangle import launch

if __name__ == "__main__":
  launch.main("experiments/configs/dsprites_unfair_ffvae.py")
