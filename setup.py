"""disentangle: JAX/Flax disentangled representations with discrete and continuous factors."""
import pathlib

import setuptools

HERE = pathlib.Path(__file__).parent
REQUIREMENTS = [l.strip() for l in (HERE / "requirements.txt").read_text().splitlines()
                if l.strip() and not l.startswith("#")]

setuptools.setup(
    name="disentangle",
    version="0.1.0",
    description="CascadeVAE, PartedVAE, FFVAE and baselines in JAX/Flax, exact to the papers.",
    long_description=(HERE / "README.md").read_text(),
    long_description_content_type="text/markdown",
    packages=setuptools.find_packages(include=["disentangle", "disentangle.*", "experiments",
                                               "experiments.*", "benchmarks"]),
    python_requires=">=3.10",
    install_requires=REQUIREMENTS,
    extras_require={
        "test": ["pytest>=8", "pytest-xdist==3.8.0", "ruff==0.17.6"],
        # Benchmark-only: the PyTorch reference step (never imported by the library).
        "torch": ["torch==2.13.0"],
    },
)
