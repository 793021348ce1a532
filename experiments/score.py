"""Scores a representation of your own with the registered metrics (`disentangle.score`).

python -m experiments.score --representation=my_encoders:encode --dataset=dsprites
    [--source=render] [--metrics=mig,dci,factor_score_dlib] [--max_points=1000] [--seed=0]
    [--output=scores.json]

``--representation`` is a function of numpy images [n, H, W, C] (float32 in [0, 1]) returning
the means [n, m], named ``module:function`` (``python -m`` puts the current folder on the import
path). It prints its estimate first, then what each metric will read and a line as each ends,
then one line with every value; ``--output`` writes what ``results.json`` holds for them.
``--max_points=N`` scores on at most N images and N points per metric (0: the protocols' sizes).
Bad input (a function that is not there, returns the wrong shape or NaN, a data set without
factors) is one line and exit status 2. Guide: docs/scoring_a_model.md.
"""
import importlib
import shlex
import sys

from absl import flags

from disentangle import command_line
from disentangle import config as config_lib

_REPRESENTATION = flags.DEFINE_string("representation", None, "module:function of numpy images "
                                      "returning the means [n, m].", required=True)
_DATASET = flags.DEFINE_string("dataset", None, "A ground-truth data set's name (dsprites, "
                               "cars3d, mpi3d_toy, ...).", required=True)
_SOURCE = flags.DEFINE_enum("source", "auto", list(config_lib.SOURCES),
                            "dSprites: the official file, the renderer, or 'auto'.")
_METRICS = flags.DEFINE_list("metrics", None, "Registered metrics to compute (default: every "
                             "one that applies).")
_MAX_POINTS = flags.DEFINE_integer("max_points", 0, "At most N images encoded and N points per "
                                   "metric (0: the protocols' sizes).")
_SEED = flags.DEFINE_integer("seed", 0, "The evaluation's seed.")
_BATCH = flags.DEFINE_integer("encode_batch_size", None, "Images per call of the function.")
_OUTPUT = flags.DEFINE_string("output", None, "Write the results (JSON) here.")


def load_function(path: str):
  """The function named ``module:function``; `ScoreError` in one line when it is not there."""
  from disentangle.evaluation import score  # pylint: disable=g-import-not-at-top
  module, _, name = path.partition(":")
  try:
    fn = getattr(importlib.import_module(module), name or "<missing>", None)
  except ImportError as e:
    raise score.ScoreError(f"--representation: {e}") from None
  if not callable(fn):
    raise score.ScoreError(f"--representation: expected module:function, {path!r} names no "
                           f"function")
  return fn


def main(_):
  from disentangle.evaluation import report  # pylint: disable=g-import-not-at-top
  from disentangle.evaluation import score  # pylint: disable=g-import-not-at-top
  with command_line.exits(shlex.join(getattr(sys, "orig_argv", sys.argv))):
    results = score.score(load_function(_REPRESENTATION.value), _DATASET.value,
                          metrics=_METRICS.value, max_points=_MAX_POINTS.value,
                          seed=_SEED.value, source=_SOURCE.value,
                          encode_batch_size=_BATCH.value, log=lambda l: print(l, flush=True))
    if _OUTPUT.value:
      report.write_json(_OUTPUT.value, results)
  values, _ = report.metric_values(results["metrics"])
  print(f"{_DATASET.value}: {values}")
  for line in results["metrics"].get("not_computed", {}).values():
    print(f"  not computed: {line}")


if __name__ == "__main__":
  command_line.run(main)
