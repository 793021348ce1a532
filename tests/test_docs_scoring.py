"""docs/scoring_a_model.md runs as written from outside the checkout (the working folder a fresh
one): its Python blocks, in order, in one namespace, and the table gives what they print."""
import pathlib

import pytest

from tests import test_docs_trained_model

PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "scoring_a_model.md"


@pytest.mark.slow
def test_the_pages_examples_score_as_its_table_says(shared_data_dir, tmp_path, monkeypatch):
  monkeypatch.setenv("DISENTANGLE_DATA_DIR", str(shared_data_dir))
  monkeypatch.chdir(tmp_path)
  scope = {}
  for block in test_docs_trained_model.blocks(PAGE):
    exec(compile(block, str(PAGE), "exec"), scope)  # pylint: disable=exec-used
  rows = {l.split("|")[1].strip(): l for l in PAGE.read_text().splitlines() if l.startswith("| ")}
  for row, scores in (("PCA, 10 components", scope["pca_scores"]),
                      ("centre of mass and mass, 3 numbers", scope["moment_scores"])):
    shown = [float(v) for v in rows[row].split("|")[2:5]]  # MIG, DCI, FactorVAE score
    values = [scores["metrics"][name]["value"] for name in ("mig", "dci", "factor_score_dlib")]
    assert values == pytest.approx(shown, abs=0.002), row
    assert scores["metrics"]["encoded_part"]["num_images"] == 432
    assert scores["dataset"]["comparable_with_published"] is False
