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

# The emulator, run in its own process with two additions (`_SERVE`):
# - its server (Python's `http.server`) takes one connection at a time and queues 5, while
#   tensorstore opens up to 32 at once (its default concurrency) and gives up on requests left
#   waiting: each connection gets a thread, and the requests are still handled one at a time;
# - it ignores generation preconditions, on which the checkpoints' OCDBT manifests rely (every
#   commit is a read-modify-write of the manifest with ``ifGenerationMatch``; Cloud Storage
#   answers 412 to all but one of concurrent commits, which then retry): an upload named in its
#   query (``uploadType=media``, tensorstore's) with ``ifGenerationMatch`` is refused with 412
#   unless the object's generation matches (0: absent), as Cloud Storage documents. Uploads that
#   name the object in their body (gcsfs's multipart uploads, the reproduce lock's exclusive
#   create) are not checked;
# - its downloads lack the ``x-goog-generation`` header from which tensorstore reads an object's
#   generation (the precondition of the next manifest commit): it is added.
_SERVE = """
import http.server, sys, threading
http.server.HTTPServer = http.server.ThreadingHTTPServer
http.server.HTTPServer.request_queue_size = 256
from gcp_storage_emulator import exceptions
from gcp_storage_emulator.handlers import objects
insert = objects.insert

def insert_if_generation_matches(request, response, storage, *args, **kwargs):
  match, name = request.query.get("ifGenerationMatch"), request.query.get("name")
  if match and name:
    try:
      current = str(storage.get_file_obj(request.params["bucket_name"], name[0])["generation"])
    except exceptions.NotFound:
      current = "0"
    if current != match[0]:
      response.status = 412
      response.json({"error": {"code": 412, "message": "Precondition Failed"}})
      return
  return insert(request, response, storage, *args, **kwargs)

objects.insert = insert_if_generation_matches
download = objects.download

def download_with_generation(request, response, storage, *args, **kwargs):
  result = download(request, response, storage, *args, **kwargs)
  try:
    obj = storage.get_file_obj(request.params["bucket_name"], request.params["object_id"])
    response["x-goog-generation"] = str(obj["generation"])
    response["x-goog-metageneration"] = str(obj.get("metageneration", "1"))
  except exceptions.NotFound:
    pass
  return result

objects.download = download_with_generation
from gcp_storage_emulator import server
one_at_a_time, handle = threading.Lock(), server.Router.handle

def handle_alone(self, method):
  with one_at_a_time:
    return handle(self, method)

server.Router.handle = handle_alone
server.create_server("127.0.0.1", int(sys.argv[1]), in_memory=True,
                     default_bucket=sys.argv[2]).run()
"""


def free_port() -> int:
  """A port of 127.0.0.1 on which nothing listens (the system's choice)."""
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
  port = free_port()
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
      time.sleep(0.05)
    yield url
  finally:
    proc.terminate()
    try:
      proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
      proc.kill()
      proc.wait()
