"""setup.py's requirements: the lock as lower bounds, and an environment's newer stack kept.

Every requirement (install and extras) admits its lock version and releases far above it (the
next major, and 99 majors up): no upper bound, except one set beside a comment naming the release
that breaks the project; JAX, jaxlib, Flax, Optax, chex and Orbax never get one. The slow test
asks pip itself (``--dry-run --report``, no index, no network) what ``pip install -e .`` and
``pip install -e ".[test]"`` (the README's install lines) would do in a fresh environment that sees
this one's packages and holds stand-ins of ``jax``, ``jaxlib`` and a CUDA plugin at version 99:
install the project alone, replacing nothing.
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
# What an accelerator's image chose: never capped by this project.
ACCELERATOR_STACK = ("jax", "jaxlib", "flax", "optax", "chex", "orbax-checkpoint")
FAR = "99"  # a release newer than any tested
UPPER = ("<", "<=", "==", "===", "~=")  # the operators that bound a version from above
CAPPED = ("ruff",)  # bounded above today: the linter's pin (setup.py says why)


def _declared() -> list[tuple[str, requirements.Requirement, str]]:
  """(list, requirement, its source line) of setup.py's ``REQUIREMENTS`` ('install') and
  ``EXTRAS`` (the extra's name), read without running setup.py."""
  source = (helpers.REPO / "setup.py").read_text()
  lines = source.splitlines()
  lists = {}
  for node in ast.parse(source).body:
    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "REQUIREMENTS":
      lists["install"] = node.value
    elif isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "EXTRAS":
      lists.update((ast.literal_eval(k), v) for k, v in zip(node.value.keys, node.value.values))
  assert "install" in lists and "test" in lists, "setup.py has no REQUIREMENTS or EXTRAS"
  return [(where, requirements.Requirement(item.value), lines[item.lineno - 1])
          for where, node in lists.items() for item in node.elts]


def _lock(path: str = "requirements.txt") -> dict[str, str]:
  pins = {}
  for line in (helpers.REPO / path).read_text().splitlines():
    if line.strip() and not line.startswith("#"):
      req = requirements.Requirement(line)
      (spec,) = req.specifier
      assert spec.operator == "==", line
      pins[req.name.lower()] = spec.version
  return pins


def _lower(req: requirements.Requirement) -> str | None:
  return next((s.version for s in req.specifier if s.operator == ">="), None)


def test_the_lock_is_each_install_requirement_lower_bound():
  lock = _lock()
  install = {r.name.lower(): r for where, r, _ in _declared() if where == "install"}
  assert set(install) == set(lock)
  for name, req in install.items():
    assert _lower(req) == lock[name], req
    assert lock[name] in req.specifier, req


def test_the_docs_lock_pins_each_docs_requirement_at_its_lower_bound():
  lock = _lock("docs/requirements.txt")
  docs = {r.name.lower(): r for where, r, _ in _declared() if where == "docs"}
  assert docs and set(docs) <= set(lock)
  for name, req in docs.items():
    assert _lower(req) == lock[name], req


def test_every_requirement_admits_far_newer_releases_unless_a_comment_names_a_break():
  """The next major release above each lower bound and the 99th are admitted; a requirement
  bounded above (`CAPPED`) carries its reason as a comment on its line, and is none of the
  accelerator's stack."""
  capped = []
  for where, req, line in _declared():
    if any(s.operator in UPPER for s in req.specifier):
      assert req.name.lower() not in ACCELERATOR_STACK, (where, str(req))
      assert "#" in line, f"{where}: {req} is bounded above without a comment naming the break"
      capped.append(req.name)
      continue
    major = version.Version(_lower(req) or "0").major
    for far in (f"{major + 1}.0", f"{major + int(FAR)}.0"):
      assert req.specifier.contains(far), (where, str(req), far)
  assert capped == list(CAPPED)
  assert set(ACCELERATOR_STACK) <= {r.name.lower() for w, r, _ in _declared() if w == "install"}
  assert not specifiers.SpecifierSet(">=0.10.2,<=0.12.0.1").contains(FAR)  # the old ranges fail


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
  the CUDA plugin at version 99 (the lock's JAX below them is shadowed)."""
  env = tmp_path_factory.mktemp("accelerator") / "env"
  venv.EnvBuilder(with_pip=False).create(env)
  site = _site_packages(env)
  outer = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
  (site / "outer.pth").write_text("\n".join(sorted(outer)) + "\n")
  newer = f"{FAR}.0.0"
  _stand_in(site, "jax", newer, (f"jaxlib<={newer},>={newer}",))
  _stand_in(site, "jaxlib", newer)
  _stand_in(site, PLUGIN, newer, (f"jaxlib=={newer}",))
  return env, newer


def _dry_run(env: pathlib.Path, tmp_path: pathlib.Path, target: str, *extra: str):
  report = tmp_path / "report.json"
  python = env / "bin" / "python"
  out = subprocess.run(
      [sys.executable, "-m", "pip", "--python", str(python), "install", "--dry-run", "--quiet",
       "--report", str(report), "--no-index", "--no-build-isolation", *extra, "-e", target],
      capture_output=True, text=True, timeout=300,
      env={**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INPUT": "1",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
  return out, (json.loads(report.read_text()) if out.returncode == 0 else None)


@pytest.mark.slow
@pytest.mark.parametrize("extras", ["", "[test]"])
def test_an_install_keeps_a_jax_newer_than_any_tested_and_its_plugin(accelerator_env, tmp_path,
                                                                     extras):
  env, newer = accelerator_env
  out, report = _dry_run(env, tmp_path, f"{helpers.REPO}{extras}")
  assert out.returncode == 0, out.stderr[-2000:]
  installs = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in report["install"]}
  assert installs == {"disentangle-jax": "0.1.0"}, installs  # the project alone, nothing else
  if extras:
    return
  # The control: the lock's JAX as an install requirement (as setup.py's old exact pins and
  # upper bounds were) asks pip to replace the stand-ins, which it cannot do without an index.
  pins = tmp_path / "pins.txt"
  pins.write_text(f"jax<={_lock()['jax']}\njaxlib<={_lock()['jaxlib']}\n")
  out, _ = _dry_run(env, tmp_path, str(helpers.REPO), "-c", str(pins))
  assert out.returncode != 0 and "jax" in out.stderr
