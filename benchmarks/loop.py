"""Steps per second of the trainer's own loop against the bare step of the same config.

  python -m benchmarks.loop --config=experiments/configs/mnist_cascade.py:m10 --steps=600 \
      [--block=200] [--warmup=20] [--force_discrete=true] [--progress_bar=true]
  python -m benchmarks.loop --config=... --seeds=4 --steps=200 --block=50 [--rounds=2]

Runs :func:`disentangle.train.trainer.train` on the config as a user does (real data through
``input_pipeline.make_source`` / ``prefetch``, the device transfer, the metric reads and
``metrics.jsonl`` / TensorBoard writes every ``log_every`` steps, the progress bar; no evaluation;
one checkpoint at the end, after timing) for ``--warmup + --steps`` steps, and interleaves it, in
the same process, with the bare step (:func:`bare_step`): the trainer's jitted step of the timed
steps' phase compiled separately by :func:`benchmarks.step_timing.build_step` (same config and
seed, fed 4 real batches of the same run, already on the device). A trainer hook splits the run
into rounds: after ``--block`` loop steps it waits for the state (one ``block_until_ready`` per
block), records the loop block's wall time, pauses 0.2 s (the prefetch thread refills its queue,
worker threads go idle), runs ``--block`` bare steps back to back (dispatched like the loop's, one
wait at the end), pauses again and hands back to the loop. The hook's own time is excluded from
the loop's.

``--config.num_seeds=N`` times the loop of one N-run program against its bare step (the step
over the N runs' stacked states and batches in the trainer's seed layout, fed N runs' real
batches); ``host_costs`` then times the N runs' batch assembly and transfer.

``--seeds=N`` (N > 1) times what a user of ``config.num_seeds`` waits for instead: the trainer
with ``num_seeds = N`` (its default ``seed_layout``, or ``--config.seed_layout=...``) against the
trainer with one seed, whole loops both (real data, pipeline, logging), ``--rounds`` alternations of
one single-seed run and one N-seed run in the same process, each timed over blocks of ``--block``
steps after ``--warmup``. N separate runs are N x the single run's time per step (run one after
the other; on 2 cores N concurrent runs only share them). Prints ``seed_steps_per_s`` of both and
their ``ratio`` (>= 1.0: one program beats N separate runs).

``--block`` defaults to ``log_every`` so that every loop block holds exactly one metric read.
Prints one JSON line per round (``loop_ms`` / ``step_ms`` per step, ``ratio``) and a summary line:
``loop_steps_per_s``, ``step_steps_per_s`` (from the median ms of each over the rounds), ``ratio``
(median over rounds of loop steps/s / step steps/s; >= 0.9: the loop costs at most 10%),
``ratio_of_totals``, and ``host_costs``: the loop's host-side pieces timed alone after the run
(batch assembly ``local_batch``, device transfer ``global_batch``, the jitted call's dispatch time,
a progress-bar update, a metric read + write). As every benchmark here, the CascadeVAE discrete
branch is forced on (``cascade.discrete_start = 0``) unless ``--force_discrete=false``.
"""
from __future__ import annotations

import json
import pathlib
import tempfile
import time

from absl import app
from absl import flags
import jax
from ml_collections import config_flags
import numpy as np

from benchmarks import step_timing
from disentangle.reproduce import throughput

_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file[:variant].",
                                          lock_config=False)
_STEPS = flags.DEFINE_integer("steps", 600, "Timed loop steps (and as many bare steps).")
_BLOCK = flags.DEFINE_integer("block", 0, "Steps per block (0: the config's log_every).")
_WARMUP = flags.DEFINE_integer("warmup", 20, "Untimed loop steps first (compilation included).")
_FORCE_DISCRETE = flags.DEFINE_bool(
    "force_discrete", True, "CascadeVAE: set cascade.discrete_start=0 (discrete branch active).")
_PROGRESS_BAR = flags.DEFINE_bool("progress_bar", True, "The trainer's progress bar (stderr).")
_SEEDS = flags.DEFINE_integer("seeds", 1, "N > 1: time the trainer with num_seeds = N against "
                                             "one seed (see the module docstring).")
