"""Canonical dataset files: where they live, their checksums, and how to fetch them.

Every raw file a loader reads is listed in ``FILES`` with the checksum of the canonical upstream
file (sha256 where one is published, md5 for dSprites, the only digest its authors publish).
``fetch`` returns a verified local path: it checks a file that is present, downloads one that is
missing (when allowed; plain ``urllib``, no TensorFlow), and otherwise raises ``DataFileError``
saying what is missing, which checksum it must have and where to get it.

The data folder is ``resolve_data_dir(configured)``: an explicit (non-empty) configured folder,
else the environment variable ``DISENTANGLE_DATA_DIR``, else ``~/disentangle_data``. The folder may be a bucket URL (``gs://bucket/data``,
`disentangle.paths`): ``fetch`` then copies the file, once, into the cache folder
(``<cache dir>/bucket/<bucket>/<path>``, checked against its checksum like a download) and
returns that local copy, which the loaders read as any file. Setting
``DISENTANGLE_NO_DOWNLOAD`` (to anything but ``''``, ``0`` or ``false``) forbids downloads
everywhere; the tests set it.

Layout inside the data folder::

  mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz
  fashion_mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz
  dsprites/dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz
  chairs/...            (folder of images, see ``chairs.py``; not checksummed)
  celeba/img_align_celeba/, celeba/list_attr_celeba.txt   (see ``celeba.py``)
"""
from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import pathlib
import urllib.request

from disentangle import atomic
from disentangle import errors
from disentangle import paths

_LOG = logging.getLogger(__name__)

DATA_DIR_ENV = "DISENTANGLE_DATA_DIR"
SYNTHETIC_DIR_ENV = "DISENTANGLE_SYNTHETIC_DIR"
CACHE_DIR_ENV = "DISENTANGLE_CACHE_DIR"
NO_DOWNLOAD_ENV = "DISENTANGLE_NO_DOWNLOAD"
DEFAULT_DATA_DIR = "~/disentangle_data"
DEFAULT_CACHE_DIR = "~/.cache/disentangle"


class DataFileError(errors.UserError, OSError):
  """A dataset file or folder is missing, corrupt or malformed (the message says how to fix it)."""


class MissingDataError(DataFileError):
  """The file or folder is absent (and could not be downloaded)."""


class ChecksumError(DataFileError):
  """The file is present but its checksum differs from the canonical one."""


class DownloadError(DataFileError):
  """A URL could not be read (one mirror of a missing file)."""


@dataclasses.dataclass(frozen=True)
class DataFile:
  """One canonical file.

  Attributes:
    relpath: path inside the data folder, e.g. ``'mnist/train-images-idx3-ubyte.gz'``.
    algorithm: ``'sha256'`` or ``'md5'`` (any ``hashlib`` name).
    digest: lowercase hex digest of the canonical file.
    urls: download locations, tried in order.
    size: size in bytes, when known (only used in messages).
    note: extra instructions for obtaining the file by hand.
  """
  relpath: str
  algorithm: str
  digest: str
  urls: tuple[str, ...] = ()
  size: int | None = None
  note: str = ""


_MNIST_MIRRORS = ("https://ossci-datasets.s3.amazonaws.com/mnist/",
                  "https://storage.googleapis.com/cvdf-datasets/mnist/")
_FASHION_MIRRORS = ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
                    "https://github.com/zalandoresearch/fashion-mnist/raw/master/data/fashion/")
_DSPRITES_NAME = "dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz"


def _idx_files(folder, mirrors, table):
  return {f"{folder}/{name}": DataFile(f"{folder}/{name}", "sha256", digest,
                                       tuple(m + name for m in mirrors), size)
          for name, (digest, size) in table.items()}


# sha256 of the canonical files (shared/data/README.md; the values torchvision / TFDS pin).
FILES: dict[str, DataFile] = {
    **_idx_files("mnist", _MNIST_MIRRORS, {
        "train-images-idx3-ubyte.gz":
            ("440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609", 9912422),
        "train-labels-idx1-ubyte.gz":
            ("3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c", 28881),
        "t10k-images-idx3-ubyte.gz":
            ("8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6", 1648877),
        "t10k-labels-idx1-ubyte.gz":
            ("f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6", 4542),
    }),
    **_idx_files("fashion_mnist", _FASHION_MIRRORS, {
        "train-images-idx3-ubyte.gz":
            ("3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84", 26421880),
        "train-labels-idx1-ubyte.gz":
            ("a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845", 29515),
        "t10k-images-idx3-ubyte.gz":
            ("346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073", 4422102),
        "t10k-labels-idx1-ubyte.gz":
            ("67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5", 5148),
    }),
    # Matthey et al. (2017), deepmind/dsprites-dataset; only md5 (and sha1) are published.
    f"dsprites/{_DSPRITES_NAME}": DataFile(
        f"dsprites/{_DSPRITES_NAME}", "md5", "7da33b31b13a06f4b04a70402ce90c2e",
        (f"https://github.com/deepmind/dsprites-dataset/raw/master/{_DSPRITES_NAME}",),
        None, "It is the file of the deepmind/dsprites-dataset repository (Apache-2.0)."),
}

