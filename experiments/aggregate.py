"""Mean (std) / best over seeds beside the published numbers, in the papers' table format.

python -m experiments.aggregate RUN [RUN ...] [--output=table.md] [--json=table.json]

Each RUN must have been evaluated (``python -m experiments.evaluate --workdir=RUN``); see
`disentangle.train.aggregate` for the grouping, the matching to the configs' PUBLISHED numbers
and the standard deviation used (ddof=0).
"""
import json
import pathlib
import sys

from absl import app
from absl import flags

_OUTPUT = flags.DEFINE_string("output", None, "Write the markdown table here too.")
_JSON = flags.DEFINE_string("json", None, "Machine-readable table (default: --output with .json).")


def main(argv):
  from disentangle.train import aggregate  # pylint: disable=g-import-not-at-top
  if len(argv) < 2:
    print("usage: python -m experiments.aggregate RUN [RUN ...] [--output=table.md]",
          file=sys.stderr)
    sys.exit(2)
  try:
    table = aggregate.aggregate_runs(argv[1:])
  except FileNotFoundError as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)
  text = aggregate.markdown_table(table)
  print(text)
  json_path = _JSON.value or (str(pathlib.Path(_OUTPUT.value).with_suffix(".json"))
                              if _OUTPUT.value else None)
  if _OUTPUT.value:
    pathlib.Path(_OUTPUT.value).write_text(text)
  if json_path:
    pathlib.Path(json_path).write_text(json.dumps(table, indent=1))
    print(f"wrote {json_path}")


if __name__ == "__main__":
  app.run(main)
