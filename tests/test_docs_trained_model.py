"""docs/using_a_trained_model.md and the README's model in five lines run as written: their
Python blocks, in order, in one namespace (``tmp``: a fresh folder; ``folder``: a folder of a few
png images)."""
import pathlib
import re

import numpy as np
from PIL import Image
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "using_a_trained_model.md"


def blocks(page=PAGE) -> list[str]:
  return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)


def namespace(tmp_path) -> dict:
  folder = tmp_path / "my_images" / "nested"
  folder.mkdir(parents=True)
  rng = np.random.default_rng(0)
  for i in range(6):
    Image.fromarray((rng.random((80, 90, 3)) * 255).astype(np.uint8)).save(folder / f"{i}.png")
  return {"tmp": str(tmp_path), "folder": str(folder.parent)}


def test_the_page_has_its_examples():
  found = blocks()
  assert len(found) >= 5 and any("disentangle.load(" in b for b in found)
  assert sum("trainer.train(" in b for b in found) == 1


@pytest.mark.slow
def test_the_shipped_model_examples_run(shared_data_dir, tmp_path, monkeypatch):
  monkeypatch.setenv("DISENTANGLE_DATA_DIR", str(shared_data_dir))
  scope = namespace(tmp_path)
  for block in blocks():
    if "trainer.train(" not in block:
      exec(compile(block, str(PAGE), "exec"), scope)  # pylint: disable=exec-used
  assert scope["codes"].discrete.shape == (8,)
  assert (tmp_path / "traversals.png").is_file() and (tmp_path / "traversals.gif").is_file()
  assert scope["same"].step == scope["model"].step
  (readme,) = [b for b in blocks(ROOT / "README.md") if "disentangle.load(" in b]
  scope = {}
  exec(compile(readme, "README.md", "exec"), scope)  # pylint: disable=exec-used
  assert scope["codes"].mean.shape == (8, 10)


@pytest.mark.slow
def test_the_own_folder_example_trains_and_loads(tmp_path):
  scope = namespace(tmp_path)
  (block,) = [b for b in blocks() if "trainer.train(" in b]
  exec(compile(block, str(PAGE), "exec"), scope)  # pylint: disable=exec-used
  mine = scope["mine"]
  assert mine.step == 20 and mine.image_shape == (64, 64, 1)
  assert mine.encode(scope["images"].get_images(np.arange(2))).mean.shape == (2, mine.latent_dim)
