"""GroupVAE / ML-VAE on pairs, with labels or adaptive (Locatello et al., ICML 2020).

Configs: experiments/configs/dsprites_weak.py, e.g.
python -m experiments.dsprites_weak --config=experiments/configs/dsprites_weak.py:ada_gvae

The paper reports its scores as distributions over seeds (figures); the config's docstring says
which settings and numbers could not be checked against its text.
"""
from disentangle import launch

if __name__ == "__main__":
  launch.main("experiments/configs/dsprites_weak.py")
