"""JAX against PyTorch on the same train step (CascadeVAE, PartedVAE), interleaved in one process.

  python -m benchmarks.compare --config=experiments/configs/mnist_parted.py --rounds=5 --steps=5

  python -m benchmarks.compare --config=experiments/configs/dsprites_cascade.py --rounds=5 \
      --steps=10 [--torch_compile] [--config.model.conv_impl=fast]
  python -m benchmarks.compare --config=experiments/configs/mnist_cascade.py --rounds=5 --steps=10

The JAX side is the trainer's jitted step (:func:`benchmarks.step_timing.build_step`); the
PyTorch side is :mod:`benchmarks.torch_reference` (same architecture, batch, S, m, loss and Adam
step; eager, or ``torch.compile`` with ``--torch_compile``), built from the same config. Both get synthetic
batches (uniform random images in [0, 1]) and the discrete branch forced on
(``cascade.discrete_start = 0``).

Interleaving: each round times ``--steps`` blocking steps of one side, then ``--steps`` of the
other, alternating the order between rounds (A B, B A, A B, ...) so that a drift in the machine's
load hits both alike; the two never run at the same time, and a short pause between blocks lets
the idle side's worker threads stop spinning. Both use all cores: XLA's CPU thread pool by default,
``torch.set_num_threads(cores)`` for PyTorch (``--torch_threads`` to change it). Per round one JSON line with the median ms of both and
``ratio = torch_ms / jax_ms`` (>= 1.0: JAX at least as fast), and ``cpu_ratio``, the same with
process CPU time per step; finally a summary line with the median ratios over rounds.

Caveat (measured, see benchmarks/HISTORY.md): on a machine whose cores are busy with other
processes, PyTorch with more than one thread slows down by up to 10x (its OpenMP workers wait at
barriers for threads that are descheduled, spinning), while XLA's pool degrades gracefully; the
ratio then says more about the load than about the step. ``--torch_threads=1`` shows the effect.
"""
from __future__ import annotations

import importlib
import json
import time
from typing import Any, Callable

from absl import app
from absl import flags
from ml_collections import config_flags
import numpy as np

from benchmarks import step_timing
from disentangle.reproduce import throughput

_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file[:variant].",
                                          lock_config=True)
_ROUNDS = flags.DEFINE_integer("rounds", 5, "Interleaved rounds.")
_STEPS = flags.DEFINE_integer("steps", 10, "Timed steps of each side per round.")
_WARMUP = flags.DEFINE_integer("warmup", 5, "Untimed steps of each side before the rounds.")
_TORCH_COMPILE = flags.DEFINE_bool("torch_compile", False, "torch.compile the PyTorch step.")
_TORCH_MODULE = flags.DEFINE_string("torch_module", "benchmarks.torch_reference",
                                    "Module with the PyTorch reference step.")
_TORCH_THREADS = flags.DEFINE_integer("torch_threads", 0,
                                      "torch.set_num_threads (0 = every core of this process).")
_FORCE_DISCRETE = flags.DEFINE_bool(
    "force_discrete", True, "CascadeVAE: set cascade.discrete_start=0 (discrete branch active).")
flags.mark_flag_as_required("config")

_PAUSE_S = 0.2  # between blocks: lets the other side's worker threads go idle


