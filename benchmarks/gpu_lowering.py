"""The train step's convolutions as XLA:GPU runs them, read from the lowered program on any host.

  python -m benchmarks.gpu_lowering [--runs=1,2] [--conv_impls=flax,fast,gemm,auto]
      [--dtype=float32] [--config=dsprites_cascade:m6]

A GPU gets the step as the HLO that JAX lowers on every backend. XLA:GPU hands each convolution to
cuDNN (openxla/xla, ``xla/service/gpu/transforms/conv_rewriter.cc``), trying in turn:

- a *backward-input* kernel: no feature groups, the kernel a ``reverse`` of its spatial
  dimensions, stride 1 and no kernel (window) dilation; the input dilation becomes the stride;
- a *backward-filter* kernel: no feature groups, stride 1, no input (base) dilation, and not
  shaped like a forward convolution (the "kernel" no smaller than the output, or dilated); the
  kernel dilation becomes the stride;
- else a *forward* kernel, for which ``conv_padding_legalization`` first materialises any input
  or kernel dilation as an interior-padded operand: the convolution then multiplies the
  zero-stuffed operand in full.

The forward of ``nn.ConvTranspose`` (input-dilated, kernel not reversed) never matches a backward
kernel, and under ``vmap`` over runs every convolution is grouped (``feature_group_count`` = N)
so none does: the input and kernel gradients of a stride-2 convolution then run zero-stuffed too.
:func:`read` classifies every convolution of an HLO module by these rules and counts the
multiply-adds each executes against those it needs (:func:`convolution_macs`); dots are GEMMs
(cuBLAS), executed as counted. :func:`lower_step` lowers the trainer's step of a config as a GPU
would get it (its ``'auto'`` settings resolved for the GPU) on whatever host runs it.

The command (nothing is compiled or run): for each ``model.conv_impl`` (``auto``: the GPU's
choice), each count of runs (vmapped: grouped convolutions) and each CascadeVAE phase (before /
after t_d), the step's :func:`readings`. ONE JSON line per (form, runs, phase): the convolutions
by cuDNN kind, how many run over a zero-stuffed operand, GFLOP per run-step executed and useful
(the form's own), and ``executed_over_model``: executed FLOPs over the model's useful FLOPs, those
of Flax's lowering without its stuffed zeros (the same reference for every form). A last line
gives each form's after / before t_d ratio of executed FLOPs. After t_d the lowered step holds
the encoder's forward twice, the costs' (without gradient) and the update's
(`disentangle.train.codes`): the same operations on the same operands, which XLA's
common-subexpression pass merges before a backend runs the program (the compiled CPU step has as
many convolutions and dots as with one forward), so the figures after t_d count one encoder
forward that no device executes. Flags are parsed by ``argparse``, so
that importing the module (`benchmarks.gpu_levers` does) defines no absl flag.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import math
import re
from typing import Any, Sequence

FORWARD, BACKWARD_INPUT, BACKWARD_FILTER = "forward", "backward_input", "backward_filter"

_INSTRUCTION = re.compile(
    r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+) = (?P<type>\w+\[[^\]]*\])\S* "
    r"(?P<op>[\w\-]+)\((?P<operands>[^)]*)\)(?P<attrs>.*)$")
_CALL = re.compile(r"(?:to_apply|body|calls)=%?([\w.\-]+)")
_BRANCHES = re.compile(r"(?:branch_computations=\{([^}]*)\}|"
                       r"(?:true|false)_computation=%?([\w.\-]+))")
_COMPUTATION = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*(?:\([^{]*\)\s*->\s*[^{]*)?\{\s*$")
_TYPE_PREFIX = re.compile(r"\w+\[[^\]]*\](\{[^}]*\})?\s*")


def _dims(array_type: str) -> tuple[int, ...]:
  inside = array_type[array_type.index("[") + 1:array_type.index("]")]
  return tuple(int(d) for d in inside.split(",") if d)


def _window_field(window: str, key: str, rank: int, default: int) -> list[int]:
  m = re.search(rf"\b{key}=([\dx]+)", window)
  return [int(v) for v in m.group(1).split("x")] if m else [default] * rank


def _padding(window: str, rank: int) -> list[tuple[int, int]]:
  m = re.search(r"\bpad=([\d_x\-]+)", window)
  if not m:
    return [(0, 0)] * rank
  return [tuple(int(v) for v in p.split("_")) for p in m.group(1).split("x")]


@dataclasses.dataclass(frozen=True)
class Convolution:
  """One convolution of the module, classified by XLA:GPU's rules (module docstring)."""
  name: str
  kind: str                 # FORWARD, BACKWARD_INPUT or BACKWARD_FILTER
  zero_stuffed: bool        # a forward kernel over a materialised dilated operand
  groups: int               # feature_group_count x batch_group_count
  executed_macs: int        # what the GPU multiplies (zeros of a stuffed operand included)
  useful_macs: int          # the layer's own products: none with a stuffed zero
  shape: str                # output shape, for reports


