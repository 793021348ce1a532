"""CascadeVAE entry point; configs and published numbers: experiments/configs/dsprites_cascade.py.

python -m experiments.dsprites_cascade --config=experiments/configs/dsprites_cascade.py:smoke
"""
from disentangle import launch

if __name__ == "__main__":
  launch.main("experiments/configs/dsprites_cascade.py")
