"""What the API reference must hold, decided in one place, and the check that it does.

Public is what the package's ``__init__`` files export (``__all__`` of `PACKAGES`) and what the
API pages (``docs/api/*.md``) list in their ``.. autosummary::`` blocks and ``.. py:data::``
descriptions of constants, which name what the guides
use. `problems` returns one line per public name with no entry in the pages, per entry that does
not import, and per function, class or module (and public method of a listed class) without a
docstring of its own. The site's build warns with each line (an error under ``-W``) and
``tests/test_api_reference.py`` asserts there are none.
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import pathlib
import re

PACKAGES = ("disentangle", "disentangle.data", "disentangle.metrics", "disentangle.metrics.dlib")
API_PAGES = pathlib.Path("docs") / "api"
_BLOCK = re.compile(r"^\.\. autosummary::\n(.*?)^```", re.MULTILINE | re.DOTALL)
_DATA = re.compile(r"^\.\. py:data:: ([\w.]+)$", re.MULTILINE)  # a constant, described in the page


def entries(root: pathlib.Path) -> list[str]:
  """The dotted names the API pages list, in page order."""
  names = []
  for page in sorted((root / API_PAGES).glob("*.md")):
    text = page.read_text(encoding="utf-8")
    for block in _BLOCK.findall(text):
      names += [line.strip() for line in block.splitlines()
                if line.strip() and not line.lstrip().startswith(":")]
    names += _DATA.findall(text)
  return names


def exported() -> list[str]:
  """Every name of `PACKAGES`' ``__all__``, as ``package.name``."""
  return [f"{package}.{name}" for package in PACKAGES
          for name in importlib.import_module(package).__all__]


def resolve(dotted: str):
  """The object a dotted name names (a module, or an attribute of the longest module prefix)."""
  parts = dotted.split(".")
  for i in range(len(parts), 0, -1):
    try:
      obj = importlib.import_module(".".join(parts[:i]))
    except ImportError:
      continue
    for attr in parts[i:]:
      obj = getattr(obj, attr)
    return obj
  raise ImportError(dotted)


def _own_doc(obj) -> str:
  if inspect.isclass(obj):
    doc = obj.__dict__.get("__doc__") or ""
    # A dataclass or NamedTuple without a docstring gets its signature as one.
    return "" if re.fullmatch(rf"{obj.__name__}\(.*\)", doc.strip(), re.DOTALL) else doc
  return getattr(obj, "__doc__", None) or ""


def _documented(obj) -> bool:
  return bool(_own_doc(obj).strip())


def _needs_doc(obj) -> bool:
  return inspect.ismodule(obj) or inspect.isclass(obj) or inspect.isroutine(obj)


def _public_methods(cls) -> list[str]:
  """Public functions and properties defined by ``cls`` itself (a dataclass's fields, whose
  defaults may be functions, are documented by the class's docstring)."""
  fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
  return [name for name, value in cls.__dict__.items()
          if not name.startswith("_") and name not in fields
          and (inspect.isfunction(value) or isinstance(value, (property, classmethod,
                                                                staticmethod)))]


def problems(root: pathlib.Path) -> list[str]:
  """One line per missing entry, unimportable entry or missing docstring; [] when complete."""
  listed = entries(root)
  out = [f"{name}: public (in its package's __all__) but in no API page ({API_PAGES}/*.md)"
         for name in exported() if name not in listed]
  for name in listed:
    try:
      obj = resolve(name)
    except (ImportError, AttributeError) as e:
      out.append(f"{name}: listed in the API pages but does not import ({e})")
      continue
    if _needs_doc(obj) and not _documented(obj):
      out.append(f"{name}: listed in the API pages but has no docstring")
    if inspect.isclass(obj) and obj.__module__.startswith("disentangle"):
      for method in _public_methods(obj):
        member = obj.__dict__[method]
        target = member.fget if isinstance(member, property) else getattr(member, "__func__",
                                                                           member)
        if not (target.__doc__ or "").strip():
          out.append(f"{name}.{method}: a public method of a listed class without a docstring")
  return out