def _taps(out: int, k: int, stride: int, pad_lo: int, base: int) -> int:
  """Pairs (output position, kernel tap) of one spatial axis that do not read a stuffed zero: an
  input (base) dilation b leaves one position in b real. Taps on the border padding count, as in
  any convolution's multiply-adds (cuDNN multiplies them too)."""
  return sum((o * stride + t - pad_lo) % base == 0 for o in range(out) for t in range(k))


def convolution_macs(lhs: Sequence[int], rhs: Sequence[int], out: Sequence[int],
                     labels: str, window: str) -> tuple[int, int, bool, bool, bool, bool]:
  """(executed MACs as a forward kernel over materialised dilations, useful MACs, dilated input,
  dilated kernel, any stride > 1, looks like a forward convolution) of one convolution.

  Args:
    lhs, rhs, out: the operand and output shapes.
    labels: HLO ``dim_labels`` (e.g. ``b01f_01io->b01f``).
    window: HLO ``window`` attribute (``size=4x4 stride=2x2 pad=1_1x1_1 lhs_dilate=2x2 ...``).
  """
  operands, out_labels = labels.split("->")
  lhs_labels, rhs_labels = operands.split("_")
  rank = len([c for c in out_labels if c.isdigit()])
  strides = _window_field(window, "stride", rank, 1)
  base = _window_field(window, "lhs_dilate", rank, 1)
  kernel_dilation = _window_field(window, "rhs_dilate", rank, 1)
  pads = _padding(window, rank)
  per_output = rhs[rhs_labels.index("i")] * out[out_labels.index("b")] * out[out_labels.index("f")]
  executed = useful = per_output
  kernel_fits = True
  for d in range(rank):
    k, o = rhs[rhs_labels.index(str(d))], out[out_labels.index(str(d))]
    executed *= o * ((k - 1) * kernel_dilation[d] + 1)
    useful *= _taps(o, k, strides[d], pads[d][0], base[d])
    kernel_fits &= k <= o
  looks_forward = (lhs[lhs_labels.index("b")] == out[out_labels.index("b")]
                   and rhs[rhs_labels.index("o")] == out[out_labels.index("f")] and kernel_fits)
  return (executed, useful, any(b > 1 for b in base), any(w > 1 for w in kernel_dilation),
          any(s > 1 for s in strides), looks_forward)


@dataclasses.dataclass
class Reading:
  """What :func:`read` found: every convolution, and the dots' multiply-adds."""
  convolutions: list[Convolution]
  dot_macs: int

  @property
  def zero_stuffed(self) -> list[Convolution]:
    return [c for c in self.convolutions if c.zero_stuffed]

  @property
  def executed_flops(self) -> int:
    return 2 * (sum(c.executed_macs for c in self.convolutions) + self.dot_macs)

  @property
  def useful_flops(self) -> int:
    return 2 * (sum(c.useful_macs for c in self.convolutions) + self.dot_macs)

  def summary(self, runs: int = 1) -> dict[str, Any]:
    """Counts by kind, zero-stuffed convolutions, and GFLOP per run-step, executed and useful."""
    kinds: dict[str, int] = {}
    for c in self.convolutions:
      kinds[c.kind] = kinds.get(c.kind, 0) + 1
    return {"convolutions": len(self.convolutions), "by_kind": kinds,
            "zero_stuffed": len(self.zero_stuffed),
            "executed_gflop_per_run_step": round(self.executed_flops / runs / 1e9, 3),
            "useful_gflop_per_run_step": round(self.useful_flops / runs / 1e9, 3),
            "executed_over_useful": round(self.executed_flops / max(self.useful_flops, 1), 3)}


