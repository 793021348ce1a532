"""Full evaluation of a finished or running run: ``results.json``, ``report.md``, pictures.

python -m experiments.evaluate --workdir=runs/dsprites_cascade_m6 [--step=N] [--max_points=N]
    [--factor_score_votes=800] [--mig_points=10000] [--encode_batch_size=100] [--conv_impl=fast]

It prints first its estimate (the images it encodes at the time of one batch timed here, plus the
metrics' time of the run's last evaluation with the same settings, when there is one), then what
each metric will read, then a line as the encoding and each metric end. ``--max_points=N``
overrides the run's ``eval.max_points`` (the smoke variants: 1,000; the paper variants: 0, the
papers' protocols): at most N images encoded (dSprites: a thinned factor grid, not the 737,280
images) and at most N points per metric; recorded in results.json, numbers not comparable with
published ones.

Restores the latest checkpoint (or ``--step``; every seed of a multi-seed workdir) read-only and
writes ``RUN/results.json``, ``RUN/report.md`` and ``RUN/images/evaluate_step_<n>_*.png``; see
`disentangle.evaluation.evaluate_run`. ``--mig_estimator`` / ``--mig_factors`` /
``--use_discrete`` / ``--estimators`` / ``--suite_points`` override the run's
``eval.mig_estimator`` / ``eval.mig_factors`` / ``eval.use_discrete`` / ``eval.estimators`` /
``eval.suite_points``; ``--downstream`` / ``--fairness_dlib`` / ``--unified_scores`` switch on
disentanglement_lib's later scores (off by default: each costs more than the rest of the suite); ``--eval_name`` / ``--eval_split`` its ``dataset.eval_name`` /
``dataset.eval_split`` (all recorded in results.json). It prints a line per run with every
metric that has a per-run value, and names the metrics without one (UDR's sample, scored
across seeds by ``experiments.aggregate``), those not computed and classifier fits that did not
converge.

A run trained with ``eval.select`` ('best_validation' / 'best_metric') kept a second checkpoint
(``checkpoints_best``): it is evaluated too, on the same data, and results.json holds both,
labelled (``"final"`` and ``"selected"``: rule, step, validation value); ``--noselected`` skips it.
"""
import shlex
import sys

from absl import flags

from disentangle import command_line
from disentangle import config as config_lib
from disentangle import storage

_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory (or multi-seed workdir).",
                               required=True)
_STEP = flags.DEFINE_integer("step", None, "Checkpoint step (default: the latest).")
_VOTES = flags.DEFINE_integer("factor_score_votes", 800, "Votes M of the score (paper: 800).")
_VOTE_BATCH = flags.DEFINE_integer("vote_batch", 100, "Examples L per vote (paper: 100).")
_MIG_POINTS = flags.DEFINE_integer("mig_points", 10_000, "Points of the MIG estimate.")
_BATCH = flags.DEFINE_integer("encode_batch_size", None,
                              "Images per encoder call (default: 100 on CPU, 1000 otherwise).")
_MIG_ESTIMATOR = flags.DEFINE_enum("mig_estimator", None, list(config_lib.MIG_ESTIMATORS),
                                   "Override eval.mig_estimator (default: the run's).")
_MIG_FACTORS = flags.DEFINE_enum("mig_factors", None, list(config_lib.MIG_FACTOR_SETS),
                                 "Override eval.mig_factors (default: the run's).")
_USE_DISCRETE = flags.DEFINE_enum("use_discrete", None, list(config_lib.USE_DISCRETE),
                                  "Override eval.use_discrete (default: the run's).")
_EVAL_NAME = flags.DEFINE_string("eval_name", None, "Override dataset.eval_name.")
_EVAL_SPLIT = flags.DEFINE_string("eval_split", None, "Override dataset.eval_split.")
_ESTIMATORS = flags.DEFINE_enum("estimators", None, list(config_lib.ESTIMATORS),
                                "Override eval.estimators: the suite's scikit-learn classifiers "
                                "with today's defaults or the 2019 study's.")
_DOWNSTREAM = flags.DEFINE_bool("downstream", None, "Override eval.downstream: also the "
                                "downstream tasks (plain, reduced, strong).")
_FAIRNESS = flags.DEFINE_bool("fairness_dlib", None, "Override eval.fairness_dlib: also the "
                              "unfairness score of Locatello et al. 2019b.")
_UNIFIED = flags.DEFINE_bool("unified_scores", None, "Override eval.unified_scores: also the "
                             "unified scores.")
_SUITE_POINTS = flags.DEFINE_integer("suite_points", None,
                                     "Override eval.suite_points (0: disentanglement_lib's own "
                                     "10,000 / 5,000 points per metric).")
_MAX_POINTS = flags.DEFINE_integer(
    "max_points", None, "Override eval.max_points: at most N images encoded and N points per "
    "metric (0: the papers' protocols; default: the run's, 1,000 for a smoke run).")
_SELECTED = flags.DEFINE_bool("selected", True,
                              "Also evaluate the checkpoint kept by eval.select (if any).")
_CONV = flags.DEFINE_enum("conv_impl", None, ["flax", "fast"],
                          "Override model.conv_impl (same parameters and outputs).")


def main(_):
  from disentangle.evaluation import evaluate_run  # pylint: disable=g-import-not-at-top
  from disentangle.evaluation import report  # pylint: disable=g-import-not-at-top
  with command_line.exits(shlex.join(getattr(sys, "orig_argv", sys.argv))):
    storage.check(_WORKDIR.value, "--workdir")
    storage.check_data_dir()
    overrides = {field: value for field, value in (
        ("eval.mig_estimator", _MIG_ESTIMATOR.value), ("eval.mig_factors", _MIG_FACTORS.value),
        ("eval.use_discrete", _USE_DISCRETE.value), ("eval.estimators", _ESTIMATORS.value),
        ("eval.suite_points", _SUITE_POINTS.value), ("eval.downstream", _DOWNSTREAM.value),
        ("eval.fairness_dlib", _FAIRNESS.value), ("eval.unified_scores", _UNIFIED.value),
        ("eval.max_points", _MAX_POINTS.value), ("dataset.eval_name", _EVAL_NAME.value),
        ("dataset.eval_split", _EVAL_SPLIT.value))
                 if value is not None}
    results = evaluate_run.evaluate_run(
        _WORKDIR.value, _STEP.value, factor_score_votes=_VOTES.value,
        vote_batch=_VOTE_BATCH.value, mig_points=_MIG_POINTS.value,
        encode_batch_size=_BATCH.value, conv_impl=_CONV.value, eval_overrides=overrides,
        selected_too=_SELECTED.value, log=lambda line: print(line, flush=True))
  for line in report.summary_lines(results):
    print(line)
  print(f"wrote {_WORKDIR.value}/results.json and report.md")


if __name__ == "__main__":
  command_line.run(main)
