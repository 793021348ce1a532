"""disentangle: disentangled representations with discrete and continuous factors in JAX/Flax.

CascadeVAE (Jeong & Song 2019) and its baselines on one mesh-ready trainer; see README.md.
Subpackages: ``data``, ``nn``, ``methods``, ``metrics``, ``train``; modules ``assignment``,
``losses``, ``schedules``, ``config``, ``viz``.
"""

__version__ = "0.1.0"
