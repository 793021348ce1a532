"""Where code lives: the library imports no experiment, and measurement code lives beside the
benchmarks, one module per name.

Pure file reading (``ast``, no import of the modules): every ``import`` / ``from ... import``
(function-level ones included) and every ``importlib.import_module`` / ``__import__`` of a string
literal (an f-string by its leading text) is read from the source.
"""
import ast
import collections
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
LIBRARY = ROOT / "disentangle"
BENCHMARKS = ROOT / "benchmarks"
# Measurement code that lives in benchmarks/ (benchmarks.gpu_lowering, benchmarks.gpu_levers).
BENCHMARK_ONLY = ("levers", "gpu_lowering")

_EXPERIMENTS = re.compile(r"experiments(\.|$)")


def _leading_text(node: ast.expr) -> str | None:
  """A string literal's text, an f-string's text before its first field; else None."""
  if isinstance(node, ast.Constant) and isinstance(node.value, str):
    return node.value
  if isinstance(node, ast.JoinedStr) and node.values:
    return _leading_text(node.values[0])
  return None


def _is_dynamic_import(func: ast.expr) -> bool:
  """``importlib.import_module``, ``import_module`` or ``__import__``."""
  name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
  return name in ("import_module", "__import__")


def experiment_imports(source: str, filename: str = "<source>") -> list[str]:
  """The ``experiments`` modules ``source`` imports, statically or by a literal name."""
  found = []
  for node in ast.walk(ast.parse(source, filename=filename)):
    if isinstance(node, ast.Import):
      found += [a.name for a in node.names if _EXPERIMENTS.match(a.name)]
    elif isinstance(node, ast.ImportFrom):
      if node.level == 0 and node.module and _EXPERIMENTS.match(node.module):
        found.append(node.module)
    elif isinstance(node, ast.Call) and _is_dynamic_import(node.func) and node.args:
      text = _leading_text(node.args[0])
      if text is not None and _EXPERIMENTS.match(text):
        found.append(text)
  return found


def _modules(root: pathlib.Path) -> list[pathlib.Path]:
  """Every module and package under ``root`` (``__init__.py`` stands for its package)."""
  return [p.parent if p.name == "__init__.py" else p for p in sorted(root.rglob("*.py"))
          if p.parent != root or p.name != "__init__.py"]


def _basename(module: pathlib.Path) -> str:
  return module.stem if module.suffix == ".py" else module.name


@pytest.mark.parametrize("source,expected", [
    ("import experiments.tables", ["experiments.tables"]),
    ("def f():\n  from experiments.configs import common", ["experiments.configs"]),
    ("import importlib\nimportlib.import_module('experiments.configs.mnist_cascade')",
     ["experiments.configs.mnist_cascade"]),
    ("from importlib import import_module\nimport_module(f'experiments.configs.{name}')",
     ["experiments.configs."]),
    ("__import__('experiments')", ["experiments"]),
    ("import experiments_lib\nfrom . import experiments\n'experiments.slot'", []),
])
def test_experiment_imports_reads_each_form(source, expected):
  """The reader itself, on each form it must catch and on look-alikes it must not."""
  assert experiment_imports(source) == expected


def test_library_imports_no_experiment():
  """`disentangle` is the library: the experiments import it, never the reverse (a config is
  passed in by the caller)."""
  found = {str(p.relative_to(ROOT)): names for p in sorted(LIBRARY.rglob("*.py"))
           if (names := experiment_imports(p.read_text(), str(p)))}
  assert not found, found


def test_measurement_modules_live_in_benchmarks():
  """The GPU levers and the GPU's lowering of the step are benchmarks, not library modules."""
  misplaced = [str(m.relative_to(ROOT)) for m in _modules(LIBRARY)
               if _basename(m) in BENCHMARK_ONLY]
  assert not misplaced, misplaced


def test_no_module_name_is_both_a_benchmark_and_a_library_module():
  """One module per name: a benchmark is named for what it measures, not for the library module
  it times (``benchmarks.assignment_solvers``, not ``benchmarks.assignment``)."""
  library = collections.defaultdict(list)
  for m in _modules(LIBRARY):
    library[_basename(m)].append(str(m.relative_to(ROOT)))
  shared = {str(m.relative_to(ROOT)): library[_basename(m)] for m in _modules(BENCHMARKS)
            if _basename(m) in library}
  assert not shared, shared
