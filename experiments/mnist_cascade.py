"""CascadeVAE entry point; configs and published numbers: experiments/configs/mnist_cascade.py.

python -m experiments.mnist_cascade --config=experiments/configs/mnist_cascade.py:smoke
"""
from disentangle import launch

if __name__ == "__main__":
  launch.main("experiments/configs/mnist_cascade.py")
