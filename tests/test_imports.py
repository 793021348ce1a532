"""The package's import graph: no circle between modules, none between its parts, and training
code that imports no evaluation code.

Every ``import`` / ``from ... import`` of ``disentangle`` is read from the source (function-level
imports included, since a circle through a deferred import is still a circle).
"""
import ast
import functools
import pathlib

from tests import helpers

ROOT = helpers.REPO
PACKAGE = ROOT / "disentangle"


def _modules() -> dict[str, pathlib.Path]:
  out = {}
  for path in PACKAGE.rglob("*.py"):
    parts = path.relative_to(ROOT).with_suffix("").parts
    name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    out[name] = path
  return out


def _imports(path: pathlib.Path, modules) -> set[str]:
  """The package modules ``path`` imports (``from a import b``: ``a.b`` if it is a module)."""
  found = set()
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      for alias in node.names:
        full = f"{node.module}.{alias.name}"
        found.add(full if full in modules else node.module)
    elif isinstance(node, ast.Import):
      found.update(a.name for a in node.names)
  return {m for m in found if m in modules}


@functools.cache  # the tests read the graph, never change it
def _graph() -> dict[str, set[str]]:
  modules = _modules()
  return {name: _imports(path, modules) - {name} for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
  """Strongly connected components of more than one node (Tarjan), or a node importing itself."""
  index, low, stack, on_stack, found = {}, {}, [], set(), []

  def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on_stack.add(v)
    for w in graph.get(v, ()):
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in on_stack:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      component = []
      while True:
        w = stack.pop()
        on_stack.discard(w)
        component.append(w)
        if w == v:
          break
      if len(component) > 1 or v in graph.get(v, ()):
        found.append(sorted(component))

  for v in sorted(graph):
    if v not in index:
      visit(v)
  return found


def _part(module: str) -> str:
  """``disentangle.data.tfds.source`` -> ``disentangle.data``: the package's top-level parts."""
  return ".".join(module.split(".")[:2])


def test_the_cycle_finder_finds_a_planted_circle():
  graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
  assert sorted(_cycles(graph)) == [["a", "b", "c"], ["e"]]
  assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_deferred_imports():
  graph = _graph()
  # disentangle.launch imports the trainer and the evaluator inside its run function.
  assert {"disentangle.train.trainer", "disentangle.evaluation.evaluator"} <= graph[
      "disentangle.launch"]


def test_no_import_circle_between_modules():
  assert _cycles(_graph()) == []


def test_no_import_circle_between_the_package_parts():
  parts: dict[str, set[str]] = {}
  for module, targets in _graph().items():
    parts.setdefault(_part(module), set()).update(_part(t) for t in targets)
  for part, targets in parts.items():
    targets.discard(part)
  assert _cycles(parts) == []


def test_training_code_imports_no_evaluation_code():
  graph = _graph()
  training = [m for m in graph if m.startswith("disentangle.train.")]
  assert len(training) >= 8  # the walk found the training modules
  offending = {m: sorted(t for t in graph[m] if t.startswith("disentangle.evaluation"))
               for m in training}
  assert not {m: t for m, t in offending.items() if t}