_ROUNDS = flags.DEFINE_integer("rounds", 2, "--seeds > 1: alternations of the two runs.")
_WORKDIR = flags.DEFINE_string("workdir", "", "Run directory ('' = a temporary one, removed).")
flags.mark_flag_as_required("config")

_PAUSE_S = 0.2


class _Interleaver:
  """Trainer hook: every ``block`` loop steps after ``warmup``, times a block of bare steps."""

  def __init__(self, bench: step_timing.StepBench, warmup: int, block: int, rounds: int):
    self.bench, self.warmup, self.block, self.rounds = bench, warmup, block, rounds
    self.loop_s: list[float] = []
    self.step_s: list[float] = []
    self.loop_cpu_s: list[float] = []
    self.step_cpu_s: list[float] = []
    self.loads: list[list[float] | None] = []
    self._resumed = None

  def _bare_block(self) -> tuple[float, float]:
    b = self.bench
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(self.block):
      b.state, b.last_metrics = b.compiled(b.state, b.next_batch())
    jax.block_until_ready((b.state, b.last_metrics))
    return time.perf_counter() - t0, time.process_time() - c0

  def __call__(self, state, done: int) -> None:
    if done < self.warmup or (done - self.warmup) % self.block:
      return
    jax.block_until_ready(state)
    now, cpu_now = time.perf_counter(), time.process_time()
    if self._resumed is not None:
      self.loop_s.append(now - self._resumed[0])
      self.loop_cpu_s.append(cpu_now - self._resumed[1])
      time.sleep(_PAUSE_S)
      wall, cpu = self._bare_block()
      self.step_s.append(wall)
      self.step_cpu_s.append(cpu)
      self.loads.append(throughput.load_average())
      r = len(self.loop_s)
      loop_ms, step_ms = 1e3 * self.loop_s[-1] / self.block, 1e3 * self.step_s[-1] / self.block
      print(json.dumps({"benchmark": "loop", "round": r - 1, "loop_ms": round(loop_ms, 2),
                        "step_ms": round(step_ms, 2), "ratio": round(step_ms / loop_ms, 4),
                        "loop_cpu_ms": round(1e3 * self.loop_cpu_s[-1] / self.block, 2),
                        "step_cpu_ms": round(1e3 * self.step_cpu_s[-1] / self.block, 2),
                        "loadavg": self.loads[-1]}), flush=True)
    else:  # end of the warm-up: warm the bare step too
      self._bare_block()
    time.sleep(_PAUSE_S)
    self._resumed = (time.perf_counter(), time.process_time())


def _source(config, bench: step_timing.StepBench):
  """The loop's batch source: one run's, or the ``num_seeds`` runs' stacked ``[runs, B, ...]``."""
  from disentangle import data as data_lib  # pylint: disable=g-import-not-at-top
  from disentangle.train import input_pipeline  # pylint: disable=g-import-not-at-top
  from disentangle.train import runs as runs_lib  # pylint: disable=g-import-not-at-top
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  dataset = trainer.load_training_data(config)
  spec_fn = getattr(type(bench.method), "batch_spec", None)
  spec = spec_fn(config) if spec_fn is not None else data_lib.IMAGES_ONLY
  if config.num_seeds > 1:
    return runs_lib.make_source(dataset, spec, config, runs_lib.run_configs(config))
  return input_pipeline.make_source(dataset, spec, global_batch=config.batch_size,
                                    seed=config.seed)


def _run_axis(config) -> int:
  """The batch axis of the stacked runs' arrays (0 for one run)."""
  return 1 if config.num_seeds > 1 else 0


