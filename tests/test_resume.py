"""An interrupted run resumes bit for bit: every run and every interruption in one case at least.

Every case trains 9 steps (checkpoints at 3, 6, 9; metrics lines at 2, 3, 4, 6, 8, 9), is
interrupted (once, or first by a full disk at its first write and then by another interruption),
asserts what each interruption leaves (its exception, checkpoints, lines, handlers, threads),
then the same call (``trainer.train`` again on the same folder) ends with the
parameters, optimiser states included, bitwise those of a straight run of the same config, and
the same metrics lines. The straight runs are trained once per module and shared by the cases of
the same config. The interruptions:

- ``kill``: a hook raises at step 4 (the checkpoint of step 3 exists, step 4 is lost);
- ``sigterm`` / ``sigint``: the signal arrives during step 4: the run stops after it with a
  checkpoint of step 4 (two seeds in one program share it, each has its metrics) and the
  handlers in place before come back (`preemption.Signals`);
- ``error_in_loop``: an error raised from a hook at step 5 (as an evaluator's or a writer's
  would be): the metric writers and the checkpointer are closed, no thread of the run is left;
- ``sigkill_in_checkpoint``: a child process trains (the CascadeVAE run) and is killed (SIGKILL) inside orbax's
  asynchronous write of checkpoint 6 (its temporary folder written, not yet renamed), once the
  loop has gone on to step 7 (a save that held the loop would never let it): checkpoint 3 is
  the newest complete one and the lines of steps 2-6 are on the disk (synced before the save
  started); the resumed run drops those past 3 and logs them again;
- ``full_disk_<where>``: ENOSPC at the step-6 checkpoint, at the step-4 metrics line or at the
  first write (config.json): the run stops with the error, step 3 (or nothing) stays;
- ``deadline_step`` / ``deadline_evaluation``: an evaluation every 3 steps (0.2 s each); the
  clock passes the deadline during step 4, or at step 6 the deadline is 0.1 s away, less than
  the last evaluation took: that evaluation is not started, the run stops with checkpoint 6 and
  the resumed run evaluates step 6 first. Either way `DeadlineReached` (exit status 124).

The runs: CascadeVAE; FFVAE (attributes, two optimisers); PartedVAE (two optimisers,
their plateau states with epochs of 2 steps: the step-3 checkpoint holds a half-accumulated
epoch, the labelled stream); a beta-VAE whose Adam is followed by reduce_on_plateau (the
schedule's state in the optimiser state), evaluated every 3 steps; and two seeds in one program, a host run resumed on
device data (``dataset.placement`` is a resumable field).
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import jax
import numpy as np
from orbax.checkpoint._src.path import atomicity
import pytest

from disentangle import atomic
from disentangle import methods
from disentangle.methods import betavae
from disentangle.methods import optimizers
from disentangle.train import checkpoint
from disentangle.train import preemption
from disentangle.train import trainer
from disentangle.train import writers
from tests import helpers

STEPS = 9
ENOSPC = OSError(28, os.strerror(28))  # errno.ENOSPC


class PlateauBetaVAE(betavae.BetaVAE):
  """beta-VAE whose Adam is followed by reduce_on_plateau; no loss ever counts as an improvement
  after the first (atol huge), so the scale halves after every patience = 2 bad steps."""

  def make_optimizers(self):
    return {"vae": optimizers.optimizer("vae", optimizers.with_plateau(
        optimizers.adam_from_config(self.config), factor=0.5, patience=2, atol=1e9))}


methods.register("betavae_plateau", PlateauBetaVAE, "betavae", betavae.default_config,
                 betavae.RULES)

# run -> (config, dataset); every config: 9 steps on one device.
RUNS = {
    "cascadevae": lambda: (helpers.tiny_config("cascadevae", **_NINE), helpers.TinyImages()),
    "ffvae": lambda: (helpers.tiny_config("ffvae", **_NINE), helpers.TinyAttributeImages()),
    "partedvae": lambda: (helpers.parted_config(**_NINE), helpers.TinyDigits()),
    "plateau": lambda: (helpers.tiny_config("betavae_plateau", **_NINE), helpers.TinyImages()),
    "two_seeds_device_data": lambda: (helpers.tiny_config("betavae", num_seeds=2, **_NINE,
                                                          **{"dataset.placement": "host"}),
                                      helpers.tiny_uint8()),
}
_NINE = {"mesh.num_devices": 1, "num_steps": STEPS}


def _leaves(state):
  return [np.asarray(x) for x in jax.tree_util.tree_leaves(state)]




def _run_dirs(config):
  return [""] if config.num_seeds == 1 else [f"seed_{config.seed + i}"
                                             for i in range(config.num_seeds)]


class _Killed(Exception):
  pass


class _Clock:
  """A `time.time()` the test moves (`preemption` reads the deadline's clock through it)."""

  def __init__(self):
    self.now = 1000.0

  def time(self):
    return self.now


class _SlowEvaluator:
  """An evaluator of one metric whose run takes ``seconds`` of wall time."""

  def __init__(self, seconds, calls):
    self.seconds, self.calls = seconds, calls

  def run(self, params, step):
    time.sleep(self.seconds)
    self.calls.append(step)
    return {"eval/mean_param": float(np.mean(jax.tree_util.tree_leaves(params)[0]))}


def _evaluations(calls):
  return {"evaluator_factory": lambda method, run_dir, i: _SlowEvaluator(0.2, calls)}


def _config_and_data(run, evaluated):
  config, data = RUNS[run]()
  if evaluated:
    config.eval_every = 3
  return config, data


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
  """``straight(run, evaluated)``: (final state, folder, evaluated steps) of the uninterrupted
  run, trained once."""
  done = {}

  def get(run, evaluated=False):
    if (run, evaluated) not in done:
      config, data = _config_and_data(run, evaluated)
      calls = []
      folder = tmp_path_factory.mktemp(f"straight_{run}")
      state = trainer.train(config, folder, dataset=data,
                            **(_evaluations(calls) if evaluated else {}))
      done[run, evaluated] = state, folder, calls
    return done[run, evaluated]

  return get


# -- the interruptions: each trains `config` into `run` until it stops and checks what is left --
def _kill(config, data, run, monkeypatch, calls=None, **kw):
  del monkeypatch, calls
  plateau = config.method == "betavae_plateau"

  def kill_after_4(state, step):
    if step == 4:  # the checkpoint of step 3 exists; step 4 is lost
      if plateau:  # step 1 sets the best loss, steps 2, 3 do not improve: halved at step 3
        assert float(optimizers.plateau_scale(state.opt_state["vae"])) == 0.5
      raise _Killed()

  with pytest.raises(_Killed):
    trainer.train(config, run, dataset=data, hooks=[kill_after_4], **kw)
  assert helpers.steps(run / "checkpoints") == [3]


def _signal(signum):
  def interrupt(config, data, run, monkeypatch, **kw):
    del monkeypatch
    before = {s: signal.getsignal(s) for s in preemption.SIGNALS}

    def send(state, step):
      del state
      if step == 4:
        signal.raise_signal(signum)

    with pytest.raises(preemption.Preempted) as e:
      trainer.train(config, run, dataset=data, hooks=[send], **kw)
    assert (e.value.step, e.value.signum, e.value.exit_status) == (4, signum, 128 + signum)
    assert str(e.value).startswith(f"stopped by {signal.Signals(signum).name} at step 4 of 9, "
                                   f"checkpoint 4 in {run / 'checkpoints'}")
    assert {s: signal.getsignal(s) for s in preemption.SIGNALS} == before
    assert helpers.steps(run / "checkpoints") == [3, 4]
    assert all([l["step"] for l in helpers.lines(run / r)] == [2, 3, 4] for r in _run_dirs(config))
  return interrupt


def _error_in_loop(config, data, run, monkeypatch, **kw):
  threads = set(threading.enumerate())  # library pools started by earlier runs stay
  closed = []
  for cls in (writers.MetricWriter, checkpoint.Checkpointer):
    monkeypatch.setattr(cls, "close", lambda self, real=cls.close: (closed.append(self),
                                                                     real(self))[1])

  def fail(state, step):
    del state
    if step == 5:
      raise RuntimeError("the evaluator failed at step 5")

  with pytest.raises(RuntimeError, match="evaluator failed"):
    trainer.train(config, run, dataset=data, hooks=[fail], **kw)
  assert sorted(type(c).__name__ for c in closed) == ["Checkpointer", "MetricWriter"]
  # asyncio's default executor ('asyncio_N' workers of an orbax event loop) starts on first use
  # and stays for the process, like the pools above, whichever run in the worker came first.
  assert [t.name for t in threading.enumerate()
          if t not in threads and not t.name.startswith("asyncio_")] == []
  assert [l["step"] for l in helpers.lines(run)] == [2, 3, 4]
  assert helpers.steps(run / "checkpoints") == [3]


_KILLED_IN_CHECKPOINT = """
import os, pathlib, signal, sys, threading
import jax
jax.config.update("jax_num_cpu_devices", 8)  # as in the tests' process (conftest)
from orbax.checkpoint._src.path import atomicity
from disentangle.train import trainer
from tests import test_resume
run, past_7 = pathlib.Path(sys.argv[1]), threading.Event()
finalize = atomicity.AtomicRenameTemporaryPath.finalize
async def killing_finalize(self, *args, **kwargs):
  if str(self.get_final()).rsplit("/", 1)[-1] == "6":  # on orbax's thread, the loop going on
    os.kill(os.getpid(), signal.SIGKILL) if past_7.wait(60) else os._exit(3)
  return await finalize(self, *args, **kwargs)
atomicity.AtomicRenameTemporaryPath.finalize = killing_finalize
config, data = test_resume.RUNS[sys.argv[2]]()
trainer.train(config, run, dataset=data, hooks=[lambda state, step: step == 7 and past_7.set()])
os._exit(4)
"""


def _sigkill_in_checkpoint(config, data, run, monkeypatch, **kw):
  del config, data, monkeypatch, kw
  root = helpers.REPO
  proc = subprocess.run([sys.executable, "-c", _KILLED_IN_CHECKPOINT, str(run), "cascadevae"],
                        cwd=root, env=dict(os.environ, PYTHONPATH=str(root)),
                        capture_output=True, text=True, timeout=600, check=False)
  assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr[-3000:])
  assert helpers.steps(run / "checkpoints") == [3]
  assert any(p.name.startswith("6.") for p in (run / "checkpoints").iterdir())  # the partial one
  assert [l["step"] for l in helpers.lines(run)][:4] == [2, 3, 4, 6]


