"""PartedVAE on MNIST entry point (Sec. 5.2: accuracy with 256 labels).

Configs: experiments/configs/mnist_parted.py, e.g.
python -m experiments.mnist_parted --config=experiments/configs/mnist_parted.py:smoke
"""
from disentangle import launch

if __name__ == "__main__":
  launch.main("experiments/configs/mnist_parted.py")
