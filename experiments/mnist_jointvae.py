"""JointVAE on MNIST entry point (CascadeVAE Table 3 baseline).

Configs: experiments/configs/mnist_jointvae.py, e.g.
python -m experiments.mnist_jointvae --config=experiments/configs/mnist_jointvae.py:smoke
"""
from disentangle import launch

if __name__ == "__main__":
  launch.main("experiments/configs/mnist_jointvae.py")