DSPRITES_FILE = f"dsprites/{_DSPRITES_NAME}"


def data_dir_origin(configured: str | os.PathLike | None) -> tuple[pathlib.Path, str]:
  """(the data folder, where it came from): an explicit ``configured`` folder wins; ``''`` or
  ``None`` means ``$DISENTANGLE_DATA_DIR`` if set, else ``DEFAULT_DATA_DIR`` (``~/disentangle_data``).

  The origin reads "dataset.data_dir", "$DISENTANGLE_DATA_DIR" or "default". ``~`` is expanded;
  the folder is not created. A URL is kept as one (`paths.as_path`).
  """
  if configured:
    value, origin = configured, "dataset.data_dir"
  elif os.environ.get(DATA_DIR_ENV):
    value, origin = os.environ[DATA_DIR_ENV], f"${DATA_DIR_ENV}"
  else:
    value, origin = DEFAULT_DATA_DIR, f"default; set ${DATA_DIR_ENV} or dataset.data_dir to change it"
  if paths.is_remote(value):
    return paths.as_path(value), origin
  return pathlib.Path(os.path.expanduser(os.fspath(value))), origin


def resolve_data_dir(configured: str | os.PathLike | None) -> pathlib.Path:
  """The data folder: ``configured`` if given, else ``$DISENTANGLE_DATA_DIR``, else the default."""
  return data_dir_origin(configured)[0]


def resolve_cache_dir() -> pathlib.Path:
  """Folder for derived files (decoded caches): ``$DISENTANGLE_CACHE_DIR`` or
  ``~/.cache/disentangle``. Nothing derived from a file is written into the data folder, which may
  be shared; only the rendered dSprites set, a stand-in for the missing file, is cached there
  (``datasets/dsprites.py``)."""
  return pathlib.Path(os.path.expanduser(os.environ.get(CACHE_DIR_ENV) or DEFAULT_CACHE_DIR))


def resolve_synthetic_dir(configured: str | os.PathLike | None = None) -> pathlib.Path:
  """Where synthetic stand-ins go: ``$DISENTANGLE_SYNTHETIC_DIR``, else ``configured``, else
  ``<cache dir>/synthetic`` (never inside the data folder)."""
  value = os.environ.get(SYNTHETIC_DIR_ENV) or configured
  return (pathlib.Path(os.path.expanduser(os.fspath(value))) if value
          else resolve_cache_dir() / "synthetic")


def downloads_disabled() -> bool:
  """True when ``$DISENTANGLE_NO_DOWNLOAD`` forbids network access."""
  return os.environ.get(NO_DOWNLOAD_ENV, "").strip().lower() not in ("", "0", "false", "no")


def file_digest(path: str | os.PathLike, algorithm: str = "sha256",
                chunk_size: int = 1 << 20) -> str:
  """Hex digest of a file, read in chunks."""
  h = hashlib.new(algorithm)
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(chunk_size), b""):
      h.update(chunk)
  return h.hexdigest()


# (resolved path, size, mtime_ns, algorithm) -> digest that matched; avoids re-hashing.
_VERIFIED: dict[tuple[str, int, int, str], str] = {}


def _how_to_get(spec: DataFile, path: pathlib.Path) -> str:
  urls = "\n".join(f"  {u}" for u in spec.urls) or "  (no public URL known)"
  size = f" ({spec.size} bytes)" if spec.size else ""
  note = f"\n{spec.note}" if spec.note else ""
  return (f"Download it{size} from one of\n{urls}\nto {path} (call `fetch` with downloads allowed "
          f"and {NO_DOWNLOAD_ENV} unset, or use curl/wget), or point {DATA_DIR_ENV} at a folder "
          f"holding '{spec.relpath}'.{note}")


def verify(path: str | os.PathLike, spec: DataFile) -> pathlib.Path:
  """Checks ``path`` against ``spec``'s checksum; raises ``ChecksumError`` if it differs.

  Results are cached per (path, size, mtime) for the life of the process.
  """
  path = pathlib.Path(path)
  st = path.stat()
  key = (str(path.resolve()), st.st_size, st.st_mtime_ns, spec.algorithm)
  if _VERIFIED.get(key) == spec.digest.lower():
    return path
  actual = file_digest(path, spec.algorithm)
  if actual != spec.digest.lower():
    raise ChecksumError(
        f"checksum mismatch for {path}: expected {spec.algorithm} {spec.digest}, got {actual}. "
        f"The file is corrupt, truncated or not the canonical '{spec.relpath}'; delete it and "
        f"obtain it again. " + _how_to_get(spec, path))
  _VERIFIED[key] = actual
  return path


