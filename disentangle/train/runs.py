"""The runs of one program: seeds crossed with a sweep, and how they lie on a 2-D device mesh.

A config trains R = P x N runs at once: the P points of ``config.sweep`` (default none: one
point) crossed with the N seeds ``seed, ..., seed + N - 1`` of ``config.num_seeds``. Each run is
an ordinary single-run config (:func:`run_configs`: ``num_seeds = 1``, ``sweep = ''``, its own
seed and values), written to its own run directory (:func:`run_dirs`).

**Sweeps.** ``config.sweep = "ffvae.alpha=0|50|100;ffvae.gamma=10|20"``: fields separated by
``;``, values by ``|``, the grid is their product in the order written (the last field varying
fastest), then the seeds. A swept field is a number that changes neither shapes nor the
program's structure (:func:`check_sweep`): a float of the method's section or of ``optimizer``
(loss weights, capacities, lambda', the learning rate), or an iteration count of the method's
schedule (``methods.step_fields``). In the stacked program each run carries its values as
arrays: ``vmap`` builds the method inside the trace from a config holding the run's values
(:func:`traced_config`), ``unroll`` builds one method per run from its own config (the same
constants as the run alone).

**Mesh.** Runs lie on a mesh ``(runs, data)`` (:func:`mesh_shape`): each device holds R / runs
runs and a 1 / data share of their batches. Default: runs first (the largest divisor of both R
and the device count), the remaining devices split the batch.
"""
from __future__ import annotations

import copy
import itertools
import math
import pathlib
from typing import Callable

import jax
from jax.sharding import PartitionSpec as P
import ml_collections
import numpy as np

from disentangle import config as config_lib
from disentangle import methods
from disentangle import sharding
from disentangle.train import codes
from disentangle.train import input_pipeline
from disentangle.train import mesh as mesh_lib
from disentangle.train import seeds

FIELD_SEP, VALUE_SEP = ";", "|"
# Sweepable float fields outside the method's section.
SWEEPABLE_SECTIONS = ("optimizer",)
# Step fields that switch programs on the host (one switch step for every run of a program).
NOT_SWEEPABLE = {"cascade.discrete_start": "the step at which the program switches"}


def parse_sweep(text: str) -> list[tuple[str, list[str]]]:
  """``'a.b=1|2;c.d=3'`` -> ``[('a.b', ['1', '2']), ('c.d', ['3'])]`` (ConfigError if bad)."""
  out = []
  for part in (text or "").split(FIELD_SEP):
    part = part.strip()
    if not part:
      continue
    field, eq, values = part.partition("=")
    field = field.strip()
    values = [v.strip() for v in values.split(VALUE_SEP) if v.strip()]
    if not eq or not field or not values:
      raise config_lib.ConfigError(
          f"config field 'sweep': {part!r} must read field=v1{VALUE_SEP}v2..., fields "
          f"separated by {FIELD_SEP!r}")
    if field in dict(out):
      raise config_lib.ConfigError(f"config field 'sweep' names {field!r} twice")
    out.append((field, values))
  return out


def sweepable(config, field: str) -> bool:
  """Whether ``field`` may vary between the runs of one program (module docstring)."""
  section = methods.spec(config.method).section
  flat = methods.schema_fields(config.method)
  if field not in flat or field in NOT_SWEEPABLE:
    return False
  value = flat[field]
  if field in methods.step_fields(config.method):
    return True
  is_float = isinstance(value, float) and not isinstance(value, bool)
  return is_float and field.split(".")[0] in (section,) + SWEEPABLE_SECTIONS


def check_sweep(config) -> list[tuple[str, list[str]]]:
  """The parsed ``config.sweep``; ConfigError for an unknown or a non-sweepable field."""
  grid = parse_sweep(config.sweep)
  flat = methods.schema_fields(config.method)
  for field, values in grid:
    if field not in flat:
      raise config_lib.unknown_field(field, flat)
    if not sweepable(config, field):
      why = NOT_SWEEPABLE.get(field, "it may change shapes or the program's structure")
      raise config_lib.ConfigError(
          f"config field 'sweep' cannot vary {field!r} ({why}; sweepable: the method's float "
          f"fields, optimizer.*, its iteration counts): run its values {values} as separate "
          f"programs")
  return grid


