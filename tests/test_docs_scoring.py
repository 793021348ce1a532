"""The scoring tutorial runs as written from outside the checkout (the working folder a fresh
one): its code cells, in order, in one namespace, and the scoring guide's table gives what they
print (docs/tutorials/scoring_your_encoder.md; the site's build executes it too)."""
import pathlib
import re

import pytest

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"
PAGE = DOCS / "scoring_a_model.md"
TUTORIAL = DOCS / "tutorials" / "scoring_your_encoder.md"


def code_cells(page: pathlib.Path) -> list[str]:
  """A MyST notebook's code cells, without their options and without the cells of IPython's
  own syntax (the install cell's ``%pip``)."""
  cells = re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", page.read_text(), flags=re.S)
  cells = [re.sub(r"\A(?::[^\n]*\n)+\n?", "", c) for c in cells]
  return [c for c in cells if not re.search(r"^\s*[%!]", c, flags=re.M)]


@pytest.mark.slow
def test_the_tutorials_encoders_score_as_the_guides_table_says(shared_data_dir, tmp_path,
                                                                monkeypatch):
  monkeypatch.setenv("DISENTANGLE_DATA_DIR", str(shared_data_dir))
  monkeypatch.setenv("MPLBACKEND", "Agg")
  monkeypatch.chdir(tmp_path)
  scope = {}
  for cell in code_cells(TUTORIAL):
    exec(compile(cell, str(TUTORIAL), "exec"), scope)  # pylint: disable=exec-used
  rows = {l.split("|")[1].strip(): l for l in PAGE.read_text().splitlines() if l.startswith("| ")}
  for row, scores in (("PCA, 10 components", scope["pca_scores"]),
                      ("centre of mass and mass, 3 numbers", scope["moment_scores"])):
    shown = [float(v) for v in rows[row].split("|")[2:5]]  # MIG, DCI, FactorVAE score
    values = [scores["metrics"][name]["value"] for name in ("mig", "dci", "factor_score_dlib")]
    assert values == pytest.approx(shown, abs=0.002), row
    assert scores["metrics"]["encoded_part"]["num_images"] == 432
    assert scores["dataset"]["comparable_with_published"] is False