def _download(spec: DataFile, path: pathlib.Path) -> None:
  """Downloads to a temporary file beside ``path``, verifies it, then renames it atomically."""
  created = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
  path.parent.mkdir(parents=True, exist_ok=True)
  failures = []
  for url in spec.urls:
    try:
      h = hashlib.new(spec.algorithm)
      _LOG.info("downloading %s -> %s", url, path)
      with atomic.replacing(path, suffix=".part") as tmp:
        with open(tmp, "wb") as out:
          _copy_url(url, out, h)
        if h.hexdigest() != spec.digest.lower():
          raise ChecksumError(f"{url}: expected {spec.algorithm} {spec.digest}, got "
                              f"{h.hexdigest()}")
      st = path.stat()
      _VERIFIED[(str(path.resolve()), st.st_size, st.st_mtime_ns, spec.algorithm)] = h.hexdigest()
      return
    except Exception as e:  # noqa: BLE001 -- try the next mirror, report all failures below.
      failures.append(f"  {e}" if isinstance(e, errors.UserError) else
                      f"  {url}: {type(e).__name__}: {e}")
      _LOG.warning("download of %s failed: %s", url, e)
  for folder in created:  # innermost first: leave no empty folders behind
    try:
      folder.rmdir()
    except OSError:
      break
  raise MissingDataError(f"missing data file {path} (expected {spec.algorithm} {spec.digest}) and "
                         f"every download failed:\n" + "\n".join(failures) + "\n" +
                         _how_to_get(spec, path))


def _copy_url(url: str, out, digest) -> None:
  """Reads ``url`` into the open file ``out``, updating ``digest``; `DownloadError` (could not
  download, and why) when the URL cannot be opened or read."""
  def failed(e: OSError) -> DownloadError:
    return DownloadError(f"could not download {url}: {getattr(e, 'reason', None) or e}")
  try:
    response = urllib.request.urlopen(url, timeout=60)
  except OSError as e:
    raise failed(e) from e
  with response:
    while True:
      try:
        chunk = response.read(1 << 20)
      except OSError as e:
        raise failed(e) from e
      if not chunk:
        return
      digest.update(chunk)
      out.write(chunk)


def _from_bucket(spec: DataFile, url) -> pathlib.Path:
  """The verified local copy of the object ``url`` (module docstring): copied once into the
  cache folder, atomically; `MissingDataError` when the object is absent."""
  path = resolve_cache_dir() / "bucket" / str(url).split("://", 1)[1]
  if path.is_file():
    try:
      return verify(path, spec)
    except ChecksumError:
      pass  # a copy of an older object: copied again
  if not url.is_file():
    raise MissingDataError(f"missing data file {url} (expected {spec.algorithm} {spec.digest}). "
                           + _how_to_get(spec, url))
  path.parent.mkdir(parents=True, exist_ok=True)
  with atomic.replacing(path, suffix=".part") as tmp, url.open("rb") as src, \
      open(tmp, "wb") as out:
    for chunk in iter(lambda: src.read(1 << 20), b""):
      out.write(chunk)
  try:
    return verify(path, spec)
  except ChecksumError as e:
    path.unlink(missing_ok=True)
    raise ChecksumError(str(e).replace(str(path), str(url), 1)) from None


def fetch(name: str | DataFile, data_dir: str | os.PathLike,
          allow_download: bool = True) -> pathlib.Path:
  """Returns the verified local path of a canonical file, downloading it if needed and allowed.

  Args:
    name: a key of ``FILES`` (e.g. ``'mnist/t10k-labels-idx1-ubyte.gz'``) or a ``DataFile``.
    data_dir: the data folder (see ``resolve_data_dir``).
    allow_download: whether a missing file may be downloaded (also needs
      ``$DISENTANGLE_NO_DOWNLOAD`` unset).

  Raises:
    ChecksumError: the file is present with a different checksum.
    MissingDataError: the file is missing and was not (or could not be) downloaded.
  """
  if isinstance(name, DataFile):
    spec = name
  elif name in FILES:
    spec = FILES[name]
  else:
    raise ValueError(f"unknown data file {name!r}; known: {sorted(FILES)}")
  if paths.is_remote(data_dir):
    return _from_bucket(spec, paths.as_path(data_dir) / spec.relpath)
  path = pathlib.Path(data_dir) / spec.relpath
  if path.is_file():
    return verify(path, spec)
  if allow_download and not downloads_disabled() and spec.urls:
    _download(spec, path)
    return path
  why = (f"downloads are disabled ({NO_DOWNLOAD_ENV} is set)" if downloads_disabled()
         else "downloads were not allowed" if not allow_download else "no download URL is known")
  raise MissingDataError(f"missing data file {path} (expected {spec.algorithm} {spec.digest}); "
                         f"{why}. " + _how_to_get(spec, path))
