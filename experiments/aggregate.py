"""Mean (std) / best over seeds beside the published numbers, in the papers' table format.

python -m experiments.aggregate RUN [RUN ...] [--output=table.md] [--json=table.json]

Each RUN must have been evaluated (``python -m experiments.evaluate --workdir=RUN``); see
`disentangle.evaluation.aggregate` for the grouping, the matching to the configs' PUBLISHED numbers
and the standard deviation used (ddof=0). The published numbers are those of the config modules
``experiments/configs/*.py`` (`config_modules`), passed to the library from here. Runs with a
selected checkpoint (``eval.select``) show each metric at the final and at the selected
checkpoint, labelled, as mean (std) / best and per seed. Bad input (a run not evaluated, a
file that cannot be written) is one line and exit status 2 (`disentangle.command_line.exits`).
"""
import importlib
import json
import pathlib
import pkgutil
import shlex
import sys

from absl import flags

from disentangle import command_line

_OUTPUT = flags.DEFINE_string("output", None, "Write the markdown table here too.")
_JSON = flags.DEFINE_string("json", None, "Machine-readable table (default: --output with .json).")


def config_modules(package: str = "experiments.configs") -> list:
  """Every module of ``package`` (the experiment configs with their ``PUBLISHED`` numbers)."""
  pkg = importlib.import_module(package)
  return [importlib.import_module(f"{package}.{info.name}")
          for info in pkgutil.iter_modules(pkg.__path__)]


def main(argv):
  from disentangle import atomic  # pylint: disable=g-import-not-at-top
  from disentangle.evaluation import aggregate  # pylint: disable=g-import-not-at-top
  if len(argv) < 2:
    command_line.fail("no RUN given: python -m experiments.aggregate RUN [RUN ...] "
                      "[--output=table.md]")
  with command_line.exits(shlex.join(getattr(sys, "orig_argv", sys.argv))):
    candidates = aggregate.config_candidates(config_modules())
    table = aggregate.aggregate_runs(argv[1:], candidates=candidates)
    text = aggregate.markdown_table(table)
    print(text)
    json_path = _JSON.value or (str(pathlib.Path(_OUTPUT.value).with_suffix(".json"))
                                if _OUTPUT.value else None)
    if _OUTPUT.value:
      atomic.write_text(_OUTPUT.value, text)
    if json_path:
      atomic.write_text(json_path, json.dumps(table, indent=1))
      print(f"wrote {json_path}")


if __name__ == "__main__":
  command_line.run(main)
