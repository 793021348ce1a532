"""Mean (std) over seeds beside the published numbers, in the papers' table format.

python -m experiments.aggregate RUN [RUN ...] [--columns=all] [--output=table.md]
    [--json=table.json]

Each RUN must have been evaluated (``python -m experiments.evaluate --workdir=RUN``); see
`disentangle.evaluation.aggregate` for the grouping, the matching to the configs' PUBLISHED numbers
and the standard deviation used (ddof=0). The published numbers are those of the config modules
``experiments/configs/*.py`` (`config_modules`), passed to the library from here. The table is
compact by default: experiment, method, seeds, step and the experiment's headline metrics (those
its published numbers name; the factor score and MIG where none) as mean (std) beside the
published mean (std), at the final and, for runs with a selected checkpoint (``eval.select``), at
the selected checkpoint, labelled. ``--columns=all`` prints every column (m, every metric as mean
(std) / best); a comma list of column names picks some (``--columns=seeds,mig,mig:paper``).
The per-seed figures follow the table; the JSON holds every number either way.
Bad input (a run not evaluated, a column the table has not, a file that cannot be written) is
one line and exit status 2 (`disentangle.command_line.exits`).
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
_COLUMNS = flags.DEFINE_string(
    "columns", "compact", "compact (experiment, method, seeds, step, the headline metrics beside "
    "the published), all, or a comma list of column names: experiment, method, m, seeds, step, "
    "<metric>, <metric>:selected, <metric>:paper.")

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
                      "[--columns=all] [--output=table.md]")
  with command_line.exits(shlex.join(getattr(sys, "orig_argv", sys.argv))):
    candidates = aggregate.config_candidates(config_modules())
    table = aggregate.aggregate_runs(argv[1:], candidates=candidates)
    text = aggregate.markdown_table(table, _COLUMNS.value)
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