def _line_count(path) -> int:
  """Lines of ``path`` so far (0 when absent)."""
  return len(open(path).read().splitlines()) if os.path.exists(path) else 0


def _full_disk(where):
  def interrupt(config, data, run, monkeypatch, **kw):
    if where == "checkpoint":
      real = atomicity.AtomicRenameTemporaryPath.finalize

      async def finalize(self, *args, **kwargs):
        if "6" in str(self.get_final()).rsplit("/", 1)[-1]:
          raise ENOSPC
        return await real(self, *args, **kwargs)
      monkeypatch.setattr(atomicity.AtomicRenameTemporaryPath, "finalize", finalize)
    elif where == "metrics":
      real_open = open

      def opener(path, mode="r", *args, **kwargs):
        if "a" in mode and _line_count(path) >= 2:  # steps 2 and 3 are written, step 4 is not
          raise ENOSPC
        return real_open(path, mode, *args, **kwargs)
      monkeypatch.setattr(writers, "open", opener, raising=False)
    else:
      def full(*args, **kwargs):
        raise ENOSPC
      monkeypatch.setattr(os, "replace", full)
    with pytest.raises(atomic.WriteError, match="No space left on device"):
      trainer.train(config, run, dataset=data, **kw)
    assert helpers.steps(run / "checkpoints") == ([] if where == "config" else [3])
  return interrupt


