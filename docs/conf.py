"""The documentation site: Sphinx, MyST-NB (the guides and the tutorials, executed at build),
sphinx-book-theme, and the API reference from the docstrings (autosummary).

Built from the repository's root, so that the guides' links between ``docs/``, ``benchmarks/``
and the root's pages are the same on the site as in the repository:

    sphinx-build -W -n --keep-going -c docs . build/docs

(README.md, Documentation). ``docs/_ext/disentangle_docs.py`` adds the model cards (one page per
shipped model, written from its ``model.json`` at every build), the page of registered metrics and
the check that every public name has an entry and a docstring (`api_coverage`).
"""
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import disentangle  # noqa: E402  (the version the site documents)

project = "disentangle"
author = "The disentangle authors"
copyright = "2026, The disentangle authors"  # noqa: A001  (Sphinx's name for it)
release = version = disentangle.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "disentangle_docs",
]

root_doc = "docs/index"
# The site's pages; everything else under the root (the code, the virtual environments, the
# build) is not part of it.
include_patterns = ["docs/**", "benchmarks/README.md", "benchmarks/HISTORY.md", "CHANGELOG.md",
                    "CONTRIBUTING.md"]
exclude_patterns = ["build", ".git", ".ci-venv*", ".venv", "docs/_templates", "docs/_ext",
                    "**/.ipynb_checkpoints", "docs/locatello2019/*.md"]
templates_path = ["docs/_templates"]

# MyST: the guides as GitHub shows them (headings' anchors by GitHub's rule, three levels deep).
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_links_external_new_tab = False
suppress_warnings = []

# The tutorials run at every build, from a cache keyed by their code (an unchanged tutorial is
# not run again); one that raises fails the build.
nb_execution_mode = os.environ.get("DISENTANGLE_DOCS_EXECUTE", "cache")
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True
nb_execution_cache_path = str(ROOT / "build" / "docs_cache")

# The API reference.
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": False}
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_member_order = "bysource"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
# Names of other libraries: no inventory of theirs is fetched (the build needs no network), so a
# reference to one is not checked; every reference to this project's names is.
nitpick_ignore_regex = [
    ("py:.*", r"(numpy|np|jax|jnp|jaxlib|flax|optax|chex|orbax|ml_collections|scipy|sklearn|"
              r"pathlib|typing|collections|dataclasses|concurrent|os|io|enum|abc|types|"
              r"tensorboardX|matplotlib|PIL|absl|fsspec|gcsfs)(\..*)?"),
    ("py:class", r"(Any|Callable|Optional|Sequence|Mapping|Iterable|Iterator|Union|Literal|"
                 r"NamedTuple|Path|PRNGKey|Array|ArrayLike|ConfigDict|FrozenConfigDict|Module|"
                 r"Generator|SeedSequence|ndarray|dtype|TypeAlias|Self|ellipsis|"
                 r"optional|callable|array|function|scalar|pytree|PyTree)"),
    ("py:obj", r"(Any|Callable|Optional|None)"),
]

html_theme = "sphinx_book_theme"
html_title = f"disentangle {release}"
html_theme_options = {
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "use_download_button": True,
}
# A repository's address (the `Colab` and `source` buttons) where the environment gives one.
if os.environ.get("DISENTANGLE_REPOSITORY_URL"):
  html_theme_options.update(repository_url=os.environ["DISENTANGLE_REPOSITORY_URL"],
                            use_repository_button=True, path_to_docs="docs",
                            launch_buttons={"colab_url": "https://colab.research.google.com"})
html_static_path = []