def run_configs(config) -> list[ml_collections.ConfigDict]:
  """Each run's own config (grid points x seeds, in that order) from the validated ``config``.

  A sweep's values enter here: each point's config is validated once (a value outside its
  field's rule names the field and the value, ConfigError); the seeds change nothing else.
  """
  grid = check_sweep(config)
  fields = [f for f, _ in grid]
  out = []
  for point in itertools.product(*(values for _, values in grid)):
    for i in range(config.num_seeds):
      c = config_lib.copy(config)
      c.seed, c.num_seeds, c.sweep = config.seed + i, 1, ""
      config_lib.apply_overrides(c, dict(zip(fields, point)))
      if grid and i == 0:
        methods.validate(c)
      out.append(c)
  return out


def swept_values(config, cfgs) -> dict[str, list]:
  """{field: each run's value} of the swept fields."""
  return {f: [config_lib.get_field(c_i, f) for c_i in cfgs] for f, _ in check_sweep(config)}


def run_name(config, cfg) -> str:
  """A run's directory name: ``seed_<s>``, after its swept values (``field=value_...``)."""
  parts = [f"{f}={config_lib.get_field(cfg, f):g}" for f, _ in check_sweep(config)]
  return "_".join(parts + [f"seed_{cfg.seed}"])


def run_dirs(config, workdir: pathlib.Path, cfgs) -> list[pathlib.Path]:
  """One directory per run; a single run is the workdir itself."""
  if len(cfgs) == 1:
    return [workdir]
  return [workdir / run_name(config, c) for c in cfgs]


def make_source(dataset, spec, config, cfgs, runs_sharding=None):
  """The batches of every run: one source per distinct seed (runs of a sweep share them).

  One run: this process's share of the batch (as ever). Several runs: ``[runs, batch, ...]``
  stacked; with runs on a mesh axis (``runs_sharding``), only the runs and rows this process's
  devices hold.
  """
  if len(cfgs) == 1:
    return input_pipeline.make_source(dataset, spec, global_batch=config.batch_size,
                                      seed=config.seed, process_index=jax.process_index(),
                                      process_count=jax.process_count())
  if runs_sharding is None:
    run_span, row_share, row_count = slice(0, len(cfgs)), jax.process_index(), jax.process_count()
  else:
    run_span, rows = mesh_lib.local_block(runs_sharding, len(cfgs), config.batch_size)
    width = rows.stop - rows.start
    row_share, row_count = rows.start // width, config.batch_size // width
  local = cfgs[run_span]
  distinct = sorted({c.seed for c in local})
  sources = [input_pipeline.make_source(dataset, spec, global_batch=config.batch_size, seed=s,
                                        process_index=row_share, process_count=row_count)
             for s in distinct]
  return input_pipeline.MultiSeedSource(sources, index=[distinct.index(c.seed) for c in local])


def mesh_shape(config, num_runs: int, num_devices: int) -> tuple[int, int]:
  """(runs, data) axis sizes over ``num_devices`` devices; ConfigError naming the numbers.

  ``config.mesh.runs`` / ``config.mesh.data`` (0 = chosen): runs first, i.e. the runs axis is
  the largest divisor of both R and the devices, the data axis the rest.
  """
  m = config.mesh
  runs, data = int(m.runs), int(m.data)
  if runs and data and runs * data != num_devices:
    raise config_lib.ConfigError(
        f"config fields 'mesh.runs' x 'mesh.data' ({runs} x {data}) must equal the {num_devices} "
        f"devices used (mesh.num_devices = {m.num_devices})")
  for name, size in (("mesh.runs", runs), ("mesh.data", data)):
    if size and num_devices % size:
      raise config_lib.ConfigError(f"config field {name!r} ({size}) must divide the "
                                   f"{num_devices} devices used")
  if not runs:
    runs = num_devices // data if data else math.gcd(num_runs, num_devices)
  data = num_devices // runs
  if num_runs % runs:
    raise config_lib.ConfigError(
        f"the {num_runs} runs (num_seeds = {config.num_seeds} x sweep points) are not divisible "
        f"by config field 'mesh.runs' ({runs})")
  if config.batch_size % data:
    raise config_lib.ConfigError(
        f"config field 'batch_size' ({config.batch_size}) must be divisible by the data axis "
        f"({data} devices: mesh.data, or the {num_devices} devices over {runs} runs)")
  return runs, data