def read(hlo_text: str) -> Reading:
  """Every convolution and dot of an HLO module's text, as often as the entry computation runs it
  (a computation called twice counts twice; a loop body once)."""
  computations: dict[str, list[str]] = {}
  entry, current = None, None
  for line in hlo_text.splitlines():
    m = _COMPUTATION.match(line)
    if m and " = " not in line:
      current = m.group(2)
      computations[current] = []
      entry = current if m.group(1) else entry
    elif current is not None and line.strip() == "}":
      current = None
    elif current is not None:
      computations[current].append(line)
  shapes, opcodes = {}, {}
  for lines in computations.values():
    for line in lines:
      m = _INSTRUCTION.match(line)
      if m:
        shapes[m.group("name")], opcodes[m.group("name")] = _dims(m.group("type")), m.group("op")
  if entry is None:
    raise ValueError("no ENTRY computation in the HLO text")
  convolutions, dot_macs = [], 0

  def walk(name: str) -> None:
    nonlocal dot_macs
    for line in computations.get(name, ()):
      for callee in _CALL.findall(line):
        walk(callee)
      for group, single in _BRANCHES.findall(line):
        for callee in ([c.strip().lstrip("%") for c in group.split(",")] if group else [single]):
          walk(callee)
      m = _INSTRUCTION.match(line)
      if not m or m.group("op") not in ("convolution", "dot"):
        continue
      operands = [o.strip().lstrip("%") for o in
                  _TYPE_PREFIX.sub("", m.group("operands")).split(",")]
      out, attrs = _dims(m.group("type")), m.group("attrs")
      if m.group("op") == "dot":
        contracting = re.search(r"lhs_contracting_dims=\{([\d,]*)\}", attrs).group(1)
        lhs = shapes[operands[0]]
        dot_macs += math.prod(out) * math.prod(lhs[int(i)] for i in contracting.split(",") if i)
        continue
      convolutions.append(_classify(m.group("name"), out, operands, attrs, shapes, opcodes))

  walk(entry)
  return Reading(convolutions, dot_macs)


def _classify(name, out, operands, attrs, shapes, opcodes) -> Convolution:
  window = re.search(r"window=\{([^}]*)\}", attrs).group(1)
  labels = re.search(r"dim_labels=(\S+?)(?:,|$)", attrs).group(1)
  feature_groups = int((re.search(r"feature_group_count=(\d+)", attrs) or [0, 1])[1])
  batch_groups = int((re.search(r"batch_group_count=(\d+)", attrs) or [0, 1])[1])
  executed, useful, base_dilated, kernel_dilated, strided, looks_forward = convolution_macs(
      shapes[operands[0]], shapes[operands[1]], out, labels, window)
  reversed_kernel = opcodes.get(operands[1]) == "reverse" or "rhs_reversal=" in window
  kind = FORWARD
  if feature_groups == 1 and not strided:
    if reversed_kernel and not kernel_dilated:
      kind = BACKWARD_INPUT
    elif not base_dilated and not looks_forward:
      kind = BACKWARD_FILTER
  stuffed = kind == FORWARD and (base_dilated or kernel_dilated)
  return Convolution(name=name, kind=kind, zero_stuffed=stuffed,
                     groups=feature_groups * batch_groups,
                     executed_macs=executed if stuffed or kind == FORWARD else useful,
                     useful_macs=useful, shape="x".join(map(str, out)))


def as_on(config, backend: str):
  """A copy of ``config`` with every ``'auto'`` implementation choice of
  ``config.BACKEND_DEFAULTS`` resolved for ``backend``, as that backend's trainer resolves it
  (`config.resolve_run`)."""
  from disentangle import config as config_lib  # pylint: disable=g-import-not-at-top
  return config_lib.copy(config_lib.resolve_run(config, backend))


