"""The throughput figures of the slot (`experiments.slot`): run-steps/s and the device's busy share.

For dSprites CascadeVAE ``m6`` and MNIST ``m10`` (or their ``smoke`` variants), N runs in one
program (the trainer's, `benchmarks.phases`) for each N asked, before t_d (where t_d >= 1; MNIST
``m10`` has t_d = 0) and after it with the host solver (``cascade.solver='scipy'``), after it
with the on-device one (``'hungarian'``) and with the host's solves overlapped with the device's
work (``'scipy_overlapped'``: ``assignment_overlap``, `disentangle.train.overlap`), on synthetic
batches: run-steps/s, host callbacks per
step, compile time and the device's busy share, the mean ``utilization.gpu`` of nvidia-smi over
the timed steps, sampled in a background thread (`disentangle.reproduce.utilisation.GpuSampler`;
null without nvidia-smi).
"""
from __future__ import annotations

import datetime
import importlib
import itertools
import time
from typing import Any, Callable, Sequence

from disentangle.reproduce import utilisation

CONFIGS = (("dsprites_cascade", "m6"), ("mnist_cascade", "m10"))
# (name, cascade.solver, assignment_overlap, phases): the host solver in the step, the on-device
# solver and the host solver overlapped with the other half of the runs' device work (after t_d).
SOLVERS = (("scipy", "scipy", False, None), ("hungarian", "hungarian", False, ("after",)),
           ("scipy_overlapped", "scipy", True, ("after",)))
TIMING = {False: dict(steps=10, warmup=2, min_seconds=2.0),  # >= 2 s: several nvidia-smi samples
          True: dict(steps=2, warmup=1, min_seconds=0.0)}


def measure(counts: Sequence[int], smoke: bool, sampler: utilisation.GpuSampler,
            budget_end: float, log: Callable[[str], None]) -> dict[str, Any]:
  """The figures (module docstring) until ``budget_end`` (the first always), for each count of
  ``counts`` (runs per program); ``smoke``: the smoke variants, 2 steps."""
  import jax  # pylint: disable=g-import-not-at-top

  from benchmarks import common  # pylint: disable=g-import-not-at-top
  from benchmarks import phases  # pylint: disable=g-import-not-at-top
  from disentangle.reproduce import run  # pylint: disable=g-import-not-at-top
  timing = TIMING[smoke]
  started = time.time()
  figures, skipped, configs = [], [], {}

  def keep_going():  # asked before each unit and each phase: until a figure, always
    return not figures or time.time() < budget_end
  with phases.CallbackCounter() as counter:
    for runs, (name, variant), (solver, cascade_solver, overlapped, only) in itertools.product(
        counts, CONFIGS, SOLVERS):
      variant = f"{variant},smoke" if smoke else variant
      config = importlib.import_module(f"experiments.configs.{name}").get_config(variant)
      with config.unlocked():
        config.cascade.solver, config.assignment_overlap = cascade_solver, overlapped
      # CascadeVAE's steps before t_d (t <= t_d) exist when t_d >= 1 (MNIST m10: t_d = 0).
      wanted = only or (("before", "after") if config.cascade.discrete_start > 0 else ("after",))
      where = dict(config=name, variant=variant, runs=runs, solver=solver)
      label = f"{name}:{variant} runs={runs} solver={solver}"
      configs.setdefault(f"{name}:{variant}", dict(
          common.model_summary(config), discrete_start=int(config.cascade.discrete_start)))
      if not keep_going():
        skipped += [dict(where, phase=p, reason="throughput budget spent") for p in wanted]
        continue
      sampler.label = label
      log(f"throughput: {label}")
      try:
        records = phases.measure_program(config, common.image_shape(config), runs, 1, counter,
                                         only=only, keep_going=keep_going, **timing)
      except Exception as e:  # pylint: disable=broad-except
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        log(f"throughput: {label}: failed: {reason}")
        skipped += [dict(where, phase=p, reason=f"failed: {reason}") for p in wanted]
        continue
      for r in records:
        figure = dict(where, **r, **sampler.window(r["timed_from"], r["timed_to"]))
        figures.append(figure)
        log(f"throughput: {label} {r['phase']}: {r['run_steps_per_s']} run-steps/s, busy share "
            f"{figure['busy_share']}")
      done = {r["phase"] for r in records}
      skipped += [dict(where, phase=p, reason="throughput budget spent")
                  for p in wanted if p not in done]
  after = {(f["config"], f["runs"], f["solver"]): f for f in figures if f["phase"] == "after"}
  comparison = []
  for (name, runs, solver), f in after.items():
    if solver != "scipy":
      continue
    row = {"config": name, "runs": runs, "scipy_run_steps_per_s": f["run_steps_per_s"]}
    for other_name in ("hungarian", "scipy_overlapped"):
      other = after.get((name, runs, other_name))
      if other is not None:
        row[f"{other_name}_run_steps_per_s"] = other["run_steps_per_s"]
        row[f"{other_name}_over_scipy"] = round(other["run_steps_per_s"] / f["run_steps_per_s"],
                                                3)
    if len(row) > 3:
      comparison.append(row)
  return {
      "device": run.device(), "jax_version": jax.__version__, "smoke": smoke,
      "runs": list(counts), "configs": configs, "timing": timing,
      "budget_until": datetime.datetime.fromtimestamp(budget_end).isoformat(timespec="seconds"),
      "spent_s": round(time.time() - started, 1),
      "figures": figures, "skipped": skipped, "solver_comparison": comparison,
      "environment": common.environment(), "data": common.DATA_NOTE,
      "notes": {
          "run_steps_per_s": "runs / median step time of the one program (steps blocked on)",
          "phase": "CascadeVAE before t_d (no discrete branch) and after it (the assignment "
                   "solved each step: 'scipy' on the host through a callback, 'hungarian' on "
                   "the device, 'scipy_overlapped' on the host beside the other group of runs' "
                   "device work, assignment_overlap)",
          "busy_share": "mean nvidia-smi utilization.gpu / 100 over the timed steps (null: no "
                        "nvidia-smi or no sample in the span)",
          "timed_from": "time.time() span of the timed steps (utilisation.csv's time column)"},
  }
