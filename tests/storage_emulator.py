"""A Cloud Storage emulator on 127.0.0.1 for the tests of runs on a bucket.

``gcp-storage-emulator`` (from the package index; the test extras install it) serves Cloud
Storage's JSON API from memory; it runs as its own process, so that the runs' processes (the
multi-process and command-line tests) and the test process see the same bucket. The clients are
the real ones: gcsfs (epath's ``gs://``, through ``STORAGE_EMULATOR_HOST``) and tensorstore
(orbax's arrays, through ``TENSORSTORE_GCS_HTTP_URL``).

What this emulator does not implement, and so what these tests do not check: generation
preconditions (``ifGenerationMatch``: it overwrites where Cloud Storage answers 412), the
``moveTo`` call (gcsfs falls back to copy and delete) and the storage-layout API of
hierarchical-namespace buckets (gcsfs's probe is switched off,
``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false``).
"""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request

BUCKET = "disentangle-test"

# The emulator's server answers one request at a time and, as Python's `http.server` does,
# queues 5 connections; tensorstore opens up to 32 at once (its default concurrency), so the
# queue is made longer in the emulator's process.
_SERVE = """
import http.server, sys
http.server.HTTPServer.request_queue_size = 256
from gcp_storage_emulator.server import create_server
create_server("127.0.0.1", int(sys.argv[1]), in_memory=True, default_bucket=sys.argv[2]).run()
"""


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def environment(url: str) -> dict:
  """The variables that point every client of this process and its children at ``url``."""
  return {"STORAGE_EMULATOR_HOST": url,  # gcsfs (and google-cloud-storage)
          "TENSORSTORE_GCS_HTTP_URL": url,  # tensorstore's gcs kvstore (orbax's arrays)
          "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}  # no storage-layout API to probe


@contextlib.contextmanager
def running(log_path):
  """Start the emulator with an empty bucket `BUCKET`; yield its URL; stop it."""
  port = _free_port()
  url = f"http://127.0.0.1:{port}"
  with open(log_path, "w") as log:
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVE, str(port), BUCKET],
        stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
  try:
    deadline = time.time() + 60
    while True:
      try:
        with urllib.request.urlopen(url + "/", timeout=2) as response:
          if response.read() == b"OK":
            break
      except OSError:
        pass
      if proc.poll() is not None or time.time() > deadline:
        raise RuntimeError(f"the storage emulator did not start (log: {log_path})")
      time.sleep(0.2)
    yield url
  finally:
    proc.terminate()
    try:
      proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
      proc.kill()
      proc.wait()
