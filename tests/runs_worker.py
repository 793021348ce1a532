"""One process of the two-process runs test (tests/test_runs_distributed.py).

python -m tests.runs_worker PROCESS_ID PORT WORKDIR

Two processes of 4 CPU devices each train the 8 CascadeVAE runs of :func:`config` (one per
device, the assignment on from step 2), each process solving the assignments of its own runs.
"""
import json
import sys

import jax

from disentangle.train import trainer
from tests import helpers


def config(**overrides):
  """The 8 runs: 4 seeds x 2 values of beta_l, t_d = 1, 3 steps, a metrics line each step."""
  return helpers.tiny_config("cascadevae", num_seeds=4, sweep="cascade.beta_low=0.5|2",
                             num_steps=3, log_every=1, **{"cascade.discrete_start": 1},
                             **overrides)


def main():
  process_id, port, workdir = int(sys.argv[1]), sys.argv[2], sys.argv[3]
  c = config()
  c.distributed.initialize = True
  c.distributed.coordinator_address = f"localhost:{port}"
  c.distributed.num_processes = 2
  c.distributed.process_id = process_id
  state = trainer.train(c, workdir, dataset=helpers.TinyImages())
  result = {"process": jax.process_index(), "devices": jax.device_count(),
            "local_devices": jax.local_device_count(),
            "steps": [int(s.data.reshape(-1)[0]) for s in state.step.addressable_shards]}
  print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
  # Here, not at import: the test imports `config` from this module, and a device count set at
  # import would become the whole test session's.
  jax.config.update("jax_num_cpu_devices", 4)
  main()