def real_batches(config, bench: step_timing.StepBench, count: int = 4) -> list[dict]:
  """``count`` real training batches (the run's last steps), on device: the bare step sees the
  same data and shapes as the loop (only the loading and transfer are left out)."""
  from disentangle.train import mesh as mesh_lib  # pylint: disable=g-import-not-at-top
  source = _source(config, bench)
  mesh = mesh_lib.make_mesh(config.mesh.num_devices)
  out = [mesh_lib.global_batch(mesh, source.local_batch(config.num_steps - 1 - i),
                                _run_axis(config)) for i in range(count)]
  return jax.block_until_ready(out)


def host_costs(config, bench: step_timing.StepBench, reps: int = 20) -> dict[str, float]:
  """Median ms of each host-side piece of one loop step, timed alone (outside the loop)."""
  from tqdm import auto as tqdm  # pylint: disable=g-import-not-at-top

  from disentangle.train import mesh as mesh_lib  # pylint: disable=g-import-not-at-top
  from disentangle.train import writers  # pylint: disable=g-import-not-at-top

  source = _source(config, bench)
  mesh = mesh_lib.make_mesh(config.mesh.num_devices)

  median_ms = lambda fn: step_timing.median_ms(fn, reps, digits=4)
  out = {"local_batch_ms": median_ms(lambda i: source.local_batch(1000 + i))}
  local = source.local_batch(0)
  out["global_batch_ms"] = median_ms(
      lambda i: jax.block_until_ready(mesh_lib.global_batch(mesh, local, _run_axis(config))))

  def dispatch(_):
    b = bench
    b.state, b.last_metrics = b.compiled(b.state, b.batches[0])
  dispatch_ts = []
  for i in range(reps):
    t0 = time.perf_counter()
    dispatch(i)
    dispatch_ts.append(time.perf_counter() - t0)
    jax.block_until_ready(bench.state)
  out["dispatch_ms"] = round(1e3 * float(np.median(dispatch_ts)), 4)
  with tempfile.TemporaryDirectory() as d:
    bar = tqdm.tqdm(total=10**9, unit="step", smoothing=0.05, desc="probe", leave=False)
    out["progress_update_ms"] = median_ms(lambda i: bar.update(1))
    bar.close()
    w = writers.MetricWriter(d)
    metrics = bench.last_metrics
    out["metric_read_write_ms"] = median_ms(
        lambda i: w.write(i, dict(jax.device_get(metrics), steps_per_sec=1.0)))
    w.close()
  return out


class _BlockTimer:
  """Trainer hook: the wall time of each block of ``block`` steps after ``warmup``."""

  def __init__(self, warmup: int, block: int):
    self.warmup, self.block, self.times, self._t = warmup, block, [], None

  def __call__(self, state, done: int) -> None:
    if done < self.warmup or (done - self.warmup) % self.block:
      return
    jax.block_until_ready(state)
    now = time.perf_counter()
    if self._t is not None:
      self.times.append(now - self._t)
    self._t = now


