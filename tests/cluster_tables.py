"""A two-program table of tiny runs on MNIST, for the command line on a cluster
(``python -m experiments.reproduce --tables=tests.cluster_tables --table=tiny2``).

Program 1 is `tests.helpers.tiny_table`'s CascadeVAE (4 steps); program 2 the same with a
latent more (a shape: its own program) and `LONG_STEPS` steps, long enough to be stopped in
training by a signal and resumed.
"""
import ml_collections

from disentangle.reproduce import plan
from tests import helpers

LONG_STEPS = 300
LONG_CHECKPOINTS = 50  # program 2's checkpoint period
LONG_LOG_EVERY = 10

_TABLE, _MODULES, _ = helpers.tiny_table()
_SHORT = _MODULES["fake"].get_config("lo")
_LONG = ml_collections.ConfigDict(_SHORT.to_dict())
_LONG.model.latent_dim, _LONG.num_steps = 4, LONG_STEPS
_LONG.checkpoint_every, _LONG.log_every = LONG_CHECKPOINTS, LONG_LOG_EVERY

CONFIGS = {"tiny_experiment": helpers.fake_experiment({"short": _SHORT, "long": _LONG})}
TABLES = {"tiny2": plan.Table(
    "tiny2", "two tiny programs", "test", ("accuracy",),
    (plan.Row("short", "3", "tiny_experiment", "short"),
     plan.Row("long", "4", "tiny_experiment", "long")), "final", seeds=1)}