def torch_side(module_name: str, config, image_shape, *, compile_step: bool, seed: int,
               threads: int) -> tuple[Callable[[], None], dict[str, Any]]:
  """Builds the PyTorch reference step from ``config``; returns (one step, description fields).

  The reference (:mod:`benchmarks.torch_reference`) takes config-like settings: dataset (image
  size), m, S, beta_h / beta_l, lambda', learning rate, weight decay; ``torch.compile`` wraps its
  encoder and decoder. Its steps are synchronous (eager CPU), so a returned call is one whole step.

  Raises:
    ImportError: torch or the reference module is missing.
    ValueError: a config the reference cannot express.
  """
  import torch  # pylint: disable=g-import-not-at-top
  torch.set_num_threads(threads)
  ref = importlib.import_module(module_name)
  if config.method == "partedvae":
    return _parted_torch_side(ref, config, image_shape, compile_step=compile_step, seed=seed)
  if config.method != "cascadevae":
    raise ValueError(f"the PyTorch reference is CascadeVAE only, got method {config.method!r}")
  size, _, channels = image_shape
  datasets = {v["image_size"]: k for k, v in ref.DATASETS.items()}
  if channels != 1 or size not in datasets:
    raise ValueError(f"the PyTorch reference takes 1-channel {sorted(datasets)} images, got "
                     f"{tuple(image_shape)}")
  c = config.cascade
  model, optimizer = ref.build(
      datasets[size], latent_dim=config.model.latent_dim, num_discrete=c.num_discrete,
      beta_high=c.beta_high, beta_low=c.beta_low, num_relieved=c.relieved_at_start,
      lam=c.penalty, learning_rate=config.optimizer.learning_rate,
      weight_decay=config.weight_decay, compile_model=compile_step, seed=seed)
  batches = [torch.from_numpy(np.ascontiguousarray(b["image"].transpose(0, 3, 1, 2)))
             for b in throughput.synthetic_batches(image_shape, config.batch_size, 1, 4, seed)]
  cursor = [0]

  def step() -> None:
    ref.train_step(model, optimizer, batches[cursor[0] % len(batches)])
    cursor[0] += 1

  info = {"torch_version": torch.__version__, "torch_threads": torch.get_num_threads(),
          "torch_compile": bool(compile_step), "torch_module": module_name}
  return step, info


def _parted_torch_side(ref, config, image_shape, *, compile_step: bool, seed: int):
  """PartedVAE's PyTorch step (`torch_reference.parted_step`, the authors' model and loss) from
  the config: d_z, the variables' sizes, d_u, both learning rates, gammas, delta, capacities,
  temperature, sharpness, p(c); the labelled batch of ``parted.labelled_batch_size`` when
  ``parted.num_labelled > 0`` (its update first, as the authors)."""
  import torch  # pylint: disable=g-import-not-at-top
  size, _, channels = image_shape
  datasets = {v["image_size"]: k for k, v in ref.PARTED_DATASETS.items()}
  if channels != 1 or size not in datasets:
    raise ValueError(f"the PyTorch PartedVAE takes 1-channel {sorted(datasets)} images, got "
                     f"{tuple(image_shape)}")
  if compile_step:
    raise ValueError("--torch_compile is not supported for the PartedVAE reference")
  if not config.parted.unsupervised:
    raise ValueError("the PartedVAE reference times the full step (parted.unsupervised=True)")
  p = config.parted
  model, optimizers = ref.build_parted(
      datasets[size], latent_dim=config.model.latent_dim, sizes=tuple(p.discrete_sizes),
      u_dim=p.u_dim, learning_rate=config.optimizer.learning_rate,
      sup_learning_rate=p.sup_learning_rate, seed=seed, gamma_z=p.gamma_z, gamma_u=p.gamma_u,
      gamma_h=p.gamma_h, gamma_c=p.gamma_c, gamma_bc=p.gamma_bc, delta=p.bc_threshold,
      z_capacity=(p.z_capacity_min, p.z_capacity_max, p.z_capacity_steps),
      u_capacity=(p.u_capacity_min, p.u_capacity_max, p.u_capacity_steps),
      temperature=p.temperature, sharpness=(p.sharpness_start, p.sharpness_step,
                                            p.sharpness_max),
      prior_c=[list(v) for v in p.prior_c] or None)
  gen = torch.Generator().manual_seed(seed)
  shape = (config.batch_size, 1, size, size)
  batches = [torch.rand(shape, generator=gen) for _ in range(4)]
  labelled = None
  if p.num_labelled:
    nl = p.labelled_batch_size
    labelled = [(torch.rand((nl, 1, size, size), generator=gen),
                 torch.stack([torch.randint(0, k, (nl,), generator=gen)
                              for k in p.discrete_sizes], 1)) for _ in range(4)]
  cursor = [0]

  def step() -> None:
    i = cursor[0] % len(batches)
    ref.parted_step(model, optimizers, batches[i], *(labelled[i] if labelled else (None, None)))
    cursor[0] += 1

  info = {"torch_version": torch.__version__, "torch_threads": torch.get_num_threads(),
          "torch_compile": False, "torch_module": ref.__name__, "torch_step": "parted_step",
          "labelled_batch": p.labelled_batch_size if p.num_labelled else 0,
          "u_kl_torch": "sampled (authors' code)", "u_kl_jax": p.u_kl}
  return step, info


