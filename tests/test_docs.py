"""The guides stay guides and their pointers resolve (pure file reading, no JAX).

- README.md, docs/*.md and benchmarks/README.md carry no time of day, no load average and no
  "not kept": the story of how a figure was reached belongs in benchmarks/HISTORY.md.
- Every pointer to a section resolves, in README.md, docs/*.md, benchmarks/*.md and the Python
  files under disentangle/, experiments/ and benchmarks/: a markdown link ``[text](path#anchor)``
  names a file that exists and, with an anchor, a heading of it (GitHub's slug rule); a bare
  ``file.md#anchor`` names a heading too; ``file.md, "Section"`` or ``file.md ("Section")`` names a
  heading that begins with that text.
"""
import functools
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
GUIDES = ["README.md", "CONTRIBUTING.md",
          *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")),
          *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*/*.md")
                  if p.parent.name != "models"),
          "benchmarks/README.md"]
MARKDOWN = GUIDES + ["benchmarks/HISTORY.md"]
CODE = sorted(str(p.relative_to(ROOT)) for folder in ("disentangle", "experiments", "benchmarks")
              for p in (ROOT / folder).rglob("*.py"))

# A time of day (11:08, 9:05 UTC), but not a duration such as Slurm's 4:00:00 nor a port (host:1234).
TIME_OF_DAY = re.compile(r"(?<![\d:])(?:[01]?\d|2[0-3]):[0-5]\d(?![\d:])|\bUTC\b")
LOAD = re.compile(r"\bload(?:avg| average)?\s*[:=]?\s*\d|\bloadavg\b", re.IGNORECASE)
NOT_KEPT = re.compile(r"\bnot\s+kept\b", re.IGNORECASE)
LAB_NOTES = {"a time of day": TIME_OF_DAY, "a load average": LOAD, '"not kept"': NOT_KEPT}

MD_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_LINK = re.compile(r"[\w./-]+\.md(?:#[\w-]+)?$")  # in a .py file: links to a page only
ANCHORED = re.compile(r"(?<![\w./-])([\w./-]*\w\.md)#([\w-]+)")
SECTION = re.compile(r"(?<![\w./-])([\w./-]*\w\.md)`*(?:,|\s*\()[\s#]*\"([^\"]+)\"")


def _slug(text: str) -> str:
  """GitHub's anchor of a heading: link text kept, lowercase, punctuation but '-' and '_'
  dropped, each space a '-'."""
  text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text.strip()).lower()
  return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@functools.cache
def _headings(path: pathlib.Path) -> tuple[list[str], set[str]]:
  """The headings of a markdown file (outside code fences) and their anchors, duplicates
  numbered as GitHub numbers them."""
  titles, anchors, fenced = [], set(), False
  for line in path.read_text(encoding="utf-8").splitlines():
    if line.lstrip().startswith(("```", "~~~")):
      fenced = not fenced
    elif not fenced and (m := re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)):
      titles.append(m.group(1))
      slug, n = _slug(m.group(1)), 0
      while (slug if n == 0 else f"{slug}-{n}") in anchors:
        n += 1
      anchors.add(slug if n == 0 else f"{slug}-{n}")
  return titles, anchors


# The pages the site's build writes (docs/_ext/disentangle_docs.py): the list of shipped models
# and a card per model, one for each disentangle/pretrained/<name>/model.json.
GENERATED = {ROOT / "docs" / "models" / "index.md"} | {
    ROOT / "docs" / "models" / f"{p.parent.name}.md"
    for p in (ROOT / "disentangle" / "pretrained").glob("*/model.json")}


def _target(source: str, name: str) -> pathlib.Path | None:
  """The file a pointer in ``source`` names: beside the source, else from the repository root;
  a page the site's build writes counts as existing."""
  for base in ((ROOT / source).parent, ROOT):
    path = (base / name).resolve()
    if path.is_file() or path in GENERATED:
      return path
  return None


def _plain(text: str) -> str:
  return " ".join(text.replace("`", "").replace("*", "").split()).lower()


def _pointers(source: str):
  """(line, what it names, why it does not resolve or None) for each pointer in ``source``."""
  text = (ROOT / source).read_text(encoding="utf-8")
  line_of = lambda pos: text.count("\n", 0, pos) + 1
  for m in MD_LINK.finditer(text):
    link = m.group(1).strip("<>")
    if re.match(r"[a-z][a-z0-9+.-]*:", link):  # http:, https:, mailto:, gs:
      continue
    if source.endswith(".py") and not CODE_LINK.match(link):  # `f(x)[i](y)` is no link
      continue
    name, _, anchor = link.partition("#")
    path = _target(source, name) if name else ROOT / source
    if path is None and name and (ROOT / source).parent.joinpath(name).resolve().is_dir():
      continue
    yield line_of(m.start()), link, _why(path, anchor, None)
  for m in ANCHORED.finditer(text):
    yield line_of(m.start()), m.group(0), _why(_target(source, m.group(1)), m.group(2), None)
  for m in SECTION.finditer(text):
    yield (line_of(m.start()), f'{m.group(1)}, "{m.group(2)}"',
           _why(_target(source, m.group(1)), None, m.group(2)))


def _why(path, anchor, section) -> str | None:
  if path is None:
    return "no such file"
  if path.suffix != ".md" or path in GENERATED:
    return None
  titles, anchors = _headings(path)
  if anchor and anchor not in anchors:
    return f"no heading with the anchor #{anchor}"
  if section and not any(_plain(t).startswith(_plain(section)) for t in titles):
    return f'no heading beginning "{section}"'
  return None


@pytest.mark.parametrize("page", GUIDES)
def test_guides_carry_no_lab_notes(page):
  found = [f"{page}:{n}: {what}: {line.strip()}"
           for n, line in enumerate((ROOT / page).read_text(encoding="utf-8").splitlines(), 1)
           for what, pattern in LAB_NOTES.items() if pattern.search(line)]
  assert not found, "lab notes belong in benchmarks/HISTORY.md:\n" + "\n".join(found)


@pytest.mark.parametrize("kind", ["markdown", "code"])
def test_every_pointer_resolves(kind):
  broken = [f"{source}:{n}: {what}: {why}"
            for source in (MARKDOWN if kind == "markdown" else CODE)
            for n, what, why in _pointers(source) if why]
  assert not broken, "\n".join(broken)


@pytest.mark.parametrize("line, found", [
    ("at 12:05 UTC", True), ("took 1.0 s at 12:07", True), ("9:05", True),
    ("--slurm_time=4:00:00", False), ("host0:12345", False), ("1:1 mapping", False),
])
def test_time_of_day_pattern(line, found):
  assert bool(TIME_OF_DAY.search(line)) is found


@pytest.mark.parametrize("heading, slug", [
    ("Table 3 in one command: `experiments.reproduce` at 1/25 of the schedule, two seeds",
     "table-3-in-one-command-experimentsreproduce-at-125-of-the-schedule-two-seeds"),
    ("disentanglement_lib's metric suite", "disentanglement_libs-metric-suite"),
    ("Runs and sweeps in one program, the (runs, data) mesh",
     "runs-and-sweeps-in-one-program-the-runs-data-mesh"),
])
def test_slug_is_githubs(heading, slug):
  assert _slug(heading) == slug
