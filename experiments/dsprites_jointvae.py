"""JointVAE entry point (CascadeVAE Tables 1-2 baseline).

Configs: experiments/configs/dsprites_jointvae.py, e.g.
python -m experiments.dsprites_jointvae --config=experiments/configs/dsprites_jointvae.py:smoke
"""
from disentangle import launch

if __name__ == "__main__":
  launch.main("experiments/configs/dsprites_jointvae.py")