def _time(step: Callable[[], None], n: int) -> tuple[list[float], list[float]]:
  wall, cpu = [], []
  for _ in range(n):
    c0, t0 = time.process_time(), time.perf_counter()
    step()
    wall.append(time.perf_counter() - t0)
    cpu.append(time.process_time() - c0)
  return wall, cpu


def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  malloc = step_timing.configure_host()
  config = _CONFIG.value
  head = step_timing.header("compare", flags.FLAGS["config"], config, _FORCE_DISCRETE.value)
  image = throughput.image_shape(config)
  cores = _TORCH_THREADS.value or throughput.num_cores()

  bench = step_timing.build_step(config, image)
  t0 = time.perf_counter()
  torch_step, torch_info = torch_side(_TORCH_MODULE.value, config, image,
                                      compile_step=_TORCH_COMPILE.value, seed=0, threads=cores)
  torch_step()  # the first call compiles under --torch_compile
  torch_build_s = time.perf_counter() - t0
  sides: dict[str, Callable[[], None]] = {"jax": bench.step, "torch": torch_step}
  for step in sides.values():
    _time(step, _WARMUP.value)

  wall: dict[str, list[float]] = {k: [] for k in sides}
  cpu: dict[str, list[float]] = {k: [] for k in sides}
  ratios, cpu_ratios = [], []
  for r in range(_ROUNDS.value):
    order = ("jax", "torch") if r % 2 == 0 else ("torch", "jax")
    med, cpu_med = {}, {}
    for name in order:
      time.sleep(_PAUSE_S)
      w, c = _time(sides[name], _STEPS.value)
      wall[name] += w
      cpu[name] += c
      med[name] = 1e3 * float(np.median(w))
      cpu_med[name] = 1e3 * float(np.median(c))
    ratios.append(med["torch"] / med["jax"])
    cpu_ratios.append(cpu_med["torch"] / cpu_med["jax"])
    print(json.dumps({"benchmark": "compare", "config": head["config"], "round": r,
                      "order": list(order), "jax_ms": round(med["jax"], 2),
                      "torch_ms": round(med["torch"], 2), "ratio": round(ratios[-1], 3),
                      "jax_cpu_ms": round(cpu_med["jax"], 2),
                      "torch_cpu_ms": round(cpu_med["torch"], 2),
                      "cpu_ratio": round(cpu_ratios[-1], 3),
                      "loadavg": throughput.load_average()}), flush=True)

  record = dict(head)
  record.update(torch_info)
  record["jax"] = dict(step_timing.summarize_ms(wall["jax"]),
                       **step_timing.summarize_cpu_ms(cpu["jax"]),
                       compile_s=round(bench.compile_s, 2), **bench.metrics_summary())
  record["torch"] = dict(step_timing.summarize_ms(wall["torch"]),
                         **step_timing.summarize_cpu_ms(cpu["torch"]),
                         build_and_first_step_s=round(torch_build_s, 2))
  record.update(
      ratio_median=round(float(np.median(ratios)), 3),
      ratio_min=round(float(np.min(ratios)), 3),
      ratio_max=round(float(np.max(ratios)), 3),
      ratio_of_medians=round(record["torch"]["median_ms"] / record["jax"]["median_ms"], 3),
      cpu_ratio_median=round(float(np.median(cpu_ratios)), 3),
      ratio_note="torch_ms / jax_ms per round (medians of the round's steps); >= 1.0 means JAX "
                 "is at least as fast",
      cpu_ratio_note="the same with process CPU time (all threads) per step: the work each side "
                     "does, less sensitive to other processes' load, but inflated by worker "
                     "threads spin-waiting (PyTorch/OpenMP with >1 thread on a loaded machine)",
      rounds=_ROUNDS.value, steps_per_round=_STEPS.value, warmup_steps=_WARMUP.value)
  print(json.dumps(step_timing.finish_record(record, malloc)), flush=True)


if __name__ == "__main__":
  app.run(main)