def seeds_main(config, record: dict, n: int) -> None:
  """``--seeds=N``: the trainer with N seeds in one program against the trainer with one."""
  from disentangle.train import seeds  # pylint: disable=g-import-not-at-top
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  block = _BLOCK.value or int(config.log_every)
  blocks = max(1, _STEPS.value // block)
  warmup = _WARMUP.value
  config.num_steps = warmup + blocks * block
  config.checkpoint_every = config.num_steps
  config.eval_every = config.num_steps
  config.progress_bar = _PROGRESS_BAR.value
  ms = {1: [], n: []}
  with tempfile.TemporaryDirectory() as tmp:
    for r in range(_ROUNDS.value):
      for k in (1, n):
        c = config.copy_and_resolve_references()
        c.num_seeds = k
        timer = _BlockTimer(warmup, block)
        trainer.train(c, pathlib.Path(tmp) / f"r{r}_n{k}", hooks=[timer])
        per_step = [1e3 * t / block for t in timer.times]
        ms[k].extend(per_step)
        print(json.dumps({"benchmark": "loop_seeds", "round": r, "num_seeds": k,
                          "ms_per_step": [round(v, 2) for v in per_step],
                          "loadavg": throughput.load_average()}), flush=True)
        time.sleep(_PAUSE_S)
  single, multi = float(np.median(ms[1])), float(np.median(ms[n]))
  record.update(
      num_seeds=n, seed_layout=seeds.layout(config),
      single_ms_per_step=round(single, 3), multi_ms_per_step=round(multi, 3),
      separate_seed_steps_per_s=round(1e3 / single, 3),
      one_program_seed_steps_per_s=round(n * 1e3 / multi, 3),
      ratio=round(n * single / multi, 4), rounds=_ROUNDS.value, block=block, warmup_steps=warmup,
      ratio_note="seed-steps/s of the trainer with num_seeds = N over N separate runs' (N x the "
                 "single run's ms per step), medians over blocks; > 1: one program is faster")
  record.update(throughput.environment())
  print(json.dumps(record), flush=True)


def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  malloc = step_timing.configure_host()
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top

  config = _CONFIG.value
  record = step_timing.header("loop", flags.FLAGS["config"], config, _FORCE_DISCRETE.value)
  if _SEEDS.value > 1:
    record.update(host_setup=malloc)
    seeds_main(config, record, _SEEDS.value)
    return
  block = _BLOCK.value or int(config.log_every)
  rounds = max(1, _STEPS.value // block)
  warmup = _WARMUP.value
  config.num_steps = warmup + rounds * block
  config.checkpoint_every = config.num_steps  # one checkpoint, at the end, after timing
  config.eval_every = config.num_steps        # no evaluator is passed: no evaluation at all
  config.progress_bar = _PROGRESS_BAR.value
  bench = step_timing.bare_step(config, warmup)
  bench.batches = real_batches(config, bench)
  hook = _Interleaver(bench, warmup, block, rounds)
  load_start = throughput.load_average()
  with tempfile.TemporaryDirectory() as tmp:
    workdir = pathlib.Path(_WORKDIR.value or tmp)
    trainer.train(config, workdir / "run", hooks=[hook])

  loop_ms = 1e3 * np.asarray(hook.loop_s) / block
  step_ms = 1e3 * np.asarray(hook.step_s) / block
  ratios = step_ms / loop_ms
  record.update(
      loop_steps_per_s=round(1e3 / float(np.median(loop_ms)), 3),
      step_steps_per_s=round(1e3 / float(np.median(step_ms)), 3),
      ratio=round(float(np.median(ratios)), 4),
      ratio_min=round(float(np.min(ratios)), 4),
      ratio_max=round(float(np.max(ratios)), 4),
      ratio_of_totals=round(float(np.sum(hook.step_s) / np.sum(hook.loop_s)), 4),
      loop_median_ms=round(float(np.median(loop_ms)), 3),
      step_median_ms=round(float(np.median(step_ms)), 3),
      loop_cpu_median_ms=round(1e3 * float(np.median(hook.loop_cpu_s)) / block, 3),
      step_cpu_median_ms=round(1e3 * float(np.median(hook.step_cpu_s)) / block, 3),
      cpu_ratio=round(float(np.median(np.asarray(hook.step_cpu_s) / np.asarray(hook.loop_cpu_s))),
                      4),
      phase=bench.phase, rounds=len(ratios), block=block, warmup_steps=warmup,
      log_every=int(config.log_every),
      progress_bar=bool(config.progress_bar), loadavg_start=load_start,
      cpu_ratio_note="median over rounds of bare-step CPU ms / loop CPU ms (process CPU time, all "
                     "threads: the host work the loop adds, less sensitive to other processes)",
      ratio_note="median over rounds of (bare step ms / loop ms per step), i.e. loop steps/s "
                 "over bare-step steps/s, each round one block of the loop then one of the "
                 "bare step in the same process",
  )
  record["host_costs"] = host_costs(config, bench)
  record.update(throughput.environment())
  record.update(host_setup=malloc,
                data="loop: the config's real training data through the trainer's input "
                     "pipeline; bare step: 4 real batches of the same run (its last steps), "
                     "on device before timing")
  print(json.dumps(record), flush=True)


if __name__ == "__main__":
  app.run(main)
