"""disentangle-jax: JAX/Flax disentangled representations with discrete and continuous factors.

The distribution is ``disentangle-jax`` (``disentangle`` on the package index is another project);
the import name is ``disentangle``.

``install_requires`` are ranges, so that ``pip install -e .`` keeps an accelerator's JAX (a GPU
image's ``jax[cuda]``, a TPU VM's ``jax[tpu]``) when its version is one we test: each lower bound
is the lock CI tests on Python 3.11 (``requirements.txt``, exact versions) and each upper bound
the newest release CI tests on Python 3.12 (``.ci/run``; ``tests/test_install_ranges.py`` checks
that the lock lies inside the ranges and that an environment holding a newer supported JAX keeps
it).
"""
import pathlib

import setuptools

HERE = pathlib.Path(__file__).parent

# name: (lowest tested = the lock, newest tested)
TESTED = {
    "jax": ("0.10.2", "0.12.0.1"),
    "jaxlib": ("0.10.2", "0.12.0.1"),
    "flax": ("0.12.8", "0.12.12"),
    "optax": ("0.2.8", "0.2.8"),
    "chex": ("0.1.92", "0.1.92"),
    "orbax-checkpoint": ("0.12.8", "0.12.8"),
    "tensorflow-datasets": ("4.9.10", "4.9.10"),
    "ml-collections": ("1.1.0", "1.1.0"),
    "numpy": ("2.4.6", "2.5.5"),
    "scipy": ("1.17.1", "1.18.1"),
    "scikit-learn": ("1.7.2", "1.9.1"),
    "absl-py": ("2.5.1", "2.5.1"),
    "tqdm": ("4.70.1", "4.70.1"),
    "tensorboardX": ("2.6.5", "2.6.5"),
    "matplotlib": ("3.11.2", "3.11.2"),
    "pillow": ("13.0.0", "13.0.0"),
}

setuptools.setup(
    name="disentangle-jax",
    version="0.1.0",
    description="CascadeVAE, PartedVAE, FFVAE and baselines in JAX/Flax, exact to the papers.",
    long_description=(HERE / "README.md").read_text(),
    long_description_content_type="text/markdown",
    packages=setuptools.find_packages(include=["disentangle", "disentangle.*", "experiments",
                                               "experiments.*", "benchmarks"]),
    python_requires=">=3.11",
    install_requires=[f"{name}>={low},<={high}" for name, (low, high) in TESTED.items()],
    extras_require={
        # setuptools, packaging: the install-ranges test resolves this project without build
        # isolation (setuptools builds wheels itself from 70.1) and reads version specifiers.
        # The Cloud Storage emulator and client: the bucket tests (tests/test_bucket.py).
        "test": ["pytest>=8", "pytest-xdist==3.8.0", "ruff==0.17.6",
                 "setuptools>=70.1", "packaging", "gcp-storage-emulator==2026.7.19",
                 "gcsfs==2026.10.1"],
        # Runs and data on a bucket (gs://) without TensorFlow: fsspec's Cloud Storage client.
        "gcs": ["gcsfs>=2026.10.1,<=2026.10.1"],
        # Benchmark-only: the PyTorch reference step (never imported by the library).
        "torch": ["torch==2.13.0"],
    },
)