def traced_config(config, values: dict):
  """A copy of ``config`` whose fields ``values`` (dotted name -> array) hold traced values."""
  c = ml_collections.ConfigDict(config.to_dict(), type_safe=False)
  for field, value in values.items():
    config_lib.set_field(c, field, value)
  return c


def values_arrays(config, cfgs) -> dict:
  """{swept field: numpy [R] of each run's value} (float32, or int32 for iteration counts)."""
  out = {}
  for field, vals in swept_values(config, cfgs).items():
    dtype = np.int32 if all(isinstance(v, int) for v in vals) else np.float32
    out[field] = np.asarray(vals, dtype)
  return out


class Runs:
  """The methods of several runs in one phase, and functions mapped over their leading axis.

  Args:
    build: ``config -> method``.
    cfgs: the runs' configs (:func:`run_configs`), two or more (one run's step is the method's
      own, :meth:`Program.runs_step`).
    how: ``'vmap'`` or ``'unroll'`` (`disentangle.train.seeds`).
    phase: the method's phase (``method.phase`` / ``method.for_phase``; e.g. CascadeVAE's
      discrete branch on or off), None for a method of one phase.
    concrete: ``unroll`` with every run's own config as constants (the same program as the run
      alone); False: every run reads its swept values from ``values`` (a program shared by
      devices that hold different runs). ``vmap`` always reads ``values``.
  """

  def __init__(self, build: Callable, cfgs, how: str, *, phase=None, concrete: bool = True):
    if how not in config_lib.SEED_LAYOUTS_RESOLVED:
      raise ValueError(f"run layout must be one of {config_lib.SEED_LAYOUTS_RESOLVED}, "
                       f"got {how!r}")
    self.how = how
    self.built_for = lambda c: build(c).for_phase(phase)  # the method of one run, in this phase
    self.cfgs = [config_lib.resolve_run(c) for c in cfgs]  # a traced config holds resolved values
    self.base = self.built_for(self.cfgs[0])  # the method of every run, up to swept values
    self.concrete = concrete and how == "unroll"
    self.built = [self.built_for(c) for c in self.cfgs] if self.concrete else None

  def group(self, lo: int, hi: int) -> "Runs":
    """The runs ``[lo, hi)`` (their stacked state, batch and values sliced alike)."""
    out = copy.copy(self)
    out.cfgs = self.cfgs[lo:hi]
    out.built = None if self.built is None else self.built[lo:hi]
    return out

  def method_of(self, values):
    """The method of the run whose swept values are ``values`` (traced, or numpy on the host)."""
    return self.built_for(traced_config(self.cfgs[0], values)) if values else self.base

  def methods(self, values, n: int) -> list:
    """The ``n`` runs' methods, unrolled (``values``: their swept values, stacked)."""
    if self.built is not None:
      return self.built
    return [self.method_of(seeds.take(values, i)) for i in range(n)]

  def each(self, fn: Callable) -> Callable:
    """``(state, batch, values, *args) -> fn(method, state, batch, *args)`` of every run,
    stacked: slice i of every stacked argument goes to run i (``vmap`` or unrolled)."""
    if self.how == "vmap":
      return jax.vmap(lambda s, b, v, *a: fn(self.method_of(v), s, b, *a))

    def unrolled(state, batch, values, *args):
      n = jax.tree_util.tree_leaves(batch)[0].shape[0]
      return seeds.stack([fn(m, seeds.take(state, i), seeds.take(batch, i),
                             *seeds.take(args, i))
                          for i, m in enumerate(self.methods(values, n))])

    return unrolled


