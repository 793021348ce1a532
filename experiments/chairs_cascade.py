"""CascadeVAE entry point; configs and published numbers: experiments/configs/chairs_cascade.py.

python -m experiments.chairs_cascade --config=experiments/configs/chairs_cascade.py:smoke
"""
from disentangle import launch

if __name__ == "__main__":
  launch.main("experiments/configs/chairs_cascade.py")
