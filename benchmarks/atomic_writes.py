"""What flushing a write to the disk costs: atomic writes and metrics lines, with and without fsync.

  python -m benchmarks.atomic_writes [--dir=DIR] [--seconds=2] [--rounds=3]

``small_json``: `disentangle.atomic.write_text` of an evaluation-sized JSON (~2 KB) onto the same
file, with ``fsync`` of the temporary before the rename and of the folder after it (the library's
writes) and without (``replacing(..., sync=False)``). ``metrics_line``: one JSON line appended to a
``metrics.jsonl`` (``MetricWriter.write``'s ``open(path, "a")``), as the writer does it (no fsync)
and with an ``fsync`` of the file after each line. The variants alternate in ``--rounds`` rounds
of ``--seconds`` each, in ``--dir`` (default: a temporary folder under the current directory, so
on the disk the runs use); the medians over rounds are printed as one JSON line with writes/s,
microseconds per write and the load average.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import tempfile
import time

from disentangle import atomic

SMALL_JSON = json.dumps({"step": 20000, "metrics": {f"metric_{i}": {"value": 0.123456789 * i,
                                                                    "settings": {"points": 10000}}
                                                    for i in range(40)}}, indent=1)
LINE = json.dumps({"step": 20000, "loss": 51.25, "reconstruction": 40.5, "kl": 10.75,
                   "kl_per_dim": [1.5] * 10, "steps_per_sec": 14.2}) + "\n"


def json_write(folder: pathlib.Path, sync: bool):
  path = folder / "step.json"

  def write():
    with atomic.replacing(path, sync=sync) as tmp:
      tmp.write_text(SMALL_JSON)
  return write


def line_write(folder: pathlib.Path, sync: bool):
  path = folder / "metrics.jsonl"

  def write():
    with open(path, "a") as f:
      f.write(LINE)
      if sync:
        f.flush()
        os.fsync(f.fileno())
  return write


def rate(write, seconds: float) -> float:
  """Writes per second of ``write`` over about ``seconds``."""
  n, start = 0, time.perf_counter()
  while (elapsed := time.perf_counter() - start) < seconds:
    write()
    n += 1
  return n / elapsed


def run(folder: pathlib.Path, seconds: float, rounds: int) -> dict:
  variants = {(kind, sync): make(folder / f"{kind}_{sync}", sync)
              for kind, make in (("small_json", json_write), ("metrics_line", line_write))
              for sync in (True, False)}
  for kind, sync in variants:
    (folder / f"{kind}_{sync}").mkdir(parents=True, exist_ok=True)
  load_start = [round(v, 2) for v in os.getloadavg()]
  rates: dict = {key: [] for key in variants}
  for _ in range(rounds):
    for key, write in variants.items():
      rates[key].append(rate(write, seconds))
  out = {"benchmark": "atomic_writes", "dir": str(folder), "seconds": seconds, "rounds": rounds}
  for kind in ("small_json", "metrics_line"):
    entry = {}
    for sync, name in ((True, "fsync"), (False, "no_fsync")):
      r = statistics.median(rates[(kind, sync)])
      entry[name] = {"writes_per_s": round(r, 1), "us_per_write": round(1e6 / r, 1),
                     "rounds": [round(x, 1) for x in rates[(kind, sync)]]}
    entry["fsync_cost_us"] = round(entry["fsync"]["us_per_write"] -
                                   entry["no_fsync"]["us_per_write"], 1)
    out[kind] = entry
  out.update(loadavg_start=load_start, loadavg_end=[round(v, 2) for v in os.getloadavg()],
             cpus=os.cpu_count())
  return out


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("--dir", default=None)
  parser.add_argument("--seconds", type=float, default=2.0)
  parser.add_argument("--rounds", type=int, default=3)
  args = parser.parse_args(argv)
  if args.dir:
    record = run(pathlib.Path(args.dir), args.seconds, args.rounds)
  else:
    with tempfile.TemporaryDirectory(prefix=".atomic_writes_", dir=".") as tmp:
      record = run(pathlib.Path(tmp), args.seconds, args.rounds)
  print(json.dumps(record), flush=True)


if __name__ == "__main__":
  main()
