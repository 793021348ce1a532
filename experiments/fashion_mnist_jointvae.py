"""JointVAE on Fashion-MNIST entry point (CascadeVAE Table 4 baseline).

Configs: experiments/configs/fashion_mnist_jointvae.py, e.g.
python -m experiments.fashion_mnist_jointvae --config=experiments/configs/fashion_mnist_jointvae.py:smoke
"""
from disentangle import launch

if __name__ == "__main__":
  launch.main("experiments/configs/fashion_mnist_jointvae.py")
