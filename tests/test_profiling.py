"""`disentangle.train.profiling`: a profile of a few steps on request, and its top kernels."""
from __future__ import annotations

import gzip
import json

import pytest

from disentangle.train import profiling
from disentangle.train import trainer
from tests import helpers


def test_top_kernels_sums_each_kernel_on_the_device_processes(tmp_path):
  events = [
      {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/device:GPU:0"}},
      {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "/host:CPU"}},
      {"ph": "X", "pid": 1, "name": "gemm", "dur": 30.0},
      {"ph": "X", "pid": 1, "name": "gemm", "dur": 10.0},
      {"ph": "X", "pid": 1, "name": "fusion", "dur": 10.0},
      {"ph": "X", "pid": 2, "name": "host_loop", "dur": 1000.0},
      {"ph": "i", "pid": 1, "name": "marker"},
  ]
  trace = tmp_path / "perfetto_trace.json.gz"
  with gzip.open(trace, "wt") as f:
    json.dump({"traceEvents": events}, f)
  top = profiling.top_kernels(trace, k=5)
  assert top == [
      {"name": "gemm", "calls": 2, "total_us": 40.0, "mean_us": 20.0, "share": 0.8},
      {"name": "fusion", "calls": 1, "total_us": 10.0, "mean_us": 10.0, "share": 0.2}]
  assert profiling.top_kernels(trace, k=1, device="")[0]["name"] == "host_loop"


@pytest.mark.slow
def test_a_run_with_profile_steps_writes_a_trace_of_those_steps(tmp_path):
  config = helpers.tiny_config("betavae", **{"profile.num_steps": 2, "profile.first_step": 2})
  trainer.train(config, tmp_path, dataset=helpers.TinyImages())
  (trace,) = profiling.trace_files(tmp_path / profiling.FOLDER)
  assert list(trace.parent.glob("*.xplane.pb"))  # TensorBoard's profile plugin reads these
  top = profiling.top_kernels(trace, device="")
  assert top and abs(sum(t["share"] for t in top) - 1) <= 1  # shares of the whole trace
  assert all(t["total_us"] > 0 and t["calls"] >= 1 for t in top)
  off = tmp_path / "off"
  trainer.train(helpers.tiny_config("betavae"), off, dataset=helpers.TinyImages())
  assert not (off / profiling.FOLDER).exists()
