"""What a checkpoint's checks cost beside its save and restore, and what the non-finite watch costs.

  python -m benchmarks.checkpoint_checks [--state=cascade] [--state_mb=20] [--rounds=5]
      [--dir=DIR] [--kept=100]

The state is the dSprites CascadeVAE smoke config's train state (``--state=cascade``: parameters
and Adam's moments) or ``--state_mb`` MB of float32 normal draws (``--state=random``, as trained
weights: nothing compresses). Each round, in ``--dir`` (default: a temporary folder under the
current directory, on the disk the runs use):

- ``save_ms``: `checkpoint.Checkpointer.save` (synchronous: until the step is complete), the
  checksums included; ``checksums_ms``: `integrity.write` of the same step alone (each file read
  and hashed, ``checksums.json`` written atomically);
- ``restore_ms``: `Checkpointer.restore` of that step, both checks included; ``verify_ms``:
  `integrity.verify` alone (each file read and hashed); ``finite_ms``: `integrity.nonfinite_leaf`
  of the restored state (its first call, compiling, is ``finite_first_ms``);
- ``watch_add_us``: `nonfinite.Watch.add` a step (the loop's only per-step work of the watch);
  ``check_losses_ms``: `Watch.check_losses` of ``--kept`` steps' losses, read in one call (done
  at the steps that log, evaluate or save).

Prints one JSON line: the medians over rounds, the checks as fractions of a save
(``checksums_ms / save_ms``) and of a restore, the state's size and files, and the load average.
"""
from __future__ import annotations

import json
import os
import pathlib
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
from disentangle.train import integrity
from disentangle.train import nonfinite

_STATE = flags.DEFINE_enum("state", "cascade", ["cascade", "random"], "what is checkpointed")
_STATE_MB = flags.DEFINE_float("state_mb", 20.0, "size of the random state")
_ROUNDS = flags.DEFINE_integer("rounds", 5, "saves and restores timed")
_DIR = flags.DEFINE_string("dir", None, "where to write (default: a temporary folder here)")
_KEPT = flags.DEFINE_integer("kept", 100, "losses kept between checks")


def _state():
  if _STATE.value == "random":
    n = int(_STATE_MB.value * 2 ** 20 / 4)
    rng = np.random.default_rng(0)
    sizes = [n // 2, n // 4, n // 8, n - n // 2 - n // 4 - n // 8]
    return {"params": {f"w{i}": jnp.asarray(rng.normal(size=s).astype(np.float32))
                       for i, s in enumerate(sizes)}, "step": jnp.int32(0)}
  from disentangle import methods  # pylint: disable=g-import-not-at-top
  from experiments.configs import dsprites_cascade  # pylint: disable=g-import-not-at-top
  config = dsprites_cascade.get_config("smoke")
  return methods.build(config, (64, 64, 1)).init(jax.random.PRNGKey(0))


def _ms(fn) -> tuple[float, object]:
  began = time.perf_counter()
  out = fn()
  return 1e3 * (time.perf_counter() - began), out


def measure(folder: pathlib.Path) -> dict:
  state = jax.block_until_ready(_state())
  rows = {k: [] for k in ("save_ms", "checksums_ms", "restore_ms", "verify_ms", "finite_ms")}
  ckpt = checkpoint.Checkpointer(folder, keep=2)
  ckpt.save(0, state)  # orbax's first save (imports, threads)
  finite_first_ms, _ = _ms(lambda: integrity.nonfinite_leaf(state))
  for r in range(1, _ROUNDS.value + 1):
    ms, _ = _ms(lambda: ckpt.save(r, state))
    rows["save_ms"].append(ms)
    step_dir = ckpt.directory / str(r)
    rows["checksums_ms"].append(_ms(lambda: integrity.write(step_dir))[0])
    ms, restored = _ms(lambda: jax.block_until_ready(ckpt.restore(state, step=r)))
    rows["restore_ms"].append(ms)
    rows["verify_ms"].append(_ms(lambda: integrity.verify(step_dir))[0])
    rows["finite_ms"].append(_ms(lambda: integrity.nonfinite_leaf(restored))[0])
  files = [p for p in (ckpt.directory / str(_ROUNDS.value)).rglob("*") if p.is_file()]
  ckpt.close()
  out = {k: round(statistics.median(v), 2) for k, v in rows.items()}
  out["finite_first_ms"] = round(finite_first_ms, 2)
  out["checksums_of_save"] = round(out["checksums_ms"] / out["save_ms"], 3)
  out["checks_of_restore"] = round((out["verify_ms"] + out["finite_ms"]) / out["restore_ms"], 3)
  out["checkpoint_mb"] = round(sum(p.stat().st_size for p in files) / 2 ** 20, 2)
  out["files"] = len(files)
  out["state_mb"] = round(sum(x.nbytes for x in jax.tree_util.tree_leaves(state)) / 2 ** 20, 2)
  return out


def watch_costs() -> dict:
  """The watch's per-step ``add`` and a check of ``--kept`` losses (as the loop reads them)."""
  watch = nonfinite.Watch(None, lambda: None, "-")
  losses = [jnp.float32(i) for i in range(_KEPT.value)]
  jax.block_until_ready(losses)
  adds, checks = [], []
  for _ in range(_ROUNDS.value):
    began = time.perf_counter()
    for i, loss in enumerate(losses):
      watch.add(i, loss)
    adds.append(1e6 * (time.perf_counter() - began) / len(losses))
    checks.append(_ms(lambda: watch.check_losses(len(losses)))[0])
  return {"watch_add_us": round(statistics.median(adds), 3),
          "check_losses_ms": round(statistics.median(checks), 3), "kept": _KEPT.value}


def main(argv) -> None:
  del argv
  logging.set_verbosity(logging.WARNING)  # orbax's info records
  load_before = os.getloadavg()
  out = {"state": _STATE.value, "rounds": _ROUNDS.value, "device": jax.devices()[0].platform}
  with tempfile.TemporaryDirectory(dir=_DIR.value or ".") as tmp:
    out.update(measure(pathlib.Path(tmp)))
  out.update(watch_costs())
  out["loadavg_before"] = [round(x, 2) for x in load_before]
  out["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
  print(json.dumps(out), flush=True)


if __name__ == "__main__":
  app.run(main)
