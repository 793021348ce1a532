"""setup.py's ranges: the lock inside them, and an accelerator's newer JAX kept by an install.

``pip install -e .`` into an environment whose ``jax``, ``jaxlib`` and CUDA plugin are a tested
version newer than the lock must change none of them: pip's ``--dry-run --report`` is asked, with
no index (no network), in a fresh environment that sees this one's packages and holds stand-ins
of the three at the newest tested version.
"""
import ast
import json
import os
import pathlib
import subprocess
import sys
import sysconfig
import venv

from packaging import requirements
from packaging import specifiers
from packaging import version
import pytest

from tests import helpers

PLUGIN = "jax-cuda13-plugin"


def _tested() -> dict[str, tuple[str, str]]:
  """setup.py's ``TESTED`` (name -> (lock, newest)), read without running setup.py."""
  for node in ast.parse((helpers.REPO / "setup.py").read_text()).body:
    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "TESTED":
      return ast.literal_eval(node.value)
  raise AssertionError("setup.py has no TESTED")


def _lock() -> dict[str, str]:
  pins = {}
  for line in (helpers.REPO / "requirements.txt").read_text().splitlines():
    if line.strip() and not line.startswith("#"):
      req = requirements.Requirement(line)
      (spec,) = req.specifier
      assert spec.operator == "==", line
      pins[req.name.lower()] = spec.version
  return pins


def test_the_lock_is_each_range_lower_bound_and_inside_it():
  tested, lock = _tested(), _lock()
  assert {n.lower() for n in tested} == set(lock)
  for name, (low, high) in tested.items():
    assert lock[name.lower()] == low, name
    assert version.Version(low) <= version.Version(high), name
    spec = specifiers.SpecifierSet(f">={low},<={high}")
    assert low in spec and high in spec


def _site_packages(env: pathlib.Path) -> pathlib.Path:
  (site,) = env.glob("lib/python3*/site-packages")
  return site


def _stand_in(site: pathlib.Path, name: str, ver: str, requires: tuple[str, ...] = ()) -> None:
  """An installed distribution as pip sees one: a ``.dist-info`` with its metadata."""
  info = site / f"{name.replace('-', '_')}-{ver}.dist-info"
  info.mkdir()
  (info / "METADATA").write_text("\n".join(
      ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {ver}",
       *(f"Requires-Dist: {r}" for r in requires)]) + "\n")
  (info / "INSTALLER").write_text("pip\n")
  (info / "RECORD").write_text("")


@pytest.fixture(scope="module")
def accelerator_env(tmp_path_factory):
  """A fresh environment that sees this one's packages, holding stand-ins of jax, jaxlib and
  the CUDA plugin at the newest tested JAX (the lock's JAX below them is shadowed)."""
  env = tmp_path_factory.mktemp("accelerator") / "env"
  venv.EnvBuilder(with_pip=False).create(env)
  site = _site_packages(env)
  outer = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
  (site / "outer.pth").write_text("\n".join(sorted(outer)) + "\n")
  newer = _tested()["jax"][1]
  assert version.Version(newer) > version.Version(_lock()["jax"])
  _stand_in(site, "jax", newer, (f"jaxlib<={newer},>={newer}",))
  _stand_in(site, "jaxlib", newer)
  _stand_in(site, PLUGIN, newer, (f"jaxlib=={newer}",))
  return env, newer


def _dry_run(env: pathlib.Path, tmp_path: pathlib.Path, *extra: str):
  report = tmp_path / "report.json"
  python = env / "bin" / "python"
  out = subprocess.run(
      [sys.executable, "-m", "pip", "--python", str(python), "install", "--dry-run", "--quiet",
       "--report", str(report), "--no-index", "--no-build-isolation", *extra, "-e", str(helpers.REPO)],
      capture_output=True, text=True, timeout=300,
      env={**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INPUT": "1",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
  return out, (json.loads(report.read_text()) if out.returncode == 0 else None)


@pytest.mark.slow
def test_an_install_keeps_a_newer_supported_jax_and_its_plugin(accelerator_env, tmp_path):
  env, newer = accelerator_env
  out, report = _dry_run(env, tmp_path)
  assert out.returncode == 0, out.stderr[-2000:]
  installs = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in report["install"]}
  assert installs == {"disentangle-jax": "0.1.0"}, installs  # the project alone, nothing else
  # The control: the lock's JAX as an install requirement (as setup.py's exact pins were) asks
  # pip to replace the stand-ins, which it cannot do here without an index.
  pins = tmp_path / "pins.txt"
  pins.write_text(f"jax=={_lock()['jax']}\njaxlib=={_lock()['jaxlib']}\n")
  out, _ = _dry_run(env, tmp_path, "-c", str(pins))
  assert out.returncode != 0 and "jax" in out.stderr
