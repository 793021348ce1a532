"""One process of the two-process loopback tests (tests/test_distributed.py).

python -m tests.distributed_worker PROCESS_ID PORT WORKDIR NUM_STEPS [TFDS_DATA_DIR]

Without TFDS_DATA_DIR: the dSprites smoke config. With it: the tiny MNIST-layout builder
``tiny_mnist`` prepared there (``dataset.source='tfds'``, batch 8), and the result also lists the
row indices of every read this process asked of the TFDS source, call by call ("reads").
With DISENTANGLE_TEST_SIGTERM_AT=k (k > 0) in its environment the process sends itself SIGTERM
during step k and then slows each step by 0.5 s (the preemption service agrees on a step about a
second after the notice); the result says at which step it stopped ("stopped", None when it ran
to the end). With DISENTANGLE_TEST_PLACEMENT=host|device: the tiny config on an in-memory uint8
set, with that ``dataset.placement``.
"""
import hashlib
import json
import os
import signal
import sys
import time

import jax
import numpy as np

jax.config.update("jax_num_cpu_devices", 2)

from disentangle import data  # noqa: E402
from disentangle.data.tfds import source as tfds_source  # noqa: E402
from disentangle.train import preemption  # noqa: E402
from disentangle.train import trainer  # noqa: E402
from experiments.configs import dsprites_betavae  # noqa: E402
from tests import helpers  # noqa: E402


def spy_on_tfds_reads(reads: list):
  """Every ``tfds.data_source`` opened from now on appends the rows of each read to ``reads``."""
  open_source = tfds_source.open_source

  class Recording:
    def __init__(self, inner):
      self._inner = inner
      self.dataset_info = inner.dataset_info

    def __len__(self):
      return len(self._inner)

    def __getitem__(self, key):
      reads.append([int(key)])
      return self._inner[key]

    def __getitems__(self, keys):
      reads.append([int(k) for k in keys])
      return self._inner.__getitems__(keys)

  tfds_source.open_source = lambda *args, **kwargs: Recording(open_source(*args, **kwargs))


def main():
  process_id, port, workdir, steps = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
  tfds_dir = sys.argv[5] if len(sys.argv) > 5 else None
  reads = []
  placement, dataset = os.environ.get("DISENTANGLE_TEST_PLACEMENT"), None
  if placement:
    config = helpers.tiny_config(**{"num_steps": steps, "log_every": steps,
                                    "checkpoint_every": steps, "dataset.placement": placement})
    dataset = data.ArrayImages((helpers.TinyImages().images * 255).astype(np.uint8))
  elif tfds_dir is None:
    config = dsprites_betavae.get_config(f"smoke,num_steps={steps},log_every=1,checkpoint_every=2")
  else:
    config = helpers.tiny_config(**{"num_steps": steps, "log_every": steps,
                                    "checkpoint_every": steps, "dataset.source": "tfds",
                                    "dataset.tfds_data_dir": tfds_dir,
                                    "dataset.tfds_name": "tiny_mnist"})
    spy_on_tfds_reads(reads)
  config.progress_bar = False
  config.distributed.initialize = True
  config.distributed.coordinator_address = f"localhost:{port}"
  config.distributed.num_processes = 2
  config.distributed.process_id = process_id
  sigterm_at = int(os.environ.get("DISENTANGLE_TEST_SIGTERM_AT", "0"))
  last, stopped = {}, None

  def hook(state, step):
    last["state"] = state
    if step == sigterm_at:
      signal.raise_signal(signal.SIGTERM)
    if 0 < sigterm_at <= step:
      time.sleep(0.5)

  try:
    state = trainer.train(config, workdir, dataset=dataset, hooks=[hook])
  except preemption.Preempted as e:
    state, stopped = last["state"], {"stopped": e.step, "signal": signal.Signals(e.signum).name}
  leaves = [x.addressable_data(0) for x in jax.tree_util.tree_leaves(state.params)]
  digest = hashlib.sha256(b"".join(bytes(memoryview(jax.device_get(x))) for x in leaves))
  result = {"process": jax.process_index(), "count": jax.process_count(),
            "devices": jax.device_count(), "step": int(state.step),
            "params_sha256": digest.hexdigest(), "seed": config.seed,
            "stopped": None, **(stopped or {})}
  if tfds_dir is not None:
    result["reads"] = reads
  print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
  main()
