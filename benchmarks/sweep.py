"""Run-steps per second of N runs in one program over 1, 2, 4, 8 devices, before and after t_d.

  XLA_FLAGS=--xla_force_host_platform_device_count=8 python -m benchmarks.sweep \
      --config=experiments/configs/mnist_cascade.py --runs=8 --devices=1,2,4,8 --steps=3

Builds the trainer's program (:class:`disentangle.train.runs.Program`: the runs on a
``(runs, data)`` mesh, one compiled step per phase) for ``--runs`` seeds on each device count,
and the single run on one device, on synthetic batches (`benchmarks.common`). For each layout and
phase (CascadeVAE: ``before`` t_d, without the discrete branch, and ``after``; other methods:
one phase) prints one JSON line: run-steps/s (median step), ``callbacks_per_step`` (host
assignment calls per step, counted), the compiled program's top-level operation count and
``ratio_to_separate`` = N x the single run's step time / the program's step time (> 1: the one
program beats N separate runs on the same devices one after another). Programs are timed one
after another, never two at once; the load average is printed beside each line.
"""
from __future__ import annotations

import json
import time

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
from ml_collections import config_flags
import numpy as np

from benchmarks import common

_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file[:variant].",
                                          lock_config=True)
_RUNS = flags.DEFINE_integer("runs", 8, "N: runs (seeds) in one program.")
_DEVICES = flags.DEFINE_list("devices", ["1", "2", "4", "8"], "Device counts to lay N runs on.")
_STEPS = flags.DEFINE_integer("steps", 3, "Timed steps per program and phase.")
_WARMUP = flags.DEFINE_integer("warmup", 1, "Untimed steps after compilation.")
flags.mark_flag_as_required("config")


def top_level_ops(compiled) -> int:
  """Instructions of the compiled program's ENTRY computation (fusions count once)."""
  lines = compiled.as_text().splitlines()
  start = next(i for i, l in enumerate(lines) if l.startswith("ENTRY"))
  count = 0
  for line in lines[start + 1:]:
    if line.startswith("}"):
      break
    count += " = " in line
  return count


class Counter:
  """Counts the host assignment calls (wraps `disentangle.assignment._assign_host`)."""

  def __enter__(self):
    from disentangle import assignment  # pylint: disable=g-import-not-at-top
    self.module, self.original, self.calls = assignment, assignment._assign_host, 0  # pylint: disable=protected-access

    def counting(u, penalty):
      self.calls += 1
      return self.original(u, penalty)

    assignment._assign_host = counting  # pylint: disable=protected-access
    return self

  def __exit__(self, *exc):
    self.module._assign_host = self.original  # pylint: disable=protected-access
    return False


def phases(method) -> dict:
  """{name: a step of that phase} (CascadeVAE: before / after t_d)."""
  if not hasattr(method, "phase"):
    return {"all": 0}
  after = int(method.config.cascade.discrete_start)
  return {"after": after} if method.phase(0) else {"before": 0, "after": after}


def measure(config, image, num_runs: int, devices: int, counter: Counter) -> list[dict]:
  from disentangle import methods  # pylint: disable=g-import-not-at-top
  from disentangle.train import runs  # pylint: disable=g-import-not-at-top
  c = config.copy_and_resolve_references()
  with c.unlocked():
    c.num_seeds, c.mesh.num_devices = num_runs, devices
  cfgs = runs.run_configs(c)
  program = runs.Program(c, cfgs)
  method = methods.build(c, image, mesh=program.mesh)
  keys = jnp.stack([jax.random.PRNGKey(x.seed) for x in cfgs])
  init = (lambda k: method.init(k[0])) if num_runs == 1 else jax.vmap(method.init)
  state = jax.jit(init, out_shardings=program.states)(keys)
  batch = common.synthetic_batches(image, c.batch_size, num_runs, 1, 0)[0]
  batch = common.with_side_information(batch, type(method).batch_spec(c), num_runs, 0)
  batch = jax.device_put(batch, program.batches)
  values = program.values()
  stepper = program.stepper(method, image)
  out = []
  for name, step in phases(method).items():
    t0 = time.perf_counter()
    compiled = stepper(step).lower(state, batch, values).compile()
    compile_s = time.perf_counter() - t0
    for _ in range(_WARMUP.value):
      state, _ = jax.block_until_ready(compiled(state, batch, values))
    calls, times = counter.calls, []
    for _ in range(_STEPS.value):
      t = time.perf_counter()
      state, _ = jax.block_until_ready(compiled(state, batch, values))
      times.append(time.perf_counter() - t)
    ms = 1e3 * float(np.median(times))
    out.append({"runs": num_runs, "devices": devices, "mesh": {"runs": program.runs_axis,
                                                              "data": program.data_axis},
                "phase": name, "step_ms": round(ms, 2),
                "run_steps_per_s": round(num_runs / (ms / 1e3), 3),
                "callbacks_per_step": (counter.calls - calls) / _STEPS.value,
                "top_level_ops": top_level_ops(compiled), "compile_s": round(compile_s, 2),
                "loadavg": common.load_average()})
  return out


def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  malloc = common.configure_host()
  config = _CONFIG.value
  image = common.image_shape(config)
  head = {"benchmark": "sweep", "config": common.describe_config(flags.FLAGS["config"]),
          "method": config.method, "backend": jax.default_backend(),
          "device_count": jax.device_count(), "cores": common.num_cores(),
          "note": common.DATA_NOTE}
  print(json.dumps(head), flush=True)
  with Counter() as counter:
    single = {r["phase"]: r for r in measure(config, image, 1, 1, counter)}
    for r in single.values():
      print(json.dumps(dict(r, ratio_to_separate=1.0)), flush=True)
    for devices in map(int, _DEVICES.value):
      for r in measure(config, image, _RUNS.value, devices, counter):
        ratio = _RUNS.value * single[r["phase"]]["step_ms"] / r["step_ms"]
        print(json.dumps(dict(r, ratio_to_separate=round(ratio, 3), malloc=malloc)), flush=True)


if __name__ == "__main__":
  app.run(main)