def _deadline(where):
  def interrupt(config, data, run, monkeypatch, calls, **kw):
    clock = _Clock()
    monkeypatch.setattr(preemption, "time", clock)
    deadline = clock.now + 60

    def move(state, step):
      del state
      if where == "step" and step == 4:
        clock.now = deadline
      if where == "evaluation" and step == 5:
        clock.now = deadline - 0.1

    before = {s: signal.getsignal(s) for s in preemption.SIGNALS}
    with pytest.raises(preemption.DeadlineReached) as e:
      trainer.train(config, run, dataset=data, hooks=[move], deadline=deadline, **kw)
    stop = 4 if where == "step" else 6
    assert (e.value.step, e.value.exit_status) == (stop, 124)
    assert str(e.value).startswith(f"stopped at the deadline at step {stop} of 9, checkpoint "
                                   f"{stop} in {run / 'checkpoints'}")
    assert {s: signal.getsignal(s) for s in preemption.SIGNALS} == before
    assert helpers.steps(run / "checkpoints") == [3, stop]
    assert calls == [3]  # the evaluation of step 6 was not started
    assert (run / trainer.PENDING_EVAL).exists() == (where == "evaluation")
  return interrupt


INTERRUPTIONS = {
    "kill": _kill, "sigterm": _signal(signal.SIGTERM), "sigint": _signal(signal.SIGINT),
    "error_in_loop": _error_in_loop, "sigkill_in_checkpoint": _sigkill_in_checkpoint,
    "full_disk_checkpoint": _full_disk("checkpoint"),
    "full_disk_metrics": _full_disk("metrics"), "full_disk_config": _full_disk("config"),
    "deadline_step": _deadline("step"), "deadline_evaluation": _deadline("evaluation"),
}
EVALUATED = ("plateau",)  # the runs evaluated every 3 steps (the deadlines' evaluations)
# (run, its interruptions in order): each run resumed once at least, after each interruption.
MATRIX = [
    ("plateau", ("deadline_step",)), ("plateau", ("deadline_evaluation",)), ("plateau", ("kill",)),
    ("cascadevae", ("sigint",)), ("cascadevae", ("sigkill_in_checkpoint",)),
    ("ffvae", ("full_disk_config", "error_in_loop")),
    ("partedvae", ("full_disk_metrics",)),
    ("cascadevae", ("full_disk_checkpoint",)),
    ("two_seeds_device_data", ("sigterm",)),
]
@pytest.mark.slow
@pytest.mark.parametrize("run,interruptions", MATRIX,
                         ids=[f"{r}-{'-'.join(i)}" for r, i in MATRIX])
