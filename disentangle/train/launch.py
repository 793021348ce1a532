"""The command line shared by every entry point in ``experiments/``.

``python -m experiments.<name> --config=experiments/configs/<name>.py[:variant[,field=value]]
[--config.field=value ...] [--workdir=DIR]``. Without ``--workdir`` the run goes to
``runs/<config name>[_<variant>]``; the run resumes automatically if that folder has a checkpoint.
"""
from __future__ import annotations

import pathlib
import sys

from absl import app
from absl import flags
from absl import logging as absl_logging
from ml_collections import config_flags

from disentangle import config as config_lib

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file, with :variant.",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory (created; resumed if it exists).")


def default_workdir(config_arg: str) -> pathlib.Path:
  path, _, variant = config_arg.partition(":")
  name = pathlib.Path(path).stem
  tag = "".join(ch if ch.isalnum() or ch in "-_=." else "_" for ch in variant)
  return pathlib.Path("runs") / (f"{name}_{tag}" if tag else name)


def _run(_):
  from disentangle.train import evaluation  # pylint: disable=g-import-not-at-top
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  # Our messages go to stdout; library INFO chatter (orbax) is kept out of the console.
  absl_logging.set_verbosity(absl_logging.WARNING)
  config = _CONFIG.value
  workdir = pathlib.Path(_WORKDIR.value)
  print(f"run directory: {workdir}  (seed {config.seed}, method {config.method})", flush=True)
  try:
    trainer.train(config, workdir, evaluator_factory=evaluation.factory(config))
  except (config_lib.ConfigError, trainer.NonFiniteError) as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)
  print(f"done: {workdir}", flush=True)


def main(default_config: str | None = None) -> None:
  """Entry point: ``default_config`` is used when ``--config`` is not given."""
  if default_config and not any(a.startswith("--config=") or a == "--config" for a in sys.argv):
    sys.argv.append(f"--config={default_config}")
  config_arg = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--config="))
  if not any(a.startswith("--workdir") for a in sys.argv):
    sys.argv.append(f"--workdir={default_workdir(config_arg)}")
  app.run(_run)
