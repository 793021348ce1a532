"""disentangle: disentangled representations with discrete and continuous factors in JAX/Flax.

CascadeVAE (Jeong & Song 2019) and its baselines on one mesh-ready trainer; see README.md.
Subpackages: ``data``, ``nn``, ``methods``, ``metrics``, ``train``; modules ``assignment``,
``losses``, ``schedules``, ``config``, ``viz``, ``trained``.

``disentangle.load(name_or_run)`` is `disentangle.trained.load`: a shipped model by name or a
run directory, ready to encode, decode and traverse (docs/using_a_trained_model.md);
``disentangle.score(represent, dataset)`` is `disentangle.evaluation.score.score`: any encoder's
numbers on a ground-truth set (docs/scoring_a_model.md). Both are imported on first use, so
``import disentangle`` stays light.
"""

from disentangle.version import __version__  # noqa: F401  (the one home of the version)

__all__ = ["load", "score"]


def __getattr__(name):  # PEP 562: `trained.load` and `evaluation.score.score` themselves, with
  # their signatures for help()
  if name == "score":
    from disentangle.evaluation import score as score_lib  # pylint: disable=g-import-not-at-top
    return score_lib.score
  if name != "load":
    raise AttributeError(f"module 'disentangle' has no attribute {name!r}")
  from disentangle import trained  # pylint: disable=g-import-not-at-top
  return trained.load