def test_an_interrupted_run_resumes_bitwise(tmp_path, monkeypatch, straight, run, interruptions):
  evaluated = run in EVALUATED
  straight_state, straight_dir, straight_calls = straight(run, evaluated)
  config, data = _config_and_data(run, evaluated)
  calls = []
  kw = _evaluations(calls) if evaluated else {}
  for interruption in interruptions:
    INTERRUPTIONS[interruption](config, data, tmp_path, monkeypatch,
                                **(dict(kw, calls=calls) if evaluated else kw))
    monkeypatch.undo()
  if run == "two_seeds_device_data":
    config.dataset.placement = "device"  # a resumable field: the host run goes on on the device
  resumed = trainer.train(config, tmp_path, dataset=data, **kw)
  for a, b in zip(_leaves(straight_state), _leaves(resumed), strict=True):
    np.testing.assert_array_equal(a, b)
  for r in _run_dirs(config):
    assert helpers.lines(tmp_path / r) == helpers.lines(straight_dir / r)
  train_lines = [l for l in helpers.lines(tmp_path / _run_dirs(config)[0])
                 if not any(k.startswith("eval/") for k in l)]
  assert [l["step"] for l in train_lines] == [2, 3, 4, 6, 8, 9]  # none lost, none twice
  if evaluated:
    assert straight_calls == [3, 6, 9] and calls == [3, 6, 9]
    assert not (tmp_path / trainer.PENDING_EVAL).exists()
  if run == "plateau":  # halved at steps 3, 5, 7 and 9
    assert float(optimizers.plateau_scale(straight_state.opt_state["vae"])) == 0.5 ** 4
  saved = json.loads((tmp_path / _run_dirs(config)[0] / "config.json").read_text())
  assert saved["seed"] == config.seed and saved["method"] == config.method
