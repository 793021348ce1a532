"""Checksums, fetching and the data folder (disentangle.data.files)."""
import hashlib
import os
import pathlib
import shutil

import pytest

from disentangle.data import files

LABELS = "mnist/t10k-labels-idx1-ubyte.gz"


def _copy_canonical(shared_data_dir, tmp_path, relpath=LABELS) -> pathlib.Path:
  dst = tmp_path / relpath
  dst.parent.mkdir(parents=True, exist_ok=True)
  shutil.copyfile(shared_data_dir / relpath, dst)
  return dst


def test_explicit_data_dir_wins_over_env_then_default(monkeypatch, tmp_path):
  """An explicit folder wins; '' / None mean $DISENTANGLE_DATA_DIR, else ~/disentangle_data."""
  monkeypatch.delenv(files.DATA_DIR_ENV, raising=False)
  assert files.resolve_data_dir(str(tmp_path)) == tmp_path
  assert files.resolve_data_dir("~/somewhere") == pathlib.Path.home() / "somewhere"
  folder, origin = files.data_dir_origin("")
  assert folder == pathlib.Path.home() / "disentangle_data" and origin.startswith("default")
  assert "$DISENTANGLE_DATA_DIR" in origin  # the run's data: line says how to change it
  assert files.resolve_data_dir(None) == pathlib.Path.home() / "disentangle_data"
  monkeypatch.setenv(files.DATA_DIR_ENV, "~/from_env")
  assert files.data_dir_origin(str(tmp_path)) == (tmp_path, "dataset.data_dir")
  assert files.data_dir_origin("") == (pathlib.Path.home() / "from_env", "$DISENTANGLE_DATA_DIR")
  assert files.resolve_data_dir(None) == pathlib.Path.home() / "from_env"


def test_table_matches_shared_sha256sums(shared_data_dir):
  """The pinned digests agree with the independently written SHA256SUMS of the offline folder."""
  sums = {}
  for line in (shared_data_dir / "SHA256SUMS").read_text().splitlines():
    digest, name = line.split()
    sums[name.lstrip("*")] = digest
  shared = [k for k in files.FILES if k in sums]
  assert len(shared) == 6  # 4 MNIST + 2 Fashion-MNIST label files
  for key in shared:
    assert files.FILES[key].algorithm == "sha256"
    assert files.FILES[key].digest == sums[key], key
  assert len([k for k in files.FILES if k.startswith(("mnist/", "fashion_mnist/"))]) == 8
  dsprites = files.FILES[files.DSPRITES_FILE]
  assert (dsprites.algorithm, dsprites.digest) == ("md5", "7da33b31b13a06f4b04a70402ce90c2e")


def test_fetch_verifies_present_files(shared_data_dir):
  for key in ("mnist/train-labels-idx1-ubyte.gz", "fashion_mnist/t10k-labels-idx1-ubyte.gz"):
    path = files.fetch(key, shared_data_dir)
    assert path == shared_data_dir / key


def test_corrupt_file_raises_naming_file_and_checksums(shared_data_dir, tmp_path):
  path = _copy_canonical(shared_data_dir, tmp_path)
  data = bytearray(path.read_bytes())
  data[100] ^= 0xFF
  path.write_bytes(bytes(data))
  with pytest.raises(files.ChecksumError) as err:
    files.fetch(LABELS, tmp_path)
  msg = str(err.value)
  assert isinstance(err.value, files.DataFileError)
  assert str(path) in msg
  assert files.FILES[LABELS].digest in msg
  assert hashlib.sha256(bytes(data)).hexdigest() in msg
  assert files.FILES[LABELS].urls[0] in msg


def test_missing_file_raises_with_checksum_and_url(tmp_path):
  assert files.downloads_disabled()  # set by conftest
  with pytest.raises(files.MissingDataError) as err:
    files.fetch(files.DSPRITES_FILE, tmp_path)
  msg = str(err.value)
  assert str(tmp_path / files.DSPRITES_FILE) in msg
  assert "7da33b31b13a06f4b04a70402ce90c2e" in msg
  assert "github.com/deepmind/dsprites-dataset" in msg
  assert not (tmp_path / "dsprites").exists()
  with pytest.raises(ValueError, match="unknown data file"):
    files.fetch("mnist/nope.gz", tmp_path)


def test_download_from_file_url_is_verified_and_atomic(monkeypatch, shared_data_dir, tmp_path):
  """A file:// URL exercises the download path without any network access."""
  monkeypatch.delenv(files.NO_DOWNLOAD_ENV, raising=False)
  source = shared_data_dir / LABELS
  good = files.DataFile("x/labels.gz", "sha256", files.FILES[LABELS].digest,
                        (source.resolve().as_uri(),))
  path = files.fetch(good, tmp_path / "data")
  assert path.read_bytes() == source.read_bytes()
  assert os.listdir(path.parent) == ["labels.gz"]  # no temporary file left behind

  bad = files.DataFile("y/labels.gz", "sha256", "0" * 64, (source.resolve().as_uri(),))
  with pytest.raises(files.MissingDataError, match="0000000000"):
    files.fetch(bad, tmp_path / "data")
  assert not (tmp_path / "data" / "y").exists()  # neither the file nor an empty folder
  with pytest.raises(files.MissingDataError, match="not allowed"):
    files.fetch(bad, tmp_path / "data", allow_download=False)


def test_verification_is_cached_per_size_and_mtime(monkeypatch, shared_data_dir, tmp_path):
  path = _copy_canonical(shared_data_dir, tmp_path)
  calls = []
  real = files.file_digest
  monkeypatch.setattr(files, "file_digest", lambda *a, **k: calls.append(a) or real(*a, **k))
  files.fetch(LABELS, tmp_path)
  files.fetch(LABELS, tmp_path)
  assert len(calls) == 1
  data = bytearray(path.read_bytes())
  data[-1] ^= 1
  path.write_bytes(bytes(data))
  os.utime(path, ns=(1, 1))  # a different mtime, whatever the clock resolution
  with pytest.raises(files.ChecksumError):
    files.fetch(LABELS, tmp_path)
  assert len(calls) == 2


def test_md5_digest_matches_hashlib(tmp_path):
  path = tmp_path / "blob"
  path.write_bytes(os.urandom(3 << 20))
  assert files.file_digest(path, "md5") == hashlib.md5(path.read_bytes()).hexdigest()
  spec = files.DataFile("blob", "md5", hashlib.md5(path.read_bytes()).hexdigest())
  assert files.fetch(spec, tmp_path) == path


def test_a_failed_download_names_the_url_not_a_write(monkeypatch, tmp_path):
  """A mirror that cannot be read is reported as a download that failed, with its reason; the
  atomic writer around it names only write errors."""
  monkeypatch.delenv(files.NO_DOWNLOAD_ENV, raising=False)
  url = (tmp_path / "absent.gz").as_uri()
  spec = files.DataFile("z/labels.gz", "sha256", "0" * 64, (url,))
  with pytest.raises(files.MissingDataError) as e:
    files.fetch(spec, tmp_path / "data")
  assert f"  could not download {url}: " in str(e.value) and "cannot write" not in str(e.value)
  assert not (tmp_path / "data" / "z").exists()
