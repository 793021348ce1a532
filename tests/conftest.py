"""Shared test setup: 8 forced CPU devices (set before JAX starts), the offline data folder, the
``slow`` marker and a persistent compilation cache.

``python -m pytest -q -m "not slow"`` is the development loop (unit tests of pure pieces);
``python -m pytest -q`` runs everything, the whole-run integration tests marked ``slow`` too, in
worker processes (``pytest.ini``).
Every compiled XLA program, the eager operations' too, is kept under the pytest cache
(``.pytest_cache/d/jax_cache``), so a second run loads what the first compiled, as is the Python
bytecode where the environment says not to write it beside the sources (``.pytest_cache/d/pycache``);
the first run of a fresh checkout compiles everything (``-p no:cacheprovider`` or ``--cache-clear``
start cold).
"""
import atexit
import gc
import logging
import os
import pathlib
import sys

import pytest

os.environ.setdefault("DISENTANGLE_NO_DOWNLOAD", "1")  # tests never touch the network
# Tests compile many small programs and run each for a few steps: LLVM's lowest optimisation level
# halves the compile time of XLA:CPU and the golden step records still hold to float32 rounding.
# Set in the environment so that the tests' child processes inherit it.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = " ".join(
      filter(None, [os.environ.get("XLA_FLAGS"), "--xla_backend_optimization_level=0"]))


def _exit_without_teardown():
  """Ends a worker process of pytest-xdist at exit, before JAX's own handler frees every
  compiled program and the interpreter tears down (about 2 s the whole run waited for): its
  results are with the controller by then, and the handlers registered after JAX's (the
  library's, the tests') have run."""
  logging.shutdown()
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(0)


@pytest.hookimpl(wrapper=True)
def pytest_collection(session):
  """Where the environment asks Python not to write bytecode beside the sources
  (``PYTHONDONTWRITEBYTECODE``), the test files' bytecode, their assertions rewritten by pytest,
  is kept under the pytest cache instead while they are collected (``sys.pycache_prefix``): each
  worker would otherwise rewrite every test file again, about 4 s before its first test. A
  prefix the environment sets (``PYTHONPYCACHEPREFIX``) is kept, and so is ``-p no:cacheprovider``
  (rewrite every time)."""
  cache = getattr(session.config, "cache", None)
  if cache is None or not sys.dont_write_bytecode or sys.pycache_prefix is not None:
    return (yield)
  sys.pycache_prefix, sys.dont_write_bytecode = str(cache.mkdir("pycache")), False
  try:
    return (yield)
  finally:
    sys.pycache_prefix, sys.dont_write_bytecode = None, True


def _runs_tests(config) -> bool:
  """False in pytest-xdist's controller, which hands the tests to its workers and needs neither
  JAX nor the library (a worker, or a run without workers, runs them)."""
  return hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None)


def pytest_configure(config):
  config.addinivalue_line(
      "markers", "slow: a whole training run, several processes, an end-to-end command or a "
      "test that compiles for more than a second or so (deselect with -m 'not slow')")
  if not _runs_tests(config):
    return
  import jax  # pylint: disable=g-import-not-at-top  (before any test module starts JAX)
  jax.config.update("jax_num_cpu_devices", 8)
  if hasattr(config, "workerinput"):
    atexit.register(_exit_without_teardown)  # after JAX's handler at exit: runs before it
  from tests import helpers  # pylint: disable=g-import-not-at-top
  if (helpers.SHARED / "data").is_dir():  # the offline data folder, for loaders called bare
    os.environ.setdefault("DISENTANGLE_DATA_DIR", str(helpers.SHARED / "data"))
  cache = getattr(config, "cache", None)
  if cache is None:  # -p no:cacheprovider: compile from scratch
    return
  folder = str(cache.mkdir("jax_cache"))
  # Child processes (multi-process and command-line tests) share the same cache.
  os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", folder)
  jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


@pytest.fixture(scope="session")
def shared_data_dir() -> pathlib.Path:
  """`../shared/data` beside the checkout (real MNIST, 12 real dSprites images)."""
  from tests import helpers  # pylint: disable=g-import-not-at-top
  path = helpers.SHARED / "data"
  if not path.is_dir():
    pytest.skip(f"offline data folder {path} not found (set DISENTANGLE_SHARED_DIR)")
  return path


# The files that take longest in one process (several minutes together), longest first.
LONGEST = ("test_runs.py", "test_device_data.py", "test_resume.py")


def pytest_collection_modifyitems(config, items):
  """The files with whole-run tests first, the longest (``LONGEST``) at the head, so that the
  worker processes (``pytest.ini``) start the long tests early and finish together."""
  del config
  slow_files = {item.path for item in items if item.get_closest_marker("slow")}

  def rank(item):
    if item.path.name in LONGEST:
      return LONGEST.index(item.path.name)
    return len(LONGEST) + (0 if item.path in slow_files else 1)

  items[:] = sorted(items, key=rank)  # stable: a file's tests keep their order


def pytest_collection_finish(session):
  """The imported library and test modules leave the garbage collector's view (`gc.freeze`),
  as does what a test file leaves alive (`pytest_runtest_teardown`)."""
  del session
  gc.freeze()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
  """After a test file's last test (its fixtures torn down), what is still alive (every compiled
  program, JAX's caches) leaves the garbage collector's view (`gc.freeze`), so the full
  collections of the later files scan only what they create: a worker otherwise spends some
  seconds of the unit tier rescanning the same long-lived objects. Cyclic garbage of a finished
  file not yet collected stays until the process exits."""
  if nextitem is None or nextitem.path != item.path:
    gc.freeze()


@pytest.fixture(scope="session")
def storage_emulator(tmp_path_factory):
  """A Cloud Storage emulator on 127.0.0.1 (`tests.storage_emulator`), with the environment
  that points this process and its children at it; skipped only when the emulator or gcsfs is
  not installed (the test extras install both)."""
  import importlib.util  # pylint: disable=g-import-not-at-top

  from tests import storage_emulator as emulator  # pylint: disable=g-import-not-at-top
  missing = [m for m in ("gcp_storage_emulator", "gcsfs") if importlib.util.find_spec(m) is None]
  if missing:
    pytest.skip(f"{' and '.join(missing)} not installed: pip install gcp-storage-emulator gcsfs "
                f"(the test extras)")
  with emulator.running(tmp_path_factory.mktemp("gcs") / "emulator.log") as url:
    env = emulator.environment(url)
    before = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
      yield url
    finally:
      for k, v in before.items():
        if v is None:
          os.environ.pop(k, None)
        else:
          os.environ[k] = v


@pytest.fixture
def bucket(storage_emulator, request) -> str:
  """A fresh ``gs://`` folder of the emulator's bucket for this test."""
  del storage_emulator
  from tests import storage_emulator as emulator  # pylint: disable=g-import-not-at-top
  name = "".join(c if c.isalnum() or c in "-_" else "_" for c in request.node.name)
  return f"gs://{emulator.BUCKET}/{name}"
