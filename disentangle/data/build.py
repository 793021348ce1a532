"""Prepare one of the project's TFDS builders (``data.tfds.builders``) in array_record, without TF.

  python -m disentangle.data.build --name=dsprites_rendered --data_dir=/path/to/tfds

Each shard is written straight to its array_record file, so a set of any size (the 737280
rendered dSprites: 3 GB, past TFDS's 1 GB in-memory shuffle buffer) prepares without TensorFlow.

Then train with ``--config.dataset.source=tfds --config.dataset.tfds_data_dir=<data_dir>
--config.dataset.tfds_name=<name>``. Nothing is downloaded. The official catalog sets are prepared
with TFDS's own CLI instead: ``tfds build <name> --data_dir=... --file_format=array_record``
(needs TensorFlow, once, on one machine).
"""
from __future__ import annotations

import argparse
import sys
import time

from disentangle.data.tfds import layouts


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m disentangle.data.build",
                                   description=__doc__.splitlines()[0])
  parser.add_argument("--name", required=True, choices=sorted(layouts.PROJECT_BUILDERS))
  parser.add_argument("--data_dir", default="",
                      help="TFDS data folder (default: $TFDS_DATA_DIR, else ~/tensorflow_datasets)")
  args = parser.parse_args(argv)
  from disentangle.data.tfds import builders  # pylint: disable=g-import-not-at-top
  start = time.time()
  folder = builders.prepare(args.name, args.data_dir)
  print(f"prepared {args.name} in {folder} ({time.time() - start:.1f} s); read it with "
        f"dataset.source=tfds dataset.tfds_name={args.name} "
        f"dataset.tfds_data_dir={layouts.resolve_tfds_data_dir(args.data_dir)} "
        f"dataset.name={layouts.PROJECT_BUILDERS[args.name]}", flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
