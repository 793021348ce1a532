"""Atomic writes: the target holds the old or the new content, never a part; no temp is left."""
import pytest

from disentangle import atomic


def test_write_text_replaces_and_leaves_no_temporary(tmp_path):
  path = tmp_path / "sub" / "a.json"
  atomic.write_text(path, "old")
  atomic.write_text(path, "new")
  assert path.read_text() == "new"
  assert [p.name for p in path.parent.iterdir()] == ["a.json"]


def test_failed_write_keeps_the_old_file(tmp_path):
  path = tmp_path / "a.txt"
  atomic.write_text(path, "old")
  with pytest.raises(RuntimeError):
    with atomic.replacing(path) as tmp:
      tmp.write_text("half")
      raise RuntimeError("killed")
  assert path.read_text() == "old"
  assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_replacing_keeps_the_suffix_for_format_sniffing_writers(tmp_path):
  with atomic.replacing(tmp_path / "x.png") as tmp:
    assert tmp.suffix == ".png"
    tmp.write_bytes(b"1")
  with atomic.replacing(tmp_path / "x.npy", suffix="") as tmp:
    assert not tmp.name.endswith(".npy")
    tmp.write_bytes(b"1")
  assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy", "x.png"]
