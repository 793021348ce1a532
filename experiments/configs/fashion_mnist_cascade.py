"""CascadeVAE on Fashion-MNIST: CascadeVAE Table 4 (unsupervised classification accuracy, S = 10).

Supplement B.3: as MNIST (S = 10, lambda' = 0.1, r = 1e4, t_d = 0, 1.2e5 iterations) with Adam
1e-4. Published (10 seeds): ``m10`` (default) 56.01 (3.33), best 63.01; ``m4`` 57.72 (3.29),
best 63.55. The image files are not available offline: put the canonical
``train-images-idx3-ubyte.gz`` / ``t10k-images-idx3-ubyte.gz`` in ``<data_dir>/fashion_mnist``
(or allow the download); ``smoke`` uses generated stand-ins in the canonical format; ``cpu``
is a fifth of the schedule, as ``mnist_cascade:cpu``.

Run: python -m experiments.fashion_mnist_cascade --config=experiments/configs/fashion_mnist_cascade.py:m10
"""
from experiments.configs import mnist_cascade

PUBLISHED = {
    "m10": {"accuracy": {"mean": 56.01, "std": 3.33, "best": 63.01}},
    "m4": {"accuracy": {"mean": 57.72, "std": 3.29, "best": 63.55}},
}
VARIANTS = mnist_cascade.VARIANTS
PROTOCOL_VARIANTS = mnist_cascade.PROTOCOL_VARIANTS


def get_config(arg=None):
  return mnist_cascade.build(__name__, arg, dataset="fashion_mnist", learning_rate=1e-4)
