"""Seeds x steps per second: one program training N seeds against N separate runs.

  python -m benchmarks.multi_seed --config=experiments/configs/mnist_cascade.py --seeds=4 \
      --steps=5 [--rounds=3] [--warmup=2] [--programs=vmap,unroll,map] \
      [--config.model.conv_impl=fast]

Builds, in one process, the trainer's step for ``num_seeds = 1`` and N-seed programs:

- ``vmap`` (reported as ``vmapped``): ``jax.vmap(method.train_step)`` over N stacked states and
  per-seed batches, what the trainer runs with ``config.num_seeds = N`` on GPU / TPU;
- ``unroll`` (``unrolled``): N independent copies of the step in one jitted program, what the
  trainer runs on CPU (``config.seed_layout = 'auto'``, `disentangle.train.seeds`);
- ``map`` (``mapped``): ``jax.lax.map`` over the seeds (a loop inside one program);

then times them interleaved: per round ``--steps`` steps of each program in turn (never two at
once). N separate runs are estimated as N x the single-seed time (one run measured and multiplied:
on a shared machine N sequential runs add nothing but noise). Prints one JSON line per round and a
summary line: seed-steps/s of each (from the medians), the speed-up of each program (N x single /
its step; > 1: the one program beats N separate runs), compile times and the host-callback share
(see :class:`benchmarks.step_timing.CallbackTimer`). Synthetic batches; the CascadeVAE discrete
branch is forced on (``cascade.discrete_start = 0``) unless ``--force_discrete=false``.
"""
from __future__ import annotations

import json
import time
from typing import Any

from absl import app
from absl import flags
from ml_collections import config_flags
import numpy as np

from benchmarks import step_timing
from disentangle import config as config_lib
from disentangle.reproduce import throughput

_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file[:variant].",
                                          lock_config=True)
_SEEDS = flags.DEFINE_integer("seeds", 4, "N: seeds trained at once by the vmapped program.")
_STEPS = flags.DEFINE_integer("steps", 5, "Timed steps of each program per round.")
_ROUNDS = flags.DEFINE_integer("rounds", 3, "Interleaved rounds (single, vmapped, mapped, single, ...).")
_WARMUP = flags.DEFINE_integer("warmup", 2, "Untimed steps of each program after compilation.")
_PROGRAMS = flags.DEFINE_list(
    "programs", list(config_lib.SEED_LAYOUTS_RESOLVED),
    f"N-seed programs to time, from {list(step_timing.SEED_BATCHINGS)} (the trainer: 'unroll' on "
    "CPU, 'vmap' on accelerators).")
_FORCE_DISCRETE = flags.DEFINE_bool(
    "force_discrete", True, "CascadeVAE: set cascade.discrete_start=0 (discrete branch active).")
flags.mark_flag_as_required("config")

# Each of step_timing.SEED_BATCHINGS as the output's lines name it.
_NAMES = {"vmap": "vmapped", "map": "mapped", "unroll": "unrolled"}
_PAUSE_S = 0.2  # between blocks: lets the other program's worker threads go idle


def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  malloc = step_timing.configure_host()
  config = _CONFIG.value
  n = _SEEDS.value
  if n < 2:
    raise app.UsageError("--seeds must be >= 2")
  unknown = [p for p in _PROGRAMS.value if p not in step_timing.SEED_BATCHINGS]
  if unknown or not _PROGRAMS.value:
    raise app.UsageError(f"--programs: choose from {list(step_timing.SEED_BATCHINGS)}, "
                         f"got {_PROGRAMS.value}")
  head = step_timing.header("multi_seed", flags.FLAGS["config"], config, _FORCE_DISCRETE.value)
  head["seeds"] = n
  solver = config.cascade.solver if config.method == "cascadevae" else None
  image = throughput.image_shape(config)

  with step_timing.CallbackTimer() as timer:
    single = step_timing.build_step(config, image, num_seeds=1)
    benches = {"single": single}
    for kind in _PROGRAMS.value:
      benches[_NAMES[kind]] = step_timing.build_step(config, image, num_seeds=n, seed_batching=kind)
    for b in benches.values():
      b.run(_WARMUP.value)
    times: dict[str, list[float]] = {k: [] for k in benches}
    callbacks: dict[str, list[float]] = {k: [] for k in benches}
    ratios: dict[str, list[float]] = {k: [] for k in benches if k != "single"}
    for r in range(_ROUNDS.value):
      round_ms = {}
      for name, bench in benches.items():
        time.sleep(_PAUSE_S)
        mark = timer.mark()
        t = bench.run(_STEPS.value)
        callbacks[name] += timer.since(mark)
        times[name] += t
        round_ms[name] = 1e3 * float(np.median(t))
      line: dict[str, Any] = {"benchmark": "multi_seed", "round": r, "seeds": n}
      line.update({f"{k}_ms": round(v, 2) for k, v in round_ms.items()})
      for k in ratios:
        ratios[k].append(n * round_ms["single"] / round_ms[k])
        line[f"{k}_speedup"] = round(ratios[k][-1], 3)
      line["loadavg"] = throughput.load_average()
      print(json.dumps(line), flush=True)

  record = dict(head)
  for name, bench in benches.items():
    stats = step_timing.summarize_ms(times[name])
    cb = step_timing.callback_summary(callbacks[name], times[name], solver)
    record[name] = dict(stats, compile_s=round(bench.compile_s, 2),
                        callback_share=cb["callback_share"], **bench.metrics_summary())
  single_s = record["single"]["median_ms"] / 1e3
  record["separate_seed_steps_per_s"] = round(1.0 / single_s, 3)
  for k in ratios:
    multi_s = record[k]["median_ms"] / 1e3
    record[f"{k}_seed_steps_per_s"] = round(n / multi_s, 3)
    record[f"{k}_speedup"] = round(n * single_s / multi_s, 3)
    record[f"{k}_speedup_median_over_rounds"] = round(float(np.median(ratios[k])), 3)
  from disentangle.train import seeds  # pylint: disable=g-import-not-at-top
  trainer_layout = _NAMES[seeds.layout(config)]
  if f"{trainer_layout}_speedup" in record:
    record["speedup"] = record[f"{trainer_layout}_speedup"]
    record["trainer_program"] = trainer_layout
  record.update(
      speedup_note="N x single-seed step time / N-seed program step time (> 1: the one program "
                   "beats N separate runs); 'speedup' is that of the program the trainer runs here "
                   "('trainer_program': seeds.layout of the config on this backend)",
      separate_note="N separate runs = N x the measured single-seed step (one run, multiplied)",
      rounds=_ROUNDS.value, steps_per_round=_STEPS.value, warmup_steps=_WARMUP.value)
  print(json.dumps(step_timing.finish_record(record, malloc)), flush=True)


if __name__ == "__main__":
  app.run(main)
