"""The training loop's own time per log step and per checkpoint, with the writes in the loop
(synchronous) and on threads (as the trainer does them).

  python -m benchmarks.loop_writes [--runs=1] [--state_mb=20] [--checkpoints=6]
      [--logs_per_checkpoint=5] [--gap_s=0.3]

Replays the trainer's writes outside the trainer, on a state of ``--state_mb`` MB of float32
arrays (on the default device) and a beta-VAE's metrics line (loss, its terms, ``kl_per_dim`` of
10, ``steps_per_sec``) per run directory (``--runs``):

- ``sync``: each log step ``writers.MetricWriter.write`` per run (the line appended, the
  TensorBoard events written and fsync'ed), each checkpoint ``checkpoint.Checkpointer.save``
  returning once orbax has written and renamed it;
- ``async``: each log step ``writers.BackgroundWriter.write`` per run (the hand-over), each
  checkpoint ``BackgroundWriter.flush`` per run (lines written, ``metrics.jsonl`` fsync'ed) and
  ``Checkpointer(asynchronous=True).save`` (the host copy; orbax writes on its threads).

Between log steps the loop's thread sleeps ``--gap_s`` (the training steps, during which the
threads write). Prints one JSON line: per mode the median and max milliseconds the loop's thread
spent per log step (``log_ms``) and per checkpoint (``checkpoint_ms``, with the log step at the
same step), ``end_ms`` (closing: the last save waited for), and the load average before and
after beside it.
"""
from __future__ import annotations

import json
import os
import statistics
import tempfile
import time

from absl import app
from absl import flags
from absl import logging
import jax
import jax.numpy as jnp
import numpy as np

from disentangle.train import checkpoint
from disentangle.train import writers

_RUNS = flags.DEFINE_integer("runs", 1, "run directories (one metrics line each per log step)")
_STATE_MB = flags.DEFINE_float("state_mb", 20.0, "size of the checkpointed state")
_CHECKPOINTS = flags.DEFINE_integer("checkpoints", 6, "checkpoints per mode")
_LOGS = flags.DEFINE_integer("logs_per_checkpoint", 5, "log steps per checkpoint")
_GAP = flags.DEFINE_float("gap_s", 0.3, "seconds of training between log steps (sleep)")


def _state(mb: float):
  """A state of ``mb`` MB: float32 arrays of a few sizes, as a model's layers and Adam's moments."""
  n = int(mb * 2 ** 20 / 4)
  sizes = [n // 2, n // 4, n // 8, n - n // 2 - n // 4 - n // 8]
  return {"params": {f"w{i}": jnp.arange(s, dtype=jnp.float32) for i, s in enumerate(sizes)},
          "step": jnp.int32(0)}


def _metrics(step: int) -> dict:
  rng = np.random.default_rng(step)
  return {"loss": np.float32(rng.uniform()), "recon": np.float32(rng.uniform()),
          "kl": np.float32(rng.uniform()), "kl_per_dim": rng.uniform(size=10).astype(np.float32),
          "beta": np.float32(4.0), "steps_per_sec": float(rng.uniform(10, 100))}


def replay(folder: str, background: bool) -> dict:
  """The loop's thread's milliseconds per log step and per checkpoint for one mode."""
  dirs = [os.path.join(folder, f"run_{i}") for i in range(_RUNS.value)]
  for d in dirs:
    os.makedirs(d)
  plain = [writers.MetricWriter(d) for d in dirs]
  ws = [writers.BackgroundWriter(w) for w in plain] if background else plain
  ckpt = checkpoint.Checkpointer(folder, keep=2, asynchronous=background)
  state = jax.block_until_ready(_state(_STATE_MB.value))
  log_ms, ckpt_ms = [], []
  step = 0
  for _ in range(_CHECKPOINTS.value):
    for k in range(_LOGS.value):
      time.sleep(_GAP.value)
      step += 1
      lines = [_metrics(step) for _ in ws]  # the device_get'ed values (not timed)
      began = time.perf_counter()
      for w, m in zip(ws, lines):
        w.write(step, m)
      if k == _LOGS.value - 1:  # the checkpoint's step
        if background:
          for w in ws:
            w.flush()
        ckpt.save(step, state)
        ckpt_ms.append(1e3 * (time.perf_counter() - began))
      else:
        log_ms.append(1e3 * (time.perf_counter() - began))
  began = time.perf_counter()
  for w in ws:
    w.close()
  ckpt.close()
  end_ms = 1e3 * (time.perf_counter() - began)
  r = lambda xs: round(xs, 2)  # noqa: E731
  return {"log_ms": r(statistics.median(log_ms)), "log_ms_max": r(max(log_ms)),
          "checkpoint_ms": r(statistics.median(ckpt_ms)), "checkpoint_ms_max": r(max(ckpt_ms)),
          "end_ms": r(end_ms)}


def main(argv) -> None:
  del argv
  logging.set_verbosity(logging.WARNING)  # orbax's info records
  load_before = os.getloadavg()
  out = {"runs": _RUNS.value, "state_mb": _STATE_MB.value, "checkpoints": _CHECKPOINTS.value,
         "logs_per_checkpoint": _LOGS.value, "gap_s": _GAP.value,
         "device": jax.devices()[0].platform}
  with tempfile.TemporaryDirectory() as tmp:
    replay(os.path.join(tmp, "warmup"), background=True)  # imports, orbax's first save
    for mode in ("sync", "async"):
      out[mode] = replay(os.path.join(tmp, mode), background=mode == "async")
  out["loadavg_before"] = [round(x, 2) for x in load_before]
  out["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
  print(json.dumps(out), flush=True)


if __name__ == "__main__":
  app.run(main)
