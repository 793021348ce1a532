"""CascadeVAE entry point; configs and published numbers: experiments/configs/fashion_mnist_cascade.py.

python -m experiments.fashion_mnist_cascade --config=experiments/configs/fashion_mnist_cascade.py:smoke
"""
from disentangle import launch

if __name__ == "__main__":
  launch.main("experiments/configs/fashion_mnist_cascade.py")