class Program:
  """The runs of ``config`` on their mesh: shardings and the compiled step of each phase.

  Args:
    config: the whole config (validated); ``cfgs``: its runs (:func:`run_configs`).

  Raises:
    ConfigError: a mesh that does not fit (:func:`mesh_shape`), before anything compiles.
  """

  def __init__(self, config, cfgs):
    # resolved as the trainer resolves it (itself there), for a program built outside a run
    self.config, self.cfgs = config_lib.resolve_run(config), cfgs
    available = len(jax.devices())
    n = available if config.mesh.num_devices in (0, None) else config.mesh.num_devices
    if n > available:
      raise config_lib.ConfigError(f"config field 'mesh.num_devices' asks for {n} devices but "
                                   f"only {available} exist")
    self.runs_axis, self.data_axis = mesh_shape(config, len(cfgs), n)
    multi = len(cfgs) > 1
    # One block of runs: the data axis alone (as ever); else a (runs, data) mesh.
    self.mesh = (mesh_lib.make_mesh(n) if self.runs_axis == 1 else
                 mesh_lib.make_runs_mesh(self.runs_axis, self.data_axis))
    self.manual = self.runs_axis > 1 and self.data_axis == 1  # each device steps its own runs
    # Where the codes are solved, decided once with every condition (`codes.placement`): the
    # runs' configs, and so their config.json, hold the outcome.
    where = codes.placement(self.config, len(cfgs), mesh=self.mesh, manual=self.manual,
                            processes=jax.process_count())
    self.config, self.cfgs = (_placed(c, where) for c in (self.config, cfgs))
    self.repl = mesh_lib.replicated(self.mesh)
    if self.runs_axis > 1:
      self.states = jax.sharding.NamedSharding(self.mesh, P(sharding.RUNS_AXIS))
      self.batches = jax.sharding.NamedSharding(self.mesh,
                                                P(sharding.RUNS_AXIS, sharding.DATA_AXIS))
    else:
      self.states = self.repl
      self.batches = mesh_lib.batch_sharding(self.mesh, 1 if multi else 0)

  def values(self) -> dict:
    """The swept values, one per run, laid out like the states (empty for one run)."""
    if len(self.cfgs) == 1:
      return {}
    return jax.device_put(values_arrays(self.config, self.cfgs), self.states)

  def runs_step(self, image_shape, phase) -> Callable:
    """The step of ``phase`` over the program's runs, before jit (`disentangle.train.codes`):
    one run's takes ``(state, batch)``; several runs' take their swept values too,
    ``(state, batch, values)``, over the leading axis (:class:`Runs`), on each device's block of
    runs where the mesh has a runs axis (:func:`on_runs_axis`)."""
    if len(self.cfgs) == 1:
      return codes.step(self.method(image_shape, phase))
    step = codes.runs_step(self.runs(image_shape, phase))
    return on_runs_axis(step, self.mesh) if self.manual else step

  def method(self, image_shape, phase):
    """The one run's method in ``phase``."""
    inner_mesh = None if self.manual else self.mesh  # inside shard_map every axis is manual
    return methods.build(self.cfgs[0], image_shape, mesh=inner_mesh).for_phase(phase)

  def runs(self, image_shape, phase) -> Runs:
    """The several runs' methods in ``phase`` (:class:`Runs`)."""
    inner_mesh = None if self.manual else self.mesh  # inside shard_map every axis is manual
    layout = seeds.layout(self.config)
    return Runs(lambda c: methods.build(c, image_shape, mesh=inner_mesh), self.cfgs, layout,
                phase=phase, concrete=not self.manual)


def _placed(configs, where: str):
  """``configs`` (one config or a list) with ``assignment_placement = where``."""
  if isinstance(configs, list):
    return [_placed(c, where) for c in configs]
  if configs.assignment_placement == where:
    return configs
  out = config_lib.copy(configs)
  out.assignment_placement = where
  return out


def on_runs_axis(step: Callable, mesh) -> Callable:
  """``step`` on each device's block of runs (a mesh ``(runs, data)`` with data = 1): every
  axis manual, so the host callbacks of each device run on its own runs."""
  spec = P(sharding.RUNS_AXIS)
  return jax.shard_map(step, mesh=mesh, in_specs=(spec, spec, spec), out_specs=spec)
