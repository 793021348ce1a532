"""The site's generated parts: a card per shipped model, the registered metrics, the config's
fields, and the check that every public name has an API entry and a docstring.

- The cards are written at every build from each model's ``model.json``
  (`disentangle.trained.card`) into ``docs/models/``, with the list of models as its index: a card
  never disagrees with the file it is written from.
- ``{registered-metrics}`` lists `disentangle.metrics.registry.METRICS` in registration order: each
  metric's name, title, stages, the function that computes it and the settings it reads at the
  protocols' defaults.
- ``{config-fields}`` tabulates `disentangle.config.base_config`'s fields: the default, the
  comment beside it in the source, and the rule `disentangle.config.RULES` checks.
- `api_coverage.problems` runs at every build; each problem is a warning (an error under ``-W``).
"""
from __future__ import annotations

import inspect
import pathlib
import re
import sys

import api_coverage
from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

LOG = logging.getLogger(__name__)
MODELS = pathlib.Path("docs") / "models"


def write_model_cards(app) -> None:
  """``docs/models/<name>.md`` for each shipped model and ``docs/models/index.md`` listing them;
  a file is rewritten only when its text changes (Sphinx then rebuilds that page alone)."""
  from disentangle import trained  # pylint: disable=g-import-not-at-top
  folder = pathlib.Path(app.srcdir) / MODELS
  folder.mkdir(parents=True, exist_ok=True)
  names = trained.shipped()
  pages = {f"{name}.md": trained.card(name) for name in names}
  rows = [f"| [`{n}`]({n}.md) | {trained.model_info(n)['paper']} |" for n in names]
  pages["index.md"] = "\n".join([
      "# Shipped models", "",
      "The models installed with the package, each loaded by name with no network "
      "(`disentangle.load(name)`, [Using a trained model](../using_a_trained_model.md)). Each "
      "card is written from the model's `model.json` at every build of this site.", "",
      "| model | what it reproduces |", "|---|---|", *rows, "",
      "```{toctree}", ":hidden:", "", *names, "```", ""])
  for stale in folder.glob("*.md"):
    if stale.name not in pages:
      stale.unlink()
  for name, text in pages.items():
    path = folder / name
    if not path.exists() or path.read_text() != text:
      path.write_text(text)


def check_api(app) -> None:
  for problem in api_coverage.problems(pathlib.Path(app.srcdir)):
    LOG.warning(problem, type="disentangle", subtype="api")


class RegisteredMetrics(SphinxDirective):
  """Every registered metric: name, title, stages, its function (autodoc) and its settings."""

  def run(self):
    from disentangle import config as config_lib  # pylint: disable=g-import-not-at-top
    from disentangle.metrics import registry  # pylint: disable=g-import-not-at-top
    eval_config = config_lib.base_config().eval
    lines, seen = [], set()  # MyST markdown: the page's own syntax
    for m in registry.METRICS.values():
      fn = m.compute
      name = f"{fn.__module__}.{fn.__qualname__}"
      stages = []
      if m.training_flag is None:
        stages.append("at eval steps whenever it applies")
      elif m.training_flag:
        stages.append(f"at eval steps where `eval.{m.training_flag}`")
      stages.append("in the run stage" + (f" where `eval.{m.run_flag}`" if m.run_flag else ""))
      traits = [t for t, on in (("ground truth", m.ground_truth), ("sampled", m.sampled),
                                ("postprocessed", m.postprocessed),
                                ("tabulated", m.tabulated)) if on]
      settings = m.settings(eval_config, "run")
      lines += [f"### `{m.name}`: {m.title}", "",
                f"- computed: {'; '.join(stages)}",
                f"- traits: {', '.join(traits) or 'none'}",
                "- settings at the protocols' defaults: " + (", ".join(
                    f"`{k}={v!r}`" for k, v in settings.items()) or "none"), "",
                "```{eval-rst}", f".. autofunction:: {name}",
                *(["   :no-index:"] if name in seen else []), "```", ""]
      seen.add(name)  # two metrics of one function (the downstream tasks): documented once
    node = nodes.section()
    node.document = self.state.document
    nested_parse_with_titles(self.state, StringList(lines, source="registered-metrics"), node)
    return node.children


class ConfigFields(SphinxDirective):
  """`disentangle.config.base_config`'s fields: default, the source's comment, the rule."""

  def run(self):
    from disentangle import config as config_lib  # pylint: disable=g-import-not-at-top
    comments = config_fields_comments(inspect.getsource(config_lib.base_config))
    rows = ["| field | default | what it is | accepted |", "|---|---|---|---|"]
    for field, default in config_lib.flatten(config_lib.base_config()):
      rule = config_lib.RULES.get(field)
      rows.append(f"| `{field}` | `{default!r}` | {_escape(comments.get(field, ''))} | "
                  f"{_escape(rule[1]) if rule else ''} |")
    node = nodes.container()
    self.state.nested_parse(StringList(rows, source="config-fields"), self.content_offset, node)
    return [node]


def _escape(text: str) -> str:
  """A comment as a table cell's text: Markdown's special characters taken literally."""
  return re.sub(r"([*|_\\<>\[\]])", r"\\\1", text) or " "


def config_fields_comments(source: str) -> dict[str, str]:
  """The comment beside each ``c.<field> = ...`` of ``base_config``'s source, with its
  continuation lines (comment lines that follow, indented past the assignment)."""
  out, current = {}, None
  for line in source.splitlines():
    if m := re.match(r"\s*c\.([\w.]+)\s*=\s*(.*)$", line):
      current = m[1]
      code, _, comment = m[2].partition("#")
      out[current] = comment.strip() if "ConfigDict()" not in code else ""
    elif current and (m := re.match(r"\s+#\s?(.*)$", line)):
      out[current] = f"{out[current]} {m[1].strip()}".strip()
    else:
      current = None
  return out


def internal_reference(app, env, node, contnode):
  """A Python reference to a name of this package that imports but has no page of the reference
  (an internal module's class, say) is shown as text; a name that does not import is left
  unresolved, and ``-n`` reports it. An unqualified name of an autosummary table's line (which
  has no module context) is looked up in the package's imported modules."""
  del app, env
  if node.get("refdomain") != "py":
    return None
  target = node["reftarget"].lstrip("~.")
  context = [node.get("py:module"), ".".join(filter(None, (node.get("py:module"),
                                                           node.get("py:class"))))]
  for name in [target] + [f"{c}.{target}" for c in context if c]:
    if name.startswith("disentangle"):
      try:
        api_coverage.resolve(name)
      except (ImportError, AttributeError):
        continue
      return contnode
  if not context[0] and "." not in target:
    modules = [m for name, m in list(sys.modules.items()) if name.startswith("disentangle.")]
    if any(target in vars(m) for m in modules if m is not None):
      return contnode
  return None


def setup(app):
  app.connect("missing-reference", internal_reference)
  app.connect("builder-inited", write_model_cards)
  app.connect("builder-inited", check_api)
  app.add_directive("registered-metrics", RegisteredMetrics)
  app.add_directive("config-fields", ConfigFields)
  return {"parallel_read_safe": True, "parallel_write_safe": True}
