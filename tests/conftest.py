"""Shared test setup: 8 forced CPU devices (set before JAX starts) and the offline data folder."""
import os
import pathlib

os.environ.setdefault("DISENTANGLE_NO_DOWNLOAD", "1")  # tests never touch the network
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)

import pytest  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED = pathlib.Path(os.environ.get("DISENTANGLE_SHARED_DIR", REPO.parent / "shared"))
if (SHARED / "data").is_dir():  # the offline data folder, for loaders called without a folder
  os.environ.setdefault("DISENTANGLE_DATA_DIR", str(SHARED / "data"))


@pytest.fixture(scope="session")
def shared_data_dir() -> pathlib.Path:
  """`../shared/data` beside the checkout (real MNIST, 12 real dSprites images)."""
  path = SHARED / "data"
  if not path.is_dir():
    pytest.skip(f"offline data folder {path} not found (set DISENTANGLE_SHARED_DIR)")
  return path
