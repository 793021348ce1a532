"""Two processes x 4 CPU devices train 8 CascadeVAE runs with the host assignment on, one run
per device, and equal the same 8 runs in one process (8 devices)."""
import json
import os
import subprocess
import sys

import pytest

from disentangle.train import runs
from disentangle.train import trainer
from tests import helpers
from tests import runs_worker


@pytest.mark.slow
def test_two_processes_train_eight_cascadevae_runs_like_one_process(tmp_path):
  port = helpers.free_port()
  env = dict(os.environ, PYTHONPATH=str(helpers.REPO), DISENTANGLE_NO_DOWNLOAD="1")
  procs = [subprocess.Popen([sys.executable, "-m", "tests.runs_worker", str(i), str(port),
                             str(tmp_path / "two")], cwd=helpers.REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True) for i in range(2)]
  results = []
  for p in procs:
    out, _ = p.communicate(timeout=540)
    assert p.returncode == 0, out[-3000:]
    results.append(json.loads([l for l in out.splitlines() if l.startswith("RESULT ")][-1][7:]))
  assert sorted(r["process"] for r in results) == [0, 1]
  assert all(r["devices"] == 8 and r["local_devices"] == 4 and r["steps"] == [3] * 4
             for r in results)
  one = runs_worker.config()
  trainer.train(one, tmp_path / "one", dataset=helpers.TinyImages())
  for cfg in runs.run_configs(one):
    name = runs.run_name(one, cfg)
    lines = (tmp_path / "two" / name / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(l)["discrete_active"] for l in lines] == [0.0, 1.0, 1.0]
    helpers.assert_same_metrics(tmp_path / "two" / name, tmp_path / "one" / name, rtol=1e-5, atol=1e-6)