def lower_step(config, image_shape: Sequence[int], runs: int, phase, *,
               backend: str = "gpu") -> str:
  """The HLO text of the trainer's jitted step of ``phase`` for ``runs`` runs of ``config``, with
  its ``'auto'`` settings resolved for ``backend`` (:func:`as_on`), lowered on this host from
  abstract state and a host batch (nothing is initialised or compiled). The solve's placement is
  the compiled step's: the overlapped placement runs the same costs and updates as programs of
  two groups of runs (`disentangle.train.codes`), the same convolutions."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top

  from disentangle import methods  # pylint: disable=g-import-not-at-top
  from disentangle.train import runs as runs_lib  # pylint: disable=g-import-not-at-top
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  c = as_on(config, backend)
  with c.unlocked():
    c.num_seeds, c.mesh.num_devices, c.assignment_placement = runs, 1, "step"
  cfgs = runs_lib.run_configs(c)
  program = runs_lib.Program(c, cfgs)
  method = methods.build(c, image_shape, mesh=program.mesh)
  keys = jnp.stack([jax.random.PRNGKey(x.seed) for x in cfgs])
  init = (lambda k: method.init(k[0])) if runs == 1 else jax.vmap(method.init)
  state = jax.eval_shape(init, keys)
  lead = (runs,) if runs > 1 else ()
  batch = {"image": jax.ShapeDtypeStruct(lead + (c.batch_size,) + tuple(image_shape),
                                         np.float32)}
  step, rest = trainer.phase_step(program, method, phase)
  return step.lower(state, batch, *rest).as_text(dialect="hlo")


def readings(config, image_shape, impls, runs_list, dtype="float32") -> dict[tuple, Reading]:
  """{(impl, runs, phase): Reading} of the step (module docstring)."""
  out = {}
  for impl in impls:
    c = config.copy_and_resolve_references()
    with c.unlocked():
      c.model.conv_impl, c.model.dtype = impl, dtype
    for runs in runs_list:
      for phase in ("before", "after"):
        out[impl, runs, phase] = read(lower_step(c, image_shape, runs, phase == "after"))
  return out


def main(argv: Sequence[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--runs", default="1,2", help="Runs per program (vmapped when > 1).")
  parser.add_argument("--conv_impls", default="flax,fast,gemm,auto",
                      help="model.conv_impl values ('auto': the GPU's).")
  parser.add_argument("--dtype", default="float32", help="model.dtype.")
  parser.add_argument("--config", default="dsprites_cascade:m6",
                      help="experiments.configs module:variant.")
  args = parser.parse_args(argv)
  from disentangle import config as config_lib  # pylint: disable=g-import-not-at-top
  from disentangle.reproduce import throughput  # pylint: disable=g-import-not-at-top
  name, variant = args.config.split(":")
  config = importlib.import_module(f"experiments.configs.{name}").get_config(variant)
  image_shape = throughput.image_shape(config)
  runs_list = [int(r) for r in args.runs.split(",")]
  wanted = args.conv_impls.split(",")
  found = readings(config, image_shape, list(dict.fromkeys(["flax"] + wanted)), runs_list,
                   args.dtype)
  for (impl, runs, phase), reading in found.items():
    if impl not in wanted:
      continue
    model = found["flax", runs, phase].useful_flops
    print(json.dumps(dict(
        config=args.config, conv_impl=impl,
        resolved=config_lib.resolve("model.conv_impl", impl, backend="gpu"), runs=runs,
        phase=phase, dtype=args.dtype, **reading.summary(runs),
        model_gflop_per_run_step=round(model / runs / 1e9, 3),
        executed_over_model=round(reading.executed_flops / model, 3))))
  print(json.dumps({"after_over_before_executed": {
      f"{impl}/runs={runs}": round(found[impl, runs, "after"].executed_flops
                                   / found[impl, runs, "before"].executed_flops, 3)
      for impl in wanted for runs in runs_list}}))


if __name__ == "__main__":
  main()
