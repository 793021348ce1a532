"""The site's API reference and model cards, checked without building the site.

- Every public name (the ``__all__`` of the package's ``__init__`` files) has an entry in the API
  pages, and every entry imports and has a docstring of its own (``docs/_ext/api_coverage.py``,
  which the build runs too); removing a public function's docstring fails it.
- A shipped model's card shows its ``model.json``'s numbers.
"""
import json
import pathlib
import re
import sys

import pytest

from disentangle import trained

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import api_coverage  # noqa: E402  (the site's own module)


def test_every_public_name_has_an_entry_and_a_docstring():
  assert api_coverage.problems(ROOT) == []


def test_the_entries_hold_the_names_a_user_looks_for_first():
  listed = set(api_coverage.entries(ROOT))
  assert {"disentangle.load", "disentangle.score", "disentangle.data.load_dataset",
          "disentangle.data.InMemoryGroundTruth", "disentangle.methods.register",
          "disentangle.methods.base.VAEMethod", "disentangle.losses",
          "disentangle.assignment", "disentangle.train.trainer.train"} <= listed


def test_a_public_function_without_its_docstring_is_found(monkeypatch):
  from disentangle.data import loading  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(loading.load_dataset, "__doc__", None)
  assert api_coverage.problems(ROOT) == [
      "disentangle.data.load_dataset: listed in the API pages but has no docstring"]


def test_a_public_name_without_an_entry_is_found(monkeypatch):
  import disentangle.metrics  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(disentangle.metrics, "__all__", [*disentangle.metrics.__all__, "new_score"])
  assert api_coverage.problems(ROOT) == [
      "disentangle.metrics.new_score: public (in its package's __all__) but in no API page "
      "(docs/api/*.md)"]


@pytest.mark.parametrize("name", trained.shipped())
def test_a_cards_numbers_are_its_model_json(name):
  info = json.loads((trained.PRETRAINED / name / trained.MODEL).read_text())
  card = trained.card(name)
  rows = {m[1]: m[2] for m in re.finditer(r"^\| [^|]*\(`(\w+)`\) \| ([\d.]+) ", card, re.M)}
  scored = {k: v for k, v in info["results"].items() if isinstance(v, float)}
  assert scored and {k: float(v) for k, v in rows.items()} == scored
  assert f"| seed | {info['seed']} |" in card and f"| steps | {info['step']:,} |" in card
  assert f"`{info['command']}`" in card and info["params_sha256"] in card
  assert f"{info['training_seconds']:,} s" in card
  for value in (*info["versions"].values(), info["intended_use"], *info["limits"]):
    assert str(value) in card
