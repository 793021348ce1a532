"""How long the step waits on the host's exact assignment, for N runs in one program, with and
without the overlap of the host's solve (``assignment_placement``, `disentangle.train.codes`).

  python -m benchmarks.assignment_wait [--config=experiments/configs/dsprites_cascade.py:m6]
      [--runs=10,40] [--steps=5] [--layout=vmap] [--config.batch_size=...]

CascadeVAE after t_d (``cascade.discrete_start = 0``, `step_timing.force_discrete`) with
``cascade.solver='scipy'``. For each N of ``--runs`` the trainer's step of N runs
(`disentangle.train.trainer.phase_step`, the runs laid out as ``--layout``, one device,
synthetic batches) is timed in two forms:

- ``one_program``: the step as one program; its callback sends every run's problem
  ``[N, B, S]`` to the host and the program waits for the labels before the rest of the step;
- ``overlapped``: ``assignment_placement = 'overlapped'``, the runs in two groups whose solves overlap the
  other group's device work (four programs a step);

each twice: with the real solver (`assignment.assign_host`: scipy's ``linear_sum_assignment``
on the slot matrix of every run's problem), and with a zero-cost stand-in (every label 0: the
same shapes in and out, so the rest of the step does the same work), each put in the host
solver's place by `assignment.host_solver`. Per form:

- ``step_ms`` / ``stand_in_step_ms``: medians over ``--steps`` steps after two warm-up steps;
- ``wait_ms`` = their difference, the time per step the step waits on the host's solve, and
  ``wait_share`` = ``wait_ms / step_ms``;
- ``solve_ms``: the host solves' bodies per step (their median sum), for comparison.

Here the device is the CPU, which also computes the step (the solve and the device's work share
its cores), so the figures are the host's cost of the solve in the step; on a GPU the same
difference is the device's idle time. One JSON line per N, with the load average before and after.
"""
from __future__ import annotations

import json
import time

from absl import app
from absl import flags
import jax
from ml_collections import config_flags
import numpy as np

from benchmarks import step_timing
from disentangle import assignment
from disentangle import config as config_lib
from disentangle import methods
from disentangle.reproduce import throughput
from disentangle.train import runs as runs_lib
from disentangle.train import trainer

_CONFIG = config_flags.DEFINE_config_file(
    "config", "experiments/configs/dsprites_cascade.py:m6", "Config file (and variant).",
    lock_config=False)
_RUNS = flags.DEFINE_list("runs", ["10", "40"], "Runs per program, one figure each.")
_STEPS = flags.DEFINE_integer("steps", 5, "Steps timed (medians).")
_LAYOUT = flags.DEFINE_enum("layout", "vmap", list(config_lib.SEED_LAYOUTS_RESOLVED),
                            "The runs' layout in the program (seed_layout; the accelerators' "
                            "default is vmap).")


def _stand_in(u, penalty):
  """The zero-cost stand-in of `assignment.assign_host`: label 0 for every sample."""
  del penalty
  return np.zeros(np.shape(u)[:-1], np.int32)


def program_config(config, runs: int, overlapped: bool):
  """``config`` as ``runs`` seeds on one device, laid out as ``--layout``."""
  c = config_lib.copy(config)
  c.num_seeds, c.seed_layout = runs, _LAYOUT.value
  c.assignment_placement = "overlapped" if overlapped else "step"
  c.mesh.num_devices = 1
  return c


def time_step(config, runs: int, steps: int, overlapped: bool, host_fn) -> tuple[float, float]:
  """(median step ms, median ms of the host solves per step) with ``host_fn`` solving."""
  solves = []

  def timed(u, penalty):
    t0 = time.perf_counter()
    try:
      return host_fn(u, penalty)
    finally:
      solves.append(time.perf_counter() - t0)

  c = program_config(config, runs, overlapped)
  shape = throughput.image_shape(c)
  cfgs = runs_lib.run_configs(c)
  program = runs_lib.Program(c, cfgs)
  method = methods.build(c, shape, mesh=program.mesh)
  state = methods.init_states_of(method, [x.seed for x in cfgs], out_shardings=program.states)
  batches = [jax.device_put(b, program.batches)
             for b in throughput.synthetic_batches(shape, c.batch_size, runs, 2)]
  times, per_step = [], []
  with assignment.host_solver(timed):  # the one program's callback and the overlapped solves
    train_step, rest = trainer.phase_step(program, method, method.phase(0))  # t = 1 > t_d = 0
    for i in range(steps + 2):
      before = len(solves)
      t0 = time.perf_counter()
      state, metrics = train_step(state, batches[i % len(batches)], *rest)
      jax.block_until_ready((state, metrics))
      if i >= 2:
        times.append(time.perf_counter() - t0)
        per_step.append(sum(solves[before:]))
  return 1e3 * float(np.median(times)), 1e3 * float(np.median(per_step))


def main(argv) -> None:
  del argv
  config = _CONFIG.value
  config.cascade.solver = "scipy"
  head = step_timing.header("assignment_wait", flags.FLAGS["config"], config, force=True)
  for runs in (int(r) for r in _RUNS.value):
    load_before = throughput.load_average()
    record = dict(head, runs=runs, steps=_STEPS.value, layout=_LAYOUT.value,
                  problem=[runs, int(config.batch_size), int(config.cascade.num_discrete)],
                  host_threads=assignment.HOST_THREADS, load_before=load_before)
    for name, overlapped in (("one_program", False), ("overlapped", True)):
      real_ms, solve_ms = time_step(config, runs, _STEPS.value, overlapped,
                                    assignment.assign_host)
      stand_ms, _ = time_step(config, runs, _STEPS.value, overlapped, _stand_in)
      record[name] = dict(step_ms=round(real_ms, 3), stand_in_step_ms=round(stand_ms, 3),
                          wait_ms=round(real_ms - stand_ms, 3),
                          wait_share=round((real_ms - stand_ms) / real_ms, 4),
                          solve_ms=round(solve_ms, 3))
    print(json.dumps(step_timing.finish_record(record, step_timing.configure_host())), flush=True)


if __name__ == "__main__":
  app.run(main)
