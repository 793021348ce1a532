"""One process of the two-process loopback test (tests/test_distributed.py).

python -m tests.distributed_worker PROCESS_ID PORT WORKDIR NUM_STEPS
"""
import hashlib
import json
import sys

import jax

jax.config.update("jax_num_cpu_devices", 2)

from disentangle.train import trainer  # noqa: E402
from experiments.configs import dsprites_betavae  # noqa: E402


def main():
  process_id, port, workdir, steps = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
  config = dsprites_betavae.get_config(f"smoke,num_steps={steps},log_every=1,checkpoint_every=2")
  config.progress_bar = False
  config.distributed.initialize = True
  config.distributed.coordinator_address = f"localhost:{port}"
  config.distributed.num_processes = 2
  config.distributed.process_id = process_id
  state = trainer.train(config, workdir)
  leaves = [x.addressable_data(0) for x in jax.tree_util.tree_leaves(state.params)]
  digest = hashlib.sha256(b"".join(bytes(memoryview(jax.device_get(x))) for x in leaves))
  print("RESULT " + json.dumps({"process": jax.process_index(), "count": jax.process_count(),
                                "devices": jax.device_count(), "step": int(state.step),
                                "params_sha256": digest.hexdigest()}), flush=True)


if __name__ == "__main__":
  main()
