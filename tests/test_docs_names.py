"""What the README and the guides name exists in the code (pure file reading and imports).

Each code span and fenced block of README.md, CONTRIBUTING.md, docs/*.md and
benchmarks/README.md is read for
- paths of the repository (``disentangle/...``, ``experiments/...``, ``benchmarks/...``,
  ``tests/...``, ``docs/...``, ``.ci/...``): each exists (a ``<name>`` or ``*`` part matches
  at least one file);
- modules run with ``python -m``: each is a module of the checkout;
- ``--flags`` of those commands: each is defined by the module or by the command line it shares
  (``absl`` or ``argparse`` flags of ``experiments/``, ``benchmarks/`` and ``disentangle/``;
  a quoted argument is another program's), or is a config
  override ``--config.<field>``;
- dotted names ``disentangle.<...>``: each imports.
The commands' arguments are run as written in ``tests/test_doc_commands.py``.
"""
import functools
import pathlib
import re
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import api_coverage  # noqa: E402  (the site's resolver of dotted names)

PAGES = ["README.md", "CONTRIBUTING.md", "benchmarks/README.md",
         *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
PATH = re.compile(r"(?<![\w./-])((?:disentangle|experiments|benchmarks|tests|docs|\.ci)/"
                  r"[\w./<>*-]*[\w>*])")
MODULE = re.compile(r"python -m ((?:experiments|benchmarks|disentangle)(?:\.\w+)+)([^`\n]*)")
DOTTED = re.compile(r"(?<![\w.])(disentangle(?:\.[A-Za-z_]\w*)+)")
FLAG = re.compile(r"(?<![\w-])--([a-z][\w]*)")
# Flags absl defines for every program, and the config file's own flag.
ABSL = {"help", "helpfull", "helpshort", "flagfile", "config", "undefok", "only_check_args"}


def spans(text: str) -> list[str]:
  """The fenced blocks (lines joined at a trailing backslash) and inline code spans of a page."""
  blocks = [b.replace("\\\n", " ") for b in re.findall(r"```[^\n]*\n(.*?)```", text, flags=re.S)]
  prose = re.sub(r"```[^\n]*\n.*?```", "", text, flags=re.S)
  return blocks + [s.replace("\n", " ") for s in re.findall(r"`([^`]+)`", prose)]


@functools.cache
def _defined_flags() -> frozenset:
  names = set(ABSL)
  for folder in ("disentangle", "experiments", "benchmarks"):
    for path in (ROOT / folder).rglob("*.py"):
      text = path.read_text()
      names |= set(re.findall(r"DEFINE_\w+\(\s*[\"']([\w]+)[\"']", text))
      names |= set(re.findall(r"add_argument\(\s*[\"']--([\w]+)[\"']", text))  # argparse
  return frozenset(names)


def _exists(path: str) -> bool:
  pattern = re.sub(r"<[^>]*>", "*", path.rstrip("/."))
  return any(ROOT.glob(pattern)) if "*" in pattern else (ROOT / pattern).exists()


def _imports(dotted: str) -> bool:
  try:
    api_coverage.resolve(dotted)
  except (ImportError, AttributeError):
    return False
  return True


def stale(text: str) -> list[str]:
  """What a page's code names that the checkout does not have, one line each."""
  out = []
  for span in spans(text):
    out += [f"path {p}" for p in PATH.findall(span) if not _exists(p)]
    for module, rest in MODULE.findall(span):
      if not (ROOT / (module.replace(".", "/") + ".py")).is_file() and not (
          ROOT / module.replace(".", "/") / "__main__.py").is_file():
        out.append(f"module {module}")
      rest = re.sub(r"'[^']*'|\"[^\"]*\"", "", re.split(r"\s(?:&&|\||;|#)\s", rest)[0])
      out += [f"flag --{f} of {module}" for f in FLAG.findall(rest)
              if f not in _defined_flags() and f.removeprefix("no") not in _defined_flags()]
    out += [f"name {d}" for d in DOTTED.findall(span)
            if not d.endswith((".py", ".md")) and not _imports(d)]
  return sorted(set(out))


@pytest.mark.parametrize("page", PAGES)
def test_what_a_page_names_exists(page):
  assert stale((ROOT / page).read_text(encoding="utf-8")) == [], page


def test_a_line_naming_what_does_not_exist_is_found():
  text = ("The layout: `disentangle/nn/replay.py` holds the replay.\n"
          "```bash\npython -m experiments.dsprites_cascde --config=x.py:m6\n"
          "python -m experiments.evaluate --workdir=RUN --max_pionts=10\n```\n"
          "Then `disentangle.trained.lod(name)` and `disentangle.trained.load`.\n")
  assert stale(text) == ["flag --max_pionts of experiments.evaluate",
                         "module experiments.dsprites_cascde", "name disentangle.trained.lod",
                         "path disentangle/nn/replay.py"]
