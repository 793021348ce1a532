"""One GPU command that decides: the levers of the dSprites CascadeVAE step, under one deadline.

  python -m benchmarks.gpu_levers --out=levers.jsonl [--deadline_s=480] [--runs=40,10]
  python -m benchmarks.gpu_levers --smoke --out=levers.jsonl    # a CPU in about a minute

Every figure is ONE JSON line, appended to ``--out`` (and printed) and flushed the moment it is
measured, so a command stopped at any instant keeps what it measured. One deadline
(``--deadline_s`` from the start) covers compilation, timing, fidelity, the lowerings, the
profile and the XLA-flag variants. The order is that of the decision's value:

1. ``timing``: the step after t_d at the largest run count, for the first :data:`PRIMARY`
   candidates in the order of :data:`CANDIDATES` (today's GPU settings first, then in bfloat16,
   then overlapped); on a GPU each with its compiled program's kernels (:func:`kernel_census`).
2. ``fidelity``: true float32 (:data:`REFERENCE`) trained once for a short warm-up on rendered
   dSprites, then for each timed candidate under its own settings (its precision, dtype,
   overlap) at those trained weights: the share of discrete codes of ``--fidelity_images``
   images that differ from true float32's at the same eps, beside the share that a second eps
   draw changes under true float32 (the sampling's own spread), and the relative difference of
   one update's loss. The host solve overlapped with the device's work
   (``assignment_placement='overlapped'``) changes when the assignment runs, not its arithmetic
   (``tests/test_codes.py`` checks the overlapped groups end where one program ends), so its
   line judges the step it overlaps. Then
   the other candidates, each timed and judged.
3. ``timing`` of the other phase and the other run counts; ``lowering``: the step's
   convolutions by cuDNN kind and how many read a zero-stuffed operand.
4. ``profile``: the top kernels of the chosen candidate's step, where time remains.
5. ``xla_flags``: the chosen candidate after t_d under each of :data:`XLA_FLAG_VARIANTS`, each in
   its own process, where time remains.

The closing line (``kind: "choice"``) names the chosen candidate (the fastest after t_d at the
largest run count among those within :data:`TOLERANCE` of true float32) and what bounds it: the
profile's top kernels, or "no time left". SIGTERM or SIGINT ends the command there with that
line too.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Sequence

from absl import app
from absl import flags
import jax
import numpy as np

from disentangle import config as config_lib
from disentangle.reproduce import throughput

_OUT = flags.DEFINE_string("out", None, "JSON-lines file the figures are appended to.")
_DEADLINE = flags.DEFINE_float("deadline_s", None, "Seconds from the start for everything "
                                "(default 480; with --smoke 60).")
_RUNS = flags.DEFINE_list("runs", ["40", "10"], "Runs per program (the largest decides).")
_CANDIDATES = flags.DEFINE_list("candidates", None, "Names of CANDIDATES (default: all).")
_SMOKE = flags.DEFINE_bool("smoke", False, "The smoke config, 2 runs, a few candidates (CPU).")
_WARMUP = flags.DEFINE_integer("fidelity_warmup", 200, "True-float32 updates before the codes.")
_IMAGES = flags.DEFINE_integer("fidelity_images", 512, "Images whose codes are compared.")
_TIMING_ONLY = flags.DEFINE_bool("timing_only", False, "Only stage 1 (an XLA-flag variant's run).")

# (name, config overrides) in the order of their expected value. 'gemm' is today's GPU setting
# (config.BACKEND_DEFAULTS: batched matmuls, TF32 by JAX's default precision); 'flax' the
# reference form, 'fast' the CPU's.
CANDIDATES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("gemm", {"model.conv_impl": "gemm", "assignment_placement": "step"}),
    ("gemm_bf16", {"model.conv_impl": "gemm", "model.dtype": "bfloat16",
                   "assignment_placement": "step"}),
    ("gemm_bf16_overlap", {"model.conv_impl": "gemm", "model.dtype": "bfloat16",
                           "assignment_placement": "overlapped"}),
    ("gemm_f32", {"model.conv_impl": "gemm", "model.precision": "highest"}),
    ("fast", {"model.conv_impl": "fast"}),
    ("flax", {"model.conv_impl": "flax"}),
)
# True float32: the fidelity's reference, trained and evaluated once.
REFERENCE = {"model.conv_impl": "flax", "model.precision": "highest", "model.dtype": "float32"}
SMOKE_CANDIDATES = ("gemm", "gemm_bf16")
# The first this many candidates are timed before the fidelity's reference is trained.
PRIMARY = 3
# A candidate agrees with true float32 when at most this share of the codes and this relative loss
# differ (a second eps draw changes far more codes: the fidelity lines' ``eps_codes_changed``).
TOLERANCE = {"codes_changed": 0.05, "loss_rel_diff": 0.01}
# Each in its own process after the rest, added to XLA_FLAGS.
XLA_FLAG_VARIANTS = ("--xla_gpu_enable_triton_gemm=false",
                     "--xla_gpu_enable_latency_hiding_scheduler=true")


class Stopped(BaseException):
  """SIGTERM or SIGINT arrived: the command ends with its closing line. Not an ``Exception``,
  so that no stage's handler of a failure (a candidate's timing) takes it for one."""


# The signal that arrived, if one did. The handler raises wherever the main thread is, and some
# places swallow what it raises (a garbage-collector callback of JAX's reports it as unraisable; a
# host callback of a compiled step turns it into JAX's runtime error): every check of the deadline
# and every candidate's failure handler look at this record too.
_STOPPED_BY: list[str] = []


def _reraise_if_stopped(error: Exception) -> None:
  if _STOPPED_BY:
    raise Stopped(_STOPPED_BY[0]) from error


def config_of(overrides: dict[str, Any], smoke: bool):
  """dSprites CascadeVAE ``m6`` (``m6,smoke`` with ``smoke``) with ``overrides``."""
  from disentangle import config as config_lib  # pylint: disable=g-import-not-at-top
  from experiments.configs import dsprites_cascade  # pylint: disable=g-import-not-at-top
  c = dsprites_cascade.get_config("m6,smoke" if smoke else "m6")
  with c.unlocked():
    for field, value in overrides.items():
      config_lib.set_field(c, field, value)
  return c


def kernel_census(hlo_text: str) -> dict[str, Any]:
  """The kernels of a compiled program's HLO (a GPU's): cuDNN calls by target, GEMMs (cuBLAS calls
  and Triton GEMM fusions), and pads with interior padding (a materialised dilation)."""
  targets = re.findall(r'custom_call_target="([^"]+)"', hlo_text)
  cudnn: dict[str, int] = {}
  for t in targets:
    if t.startswith("__cudnn$"):
      cudnn[t] = cudnn.get(t, 0) + 1
  gemms = sum(t.startswith("__cublas$") for t in targets) + hlo_text.count('"__triton_gemm"')
  stuffed = 0
  for padding in re.findall(r" pad\([^)]*\), padding=(\S+)", hlo_text):
    stuffed += any(len(d.split("_")) == 3 and int(d.split("_")[2]) > 0
                   for d in padding.rstrip(",").split("x"))
  return {"cudnn": cudnn, "gemms": gemms, "interior_pads": stuffed}


class Lines:
  """Appends one JSON line per figure to ``path`` (and stdout), flushed and synced at once."""

  def __init__(self, path: str | None, **common):
    self.path, self.common = path, common
    if path:
      os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)

  def __call__(self, kind: str, **record) -> dict:
    line = json.dumps({"kind": kind, **record, **self.common})
    print(line, flush=True)
    if self.path:
      with open(self.path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())
    return record


# -- fidelity at trained weights -------------------------------------------------------------
def rendered_images(count: int, seed: int) -> np.ndarray:
  """``count`` rendered dSprites images, float32 [count, 64, 64, 1], uniform factor draws."""
  from disentangle.data.datasets import dsprites  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(seed)
  factors = np.stack([rng.integers(0, n, count) for n in dsprites.FACTOR_SIZES], axis=1)
  return dsprites.render_factors(factors).astype(np.float32)[..., None]


def candidate(overrides: dict[str, Any], smoke: bool):
  """(config, method after t_d) of ``overrides`` over :func:`config_of`'s base config: what the
  fidelity trains (:data:`REFERENCE`) or judges (a candidate) under."""
  from disentangle import methods  # pylint: disable=g-import-not-at-top
  c = config_of(overrides, smoke)
  return c, methods.build(c, throughput.image_shape(c)).for_phase(True)


def settings(config) -> dict[str, Any]:
  """The settings of ``config`` that a fidelity line names."""
  return {"conv_impl": config.model.conv_impl, "dtype": config.model.dtype,
          "precision": config.model.precision,
          "assignment_placement": config_lib.resolve("assignment_placement",
                                                     config.assignment_placement)}


def codes(method, penalty: float, params, images, keys) -> list[np.ndarray]:
  """The exact discrete codes (Algorithm 1's assignment of the S decoder passes) of ``images`` at
  ``params``, one array per key of ``keys`` (the posterior sample z drawn with it); one compiled
  program for all."""
  from disentangle import assignment  # pylint: disable=g-import-not-at-top
  from disentangle import losses  # pylint: disable=g-import-not-at-top

  @jax.jit
  def unary(p, x, k):
    mean, logvar = method.encode(p["vae"], x)
    return method.unary(p["vae"], losses.reparameterize(k, mean, logvar), x)
  return [np.asarray(assignment.assign(np.asarray(unary(params, images, k)), penalty))
          for k in keys]


class Fidelity:
  """True float32 trained once (``warmup`` updates on rendered dSprites batches); then
  :meth:`of` a candidate at those weights, under the candidate's own settings."""

  def __init__(self, smoke: bool, warmup: int, num_images: int):
    self.smoke = smoke
    c, method = candidate(REFERENCE, smoke)
    self.penalty = float(c.cascade.penalty)
    state = jax.jit(method.init)(jax.random.PRNGKey(0))
    step = jax.jit(method.train_step)
    batches = rendered_images(c.batch_size * 8, seed=1).reshape(8, c.batch_size, 64, 64, 1)
    for i in range(warmup):
      state, _ = step(state, {"image": batches[i % 8]})
    self.state, self.warmup = state, warmup
    self.images = rendered_images(num_images, seed=2)
    self.batch = {"image": rendered_images(c.batch_size, seed=3)}
    self.key = jax.random.PRNGKey(4)
    self.codes, other = codes(method, self.penalty, state.params, self.images,
                              (self.key, jax.random.PRNGKey(5)))
    self.eps_spread = float(np.mean(other != self.codes))
    self.loss = float(step(state, self.batch)[1]["loss"])

  def of(self, overrides: dict[str, Any]) -> dict[str, Any]:
    c, method = candidate(overrides, self.smoke)
    (mine,) = codes(method, self.penalty, self.state.params, self.images, (self.key,))
    loss = float(jax.jit(method.train_step)(self.state, self.batch)[1]["loss"])
    return {"codes_changed": float(np.mean(mine != self.codes)),
            "eps_codes_changed": self.eps_spread,
            "loss_rel_diff": abs(loss - self.loss) / abs(self.loss),
            "settings": settings(c),
            "warmup_updates": self.warmup, "images": len(self.images)}


# -- the command ------------------------------------------------------------------------------
def profile(overrides, count: int, smoke: bool, steps: int, device: str) -> list[dict]:
  """The top kernels of ``steps`` steps after t_d of ``count`` runs under ``overrides``, from a
  `jax.profiler` trace (`disentangle.train.profiling.top_kernels`)."""
  from disentangle.train import profiling  # pylint: disable=g-import-not-at-top
  c = config_of(overrides, smoke)
  with tempfile.TemporaryDirectory() as folder:
    throughput.time_runs(c, count, steps=steps, warmup=1, only=("after",), trace_dir=folder)
    (trace,) = profiling.trace_files(folder)[-1:]
    return profiling.top_kernels(trace, k=10, device=device)


@contextlib.contextmanager
def _stop_on_signals():
  def stop(signum, frame):
    del frame
    _STOPPED_BY.append(signal.Signals(signum).name)
    raise Stopped(_STOPPED_BY[0])
  _STOPPED_BY.clear()
  old = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
  try:
    yield
  finally:
    for s, handler in old.items():
      signal.signal(s, handler)


def measure(*, emit: Callable[..., dict], smoke: bool, runs: Sequence[int], deadline: float,
            names: Sequence[str] | None = None, warmup: int = 200, num_images: int = 512,
            timing_only: bool = False, log: Callable[[str], None] = print) -> dict[str, Any]:
  """The stages of the module docstring until ``deadline`` (a ``time.time()``), each figure
  ``emit``-ted as measured; returns the closing record (also emitted)."""
  from benchmarks import gpu_lowering  # pylint: disable=g-import-not-at-top

  def left() -> float:  # seconds to the deadline; a stop that a library swallowed ends it here
    if _STOPPED_BY:
      raise Stopped(_STOPPED_BY[0])
    return deadline - time.time()
  timing = throughput.TIMING[smoke]
  wanted = names or (SMOKE_CANDIDATES if smoke else [n for n, _ in CANDIDATES])
  candidates = [(n, o) for n, o in CANDIDATES if n in wanted]
  on_gpu = jax.default_backend() == "gpu"
  largest, others = max(runs), sorted(set(runs) - {max(runs)}, reverse=True)
  timed: dict[str, dict] = {}       # candidate -> its timing after t_d at the largest count
  agree: dict[str, dict] = {}
  model_flops: dict[str, float] = {}
  closing = {"chosen": None, "bound": "no time left", "top_kernels": []}
  started = time.time()

  def time_one(name, overrides, count, phase):
    if left() <= 0:
      return None
    c = config_of(overrides, smoke)
    census: dict[str, dict] = {}
    try:
      record = throughput.time_runs(
          c, count, only=(phase,), keep_going=lambda: left() > 0, **timing,
          inspect=(lambda compiled, p: census.__setitem__(p, kernel_census(compiled.as_text())))
          if on_gpu else None).get(phase)
    except Exception as e:  # pylint: disable=broad-except  # one candidate's failure is a figure
      _reraise_if_stopped(e)
      emit("timing", candidate=name, runs=count, phase=phase, failed=str(e).splitlines()[0][:300])
      return None
    if record is None:
      return None
    if phase not in model_flops:  # the model's own multiply-adds (gpu_lowering, Flax's form)
      model_flops[phase] = gpu_lowering.read(gpu_lowering.lower_step(
          config_of({"model.conv_impl": "flax"}, smoke), throughput.image_shape(c), 1,
          phase == "after")).useful_flops
    rate = record["run_steps_per_s"]
    log(f"{name} runs={count} {phase}: {rate:.1f} run-steps/s")
    return emit("timing", candidate=name, overrides=overrides, runs=count, phase=phase,
                run_steps_per_s=rate, images_per_s=round(rate * c.batch_size, 1),
                useful_tflop_per_s=round(rate * model_flops[phase] / 1e12, 4),
                step_ms=record["step_ms"], compile_s=record["compile_s"],
                timed_steps=record["timed_steps"], kernels=census.get(phase))

  def choose():
    ok = [n for n in timed if agree.get(n, {}).get("within_tolerance")]
    best = max(ok, key=lambda n: timed[n]["run_steps_per_s"], default=None)
    closing["chosen"] = best and {"candidate": best, "overrides": dict(CANDIDATES)[best],
                                  "runs": largest, **{k: timed[best][k] for k in (
                                      "run_steps_per_s", "useful_tflop_per_s", "step_ms")},
                                  "vs_float32": agree[best]}

  reference = None

  def judge(name, overrides):
    if name in timed and reference is not None and left() > 0:
      found = reference.of(overrides)
      found["within_tolerance"] = all(found[k] <= v for k, v in TOLERANCE.items())
      agree[name] = emit("fidelity", candidate=name, **found)
      choose()

  try:
    # 1. The step after t_d at the largest count: the first PRIMARY candidates by expected value.
    for name, overrides in candidates[:PRIMARY]:
      figure = time_one(name, overrides, largest, "after")
      if figure:
        timed[name] = figure
    if timing_only:
      return closing
    # 2. Fidelity: the reference once, then each timed candidate under its own settings.
    if timed and left() > 0:
      reference = Fidelity(smoke, warmup, num_images)
      emit("reference", settings=REFERENCE, warmup_updates=warmup, images=num_images,
           loss=reference.loss, eps_codes_changed=reference.eps_spread)
      for name, overrides in candidates[:PRIMARY]:
        judge(name, overrides)
    # The other candidates, timed and judged.
    for name, overrides in candidates[PRIMARY:]:
      figure = time_one(name, overrides, largest, "after")
      if figure:
        timed[name] = figure
        judge(name, overrides)
    # 3. The other phase and run counts; the lowerings.
    for count, phase in [(largest, "before")] + [(n, p) for n in others
                                                  for p in ("after", "before")]:
      for name, overrides in candidates:
        time_one(name, overrides, count, phase)
    for name, overrides in candidates:
      if left() <= 0:
        break
      c = config_of(overrides, smoke)
      reading = gpu_lowering.read(gpu_lowering.lower_step(c, throughput.image_shape(c), 2, True))
      emit("lowering", candidate=name, phase="after", runs=2, **{
          k: v for k, v in reading.summary(2).items()
          if k in ("by_kind", "zero_stuffed", "executed_gflop_per_run_step")})
    # 4. The profile of the chosen candidate.
    if closing["chosen"] and left() > 0:
      top = profile(closing["chosen"]["overrides"], largest, smoke, steps=5,
                    device="GPU" if on_gpu else "")
      closing.update(top_kernels=top, bound="the profile's top kernels")
      emit("profile", candidate=closing["chosen"]["candidate"], runs=largest, top_kernels=top)
    # 5. XLA flag variants, each in its own process.
    if closing["chosen"] and on_gpu:
      for variant in XLA_FLAG_VARIANTS:
        if left() < 30:
          break
        env = dict(os.environ, XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} {variant}".strip())
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.gpu_levers", "--timing_only",
             f"--candidates={closing['chosen']['candidate']}", f"--runs={largest}",
             f"--deadline_s={max(left() - 10, 1):.0f}"],
            env=env, capture_output=True, text=True, timeout=max(left(), 1), check=False)
        for line in out.stdout.splitlines():
          if line.startswith('{"kind": "timing"'):
            record = json.loads(line)
            del record["kind"]
            emit("xla_flags", xla_flags=variant, **record)
  except subprocess.TimeoutExpired:
    pass
  except BaseException as e:  # pylint: disable=broad-except  # a stop, or an error a stop caused
    if not (isinstance(e, Stopped) or _STOPPED_BY):
      raise
    closing["stopped_by"] = _STOPPED_BY[0] if _STOPPED_BY else str(e)
    if not closing["top_kernels"]:
      closing["bound"] = f"stopped by {closing['stopped_by']}"
  closing["spent_s"] = round(time.time() - started, 1)
  return emit("choice", **closing, environment=throughput.environment())


def main(argv):
  del argv
  start = time.time()
  runs = [2] if _SMOKE.value else [int(r) for r in _RUNS.value]
  emit = Lines(_OUT.value, smoke=_SMOKE.value)
  deadline_s = _DEADLINE.value if _DEADLINE.value is not None else (60.0 if _SMOKE.value else 480.0)
  if not _TIMING_ONLY.value:
    emit("start", command=" ".join(sys.argv), deadline_s=deadline_s, runs=runs,
         candidates=_CANDIDATES.value or list(SMOKE_CANDIDATES if _SMOKE.value
                                               else [n for n, _ in CANDIDATES]),
         environment=throughput.environment())
  with _stop_on_signals():
    closing = measure(emit=emit, smoke=_SMOKE.value, runs=runs,
                      deadline=start + deadline_s, names=_CANDIDATES.value,
                      warmup=3 if _SMOKE.value else _WARMUP.value,
                      num_images=64 if _SMOKE.value else _IMAGES.value,
                      timing_only=_TIMING_ONLY.value, log=lambda m: print(m, file=sys.stderr))
  del closing


if __name__ == "__main__":
  app.run(main)
