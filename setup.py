"""disentangle-jax: JAX/Flax disentangled representations with discrete and continuous factors.

The distribution is ``disentangle-jax`` (``disentangle`` on the package index is another project);
the import name is ``disentangle``.

The requirements are lower bounds, so that ``pip install -e .`` keeps the stack an environment
already holds, however new: an accelerator's JAX (a GPU image's ``jax[cuda]``, a TPU VM's
``jax[tpu]``) with its plugins, and every other package. Each bound is the lock CI tests on
Python 3.11 (``requirements.txt``, exact versions); CI's second stack tests the newest releases on
Python 3.12 (``.ci/run``). A release known to break the project gets an upper bound here, with the
reason beside it; JAX, jaxlib, Flax, Optax, chex and Orbax never do (an accelerator's image chose
them). ``tests/test_install_ranges.py`` checks the bounds against the lock and that an install
keeps a JAX newer than any tested.
"""
import pathlib
import re

import setuptools

HERE = pathlib.Path(__file__).parent
# The version has one home, disentangle/version.py (``disentangle.__version__``), read as text:
# the build needs none of the requirements installed.
VERSION = re.search(r'^__version__ = "([^"]+)"$', (HERE / "disentangle" / "version.py").read_text(),
                    re.MULTILINE)[1]

# The lock's versions (requirements.txt) as lower bounds; no release is known to break the
# project, so none has an upper bound.
REQUIREMENTS = [
    "jax>=0.10.2",
    "jaxlib>=0.10.2",
    "flax>=0.12.8",
    "optax>=0.2.8",
    "chex>=0.1.92",
    "orbax-checkpoint>=0.12.8",
    "tensorflow-datasets>=4.9.10",
    "ml-collections>=1.1.0",
    "numpy>=2.4.6",
    "scipy>=1.17.1",
    "scikit-learn>=1.7.2",
    "absl-py>=2.5.1",
    "tqdm>=4.70.1",
    "tensorboardX>=2.6.5",
    "matplotlib>=3.11.2",
    "pillow>=13.0.0",
]

EXTRAS = {
    # setuptools, packaging: the install-ranges test resolves this project without build
    # isolation (setuptools builds wheels itself from 70.1) and reads version specifiers.
    # The Cloud Storage emulator and client: the bucket tests (tests/test_bucket.py).
    "test": ["pytest>=8", "pytest-xdist>=3.8.0",
             "ruff==0.17.6",  # the linter pinned: a ruff release changes what `ruff check .`
                              # reports (0.16 widened its default rules from 59 to 413), and
                              # CI fails on any finding (ruff.toml)
             "setuptools>=70.1", "packaging", "gcp-storage-emulator>=2026.7.19",
             "gcsfs>=2026.10.1"],
    # Runs and data on a bucket (gs://) without TensorFlow: fsspec's Cloud Storage client.
    "gcs": ["gcsfs>=2026.10.1"],
    # The documentation site (docs/conf.py; README, Documentation): Sphinx, MyST-NB to read the
    # guides and execute the tutorials (an IPython kernel), the book theme. The lock CI builds
    # with: docs/requirements.txt.
    "docs": ["sphinx>=9.0.4", "myst-nb>=1.4.0", "myst-parser>=5.2.0",
             "sphinx-book-theme>=1.4.0", "ipykernel>=7.4.0"],
    # Benchmark-only: the PyTorch reference step (never imported by the library).
    "torch": ["torch>=2.13.0"],
}

setuptools.setup(
    name="disentangle-jax",
    version=VERSION,
    description="CascadeVAE, PartedVAE, FFVAE and baselines in JAX/Flax, exact to the papers.",
    license="Apache-2.0",
    long_description=(HERE / "README.md").read_text(),
    long_description_content_type="text/markdown",
    packages=setuptools.find_packages(include=["disentangle", "disentangle.*", "experiments",
                                               "experiments.*", "benchmarks"]),
    # The shipped models (disentangle.trained): parameters, config and model.json of each.
    package_data={"disentangle": ["pretrained/*/*.json", "pretrained/*/*.msgpack"]},
    python_requires=">=3.11",
    install_requires=REQUIREMENTS,
    extras_require=EXTRAS,
)
