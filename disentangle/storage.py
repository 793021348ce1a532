"""A bucket checked before a command uses it: one line naming why it cannot be, in seconds.

A workdir or a data folder on Cloud Storage (``gs://bucket/path``, `disentangle.paths`) that
cannot be used would otherwise surface deep in a run, after gcsfs's retries (about 50 s), as a
long traceback or a line naming a URL. `check` asks the storage once, within `TIMEOUT_S` seconds
in all, for the first object under the path (what every run needs: ``storage.objects.list``),
and raises `StorageError`, one line naming the flag and the cause:

- **storage unreachable**: the storage host cannot be resolved, refuses the connection or does
  not answer in time;
- **no credentials**: none found (application default credentials), or refused (HTTP 401);
- **no such bucket** (HTTP 404);
- **permission denied** (HTTP 403).

The storage is Cloud Storage's JSON API, or ``$STORAGE_EMULATOR_HOST`` where it is set (gcsfs
and the tests' emulator use it; no credentials are sent there). Other schemes are not checked.
"""
from __future__ import annotations

import json
import os
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request

from disentangle import errors
from disentangle import paths

TIMEOUT_S = 15.0  # the whole check's bound
ENDPOINT = "https://storage.googleapis.com"
EMULATOR_ENV = "STORAGE_EMULATOR_HOST"
SCOPE = "https://www.googleapis.com/auth/devstorage.read_write"


class StorageError(errors.UserError):
  """A bucket that cannot be used: one line naming the flag, the URL and the cause."""


def _endpoint() -> tuple[str, bool]:
  """(the JSON API's base URL, whether it is an emulator)."""
  emulator = os.environ.get(EMULATOR_ENV, "").strip()
  if not emulator:
    return ENDPOINT, False
  return (emulator if "://" in emulator else f"http://{emulator}").rstrip("/"), True


def _token() -> str:
  """An access token of the application default credentials; the cause in words otherwise."""
  import google.auth  # pylint: disable=g-import-not-at-top
  from google.auth import exceptions  # pylint: disable=g-import-not-at-top
  import google.auth.transport.requests  # pylint: disable=g-import-not-at-top
  try:
    credentials, _ = google.auth.default(scopes=[SCOPE])
    credentials.refresh(google.auth.transport.requests.Request())
  except exceptions.DefaultCredentialsError:
    raise _Cause("no credentials (none found: run `gcloud auth application-default login`, or "
                 "set GOOGLE_APPLICATION_CREDENTIALS to a service account's key)") from None
  except (exceptions.RefreshError, exceptions.TransportError) as e:
    raise _Cause(f"no credentials (they could not be used: {_first_line(e)})") from None
  return credentials.token


class _Cause(Exception):
  """The words of `StorageError` after the URL."""


def _first_line(e: BaseException) -> str:
  return (str(e).strip().splitlines() or [type(e).__name__])[0][:200]


def _probe(url: str, timeout: float) -> None:
  """The first object under ``url`` asked for; `_Cause` for each way it fails."""
  endpoint, emulated = _endpoint()
  parts = urllib.parse.urlsplit(endpoint)
  host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
  try:
    socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
  except socket.gaierror as e:
    raise _Cause(f"storage unreachable (the storage host {host!r} cannot be resolved: "
                 f"{e.strerror or e})") from None
  try:
    socket.create_connection((host, port), timeout=timeout).close()
  except OSError as e:
    raise _Cause(f"storage unreachable (no connection to {host}:{port}: "
                 f"{e.strerror or _first_line(e)})") from None
  bucket, _, prefix = url.split("://", 1)[1].partition("/")
  headers = {} if emulated else {"Authorization": f"Bearer {_token()}"}
  query = urllib.parse.urlencode({"maxResults": 1, "prefix": prefix, "fields": "kind"})
  request = urllib.request.Request(
      f"{endpoint}/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o?{query}", headers=headers)
  try:
    with urllib.request.urlopen(request, timeout=timeout) as response:
      json.loads(response.read() or b"{}")
  except urllib.error.HTTPError as e:
    cause = {401: "no credentials (the storage refused them, HTTP 401)",
             403: "permission denied (HTTP 403: the credentials may not list the bucket's "
                  "objects)",
             404: f"no such bucket {bucket!r} (HTTP 404)"}.get(e.code)
    raise _Cause(cause or f"storage unreachable (HTTP {e.code} from {endpoint})") from None
  except (urllib.error.URLError, OSError, ValueError) as e:
    raise _Cause(f"storage unreachable ({_first_line(getattr(e, 'reason', e))} at "
                 f"{endpoint})") from None


def check(path, flag: str, timeout: float = TIMEOUT_S) -> None:
  """Nothing for a local path or a scheme other than ``gs://``; for a bucket URL the check of
  the module docstring, `StorageError` (``<flag>: <url>: <cause>``) within about ``timeout``
  seconds."""
  if path is None:
    return
  url = os.fspath(path)
  if not (paths.is_remote(url) and url.startswith("gs://")):
    return
  outcome = []

  def probe():
    try:
      _probe(url, timeout)
      outcome.append(None)
    except _Cause as e:
      outcome.append(str(e))
    except Exception as e:  # pylint: disable=broad-except
      outcome.append(f"storage unreachable ({_first_line(e)})")

  worker = threading.Thread(target=probe, daemon=True)  # a resolver that hangs stays bounded
  worker.start()
  worker.join(timeout)
  if not outcome:
    outcome.append(f"storage unreachable (no answer within {timeout:.0f} s from "
                   f"{_endpoint()[0]})")
  if outcome[0] is not None:
    raise StorageError(f"{flag}: {url}: {outcome[0]}")


def check_data_dir(configured=None, timeout: float = TIMEOUT_S) -> None:
  """`check` of the data folder a run reads (``dataset.data_dir``, else
  ``$DISENTANGLE_DATA_DIR``), named by where it came from."""
  from disentangle.data import files  # pylint: disable=g-import-not-at-top
  folder, origin = files.data_dir_origin(configured)
  check(folder, origin.split(";")[0], timeout)
