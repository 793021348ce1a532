"""Atomic writes: the target holds the old or the new content, never a part; no temp is left."""
import os
import pathlib
import socket
import subprocess
import sys

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


def test_temporary_of_a_killed_writer_is_removed_by_the_next_write(tmp_path):
  """A process killed inside ``replacing`` leaves its temporary; the next write of the same file
  removes it, but not the temporary of a process still running nor one of another file."""
  path = tmp_path / "eval" / "step_20.json"
  code = ("import os, signal, sys; from disentangle import atomic\n"
          "with atomic.replacing(sys.argv[1]) as tmp:\n"
          "  tmp.write_text('half')\n"
          "  os.kill(os.getpid(), signal.SIGKILL)\n")
  assert subprocess.run([sys.executable, "-c", code, str(path)], check=False).returncode == -9
  [killed] = [p.name for p in path.parent.iterdir()]
  assert killed.startswith(".step_20.json.") and f"@{socket.gethostname()}." in killed
  assert not path.exists()
  running = f".step_20.json.{os.getpid()}@{socket.gethostname()}.abcdefgh.json"
  other_file = killed.replace("step_20", "step_40")
  for name in (running, other_file):
    (path.parent / name).write_text("half")
  atomic.write_text(path, "new")
  assert path.read_text() == "new"
  assert sorted(p.name for p in path.parent.iterdir()) == sorted(
      [running, other_file, "step_20.json"])


def test_the_temporary_is_flushed_before_the_rename_and_the_folder_after(tmp_path, monkeypatch):
  """``fsync`` of the temporary's content, then ``os.replace``, then ``fsync`` of the folder, so
  that the rename itself survives a crash of the machine."""
  events = []
  real_fsync, real_replace = os.fsync, os.replace

  def fsync(fd):
    events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
    real_fsync(fd)

  def replace(src, dst):
    events.append(("replace", os.fspath(dst)))
    real_replace(src, dst)
  monkeypatch.setattr(os, "fsync", fsync)
  monkeypatch.setattr(os, "replace", replace)
  path = tmp_path / "eval" / "step_10.json"
  atomic.write_text(path, "new")
  assert [e[0] for e in events] == ["fsync", "replace", "fsync"]
  assert pathlib.Path(events[0][1]).name.startswith(".step_10.json.")
  assert events[1][1] == str(path) and events[2][1] == str(path.parent)
  events.clear()
  with atomic.replacing(path, sync=False) as tmp:  # the benchmark's comparison
    tmp.write_text("newer")
  assert [e[0] for e in events] == ["replace"] and path.read_text() == "newer"


@pytest.fixture
def umask_of(request):
  """Sets the process's umask for the test and puts the old one back."""
  old = os.umask(request.param)
  yield request.param
  os.umask(old)


@pytest.mark.parametrize("umask_of", [0o022, 0o027], indirect=True)
def test_files_written_take_the_umask_as_open_would(tmp_path, umask_of):
  with open(tmp_path / "opened", "w"):
    pass
  expected = 0o666 & ~umask_of
  assert (tmp_path / "opened").stat().st_mode & 0o777 == expected
  atomic.write_text(tmp_path / "a.json", "{}")
  atomic.write_bytes(tmp_path / "b.bin", b"1")
  with atomic.replacing(tmp_path / "c.png") as tmp:
    tmp.write_bytes(b"png")
  for name in ("a.json", "b.bin", "c.png"):
    assert (tmp_path / name).stat().st_mode & 0o777 == expected, name
  assert atomic.umask() == umask_of


def test_umask_without_proc_is_read_and_put_back(monkeypatch):
  real_open = open

  def no_proc(path, *args, **kwargs):
    if str(path).startswith("/proc/"):
      raise FileNotFoundError(path)
    return real_open(path, *args, **kwargs)

  old = os.umask(0o027)
  try:
    monkeypatch.setattr("builtins.open", no_proc)
    assert atomic.umask() == 0o027
    assert atomic.new_file_mode() == 0o640
    assert os.umask(0o027) == 0o027  # left as it was
  finally:
    os.umask(old)
