"""The backend record, its line, and the warning of an accelerator JAX does not use."""
import fnmatch
import importlib.metadata
import json

import flax
import jax
import jaxlib
import pytest
import sklearn

import disentangle
from disentangle import backend
from disentangle.train import trainer


def _exists(*present):
  """A `glob.glob` over the device nodes ``present``."""
  return lambda pattern: [p for p in present if fnmatch.fnmatch(p, pattern)]


def test_describe_names_this_process_backend_and_versions():
  record = backend.describe()
  assert record["backend"] == jax.default_backend() == "cpu"
  assert record["device_count"] == jax.device_count() == 8  # the tests' forced CPU devices
  assert record["jax"] == jax.__version__
  assert record["jaxlib"] == jaxlib.__version__
  assert record["disentangle"] == disentangle.__version__ == importlib.metadata.version(
      "disentangle-jax")  # one version: the package's, the distribution's and the record's
  assert record["flax"] == flax.__version__ and record["scikit-learn"] == sklearn.__version__
  line = backend.summary(record)
  assert line.startswith("device: cpu, 8 x cpu (1 process), jax ")


@pytest.mark.parametrize("present, environ, expected", [
    ((), {}, []),
    (("/dev/nvidia0", "/dev/nvidiactl"), {}, ["gpu"]),
    (("/dev/nvidiactl",), {}, []),  # the control node alone is no GPU
    (("/dev/accel0",), {}, ["tpu"]),
    (("/dev/vfio/0",), {"TPU_ACCELERATOR_TYPE": "v5litepod-8"}, ["tpu"]),
    (("/dev/vfio/0",), {}, []),  # vfio without a TPU VM's variables: another device
])
def test_visible_accelerators_reads_device_nodes(present, environ, expected):
  assert backend.visible_accelerators(_exists(*present), environ) == expected


NONE = {"jaxlib": "0.11.2", "jax-cuda13-plugin": None, "jax-cuda12-plugin": None,
        "libtpu": None, "libtpu-nightly": None}


@pytest.mark.parametrize("backend_name, visible, packages, environ, cause", [
    ("gpu", ["gpu"], NONE, {}, None),  # JAX on the GPU: nothing to say
    ("cpu", [], NONE, {}, None),  # a CPU machine
    ("cpu", ["gpu"], NONE, {}, "a CPU build and no CUDA plugin"),
    ("cpu", ["gpu"], {**NONE, "jax-cuda13-plugin": "0.10.2"}, {},
     "jax-cuda13-plugin 0.10.2 does not match jaxlib 0.11.2"),
    ("cpu", ["gpu"], {**NONE, "jax-cuda13-plugin": "0.11.2"}, {}, "did not load"),
    ("cpu", ["gpu"], {**NONE, "jax-cuda13-plugin": "0.11.2"}, {"JAX_PLATFORMS": "cpu"},
     "JAX_PLATFORMS='cpu' leaves it out"),
    ("cpu", ["gpu"], NONE, {"JAX_PLATFORMS": "cuda,cpu"}, "a CPU build"),
    ("cpu", ["tpu"], NONE, {}, "no libtpu"),
    ("cpu", ["tpu"], {**NONE, "libtpu": "0.0.30"}, {}, "libtpu did not load"),
])
def test_fallback_warning_names_the_likely_cause(backend_name, visible, packages, environ,
                                                 cause):
  line = backend.fallback_warning(backend_name, visible, packages, environ)
  if cause is None:
    assert line is None
  else:
    assert cause in line and "\n" not in line
    assert line.startswith(f"warning: this machine has a {visible[0].upper()} but JAX runs on "
                           "the CPU")


def test_environment_json_keeps_the_starts_that_computed_the_steps(tmp_path):
  runs = [tmp_path / "a", tmp_path / "b"]
  for d in runs:
    d.mkdir()
  trainer.record_environment(runs, 0, {"backend": "cpu"})
  trainer.record_environment(runs, 100, {"backend": "gpu"})
  trainer.record_environment(runs, 200, {"backend": "tpu"})
  trainer.record_environment(runs, 100, {"backend": "gpu2"})  # resumed from step 100 again
  for d in runs:
    starts = json.loads((d / trainer.ENVIRONMENT).read_text())["starts"]
    assert [(s["step"], s["backend"]) for s in starts] == [(0, "cpu"), (100, "gpu2")]
