"""Where each TFDS set's features go: the layouts of the catalog sets and the project's builders.

``LAYOUTS`` maps a dataset name to the TFDS set it is read from and how that set's features map
onto the raw-file loader's fields; ``PROJECT_BUILDERS`` names the sets built by
``disentangle.data.tfds.builders`` (``python -m disentangle.data.build``) and the layout each
stands for. Read by `source` (the reader) and `builders` (the writers) alike.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Mapping

TFDS_DATA_DIR_ENV = "TFDS_DATA_DIR"
DEFAULT_TFDS_DATA_DIR = "~/tensorflow_datasets"
# Builders of disentangle.data.tfds.builders (prepared by disentangle.data.build), with their layout.
PROJECT_BUILDERS = {"dsprites_rendered": "dsprites", "synthetic_dsprites": "dsprites",
                    "synthetic_mnist": "mnist", "synthetic_fashion_mnist": "fashion_mnist",
                    "synthetic_celeb_a": "celeba", "synthetic_shapes3d": "shapes3d"}
PROCEDURAL_BUILDERS = tuple(PROJECT_BUILDERS)  # none of them holds real data


@dataclasses.dataclass(frozen=True)
class Layout:
  """How a TFDS builder's features map onto a dataset's fields.

  ``splits``: project split -> TFDS split; ``preprocess``: 'none', 'mnist' (PIL bilinear to 32),
  'celeba' (148 centre crop, Lanczos to 64) or 'lanczos' (Lanczos to ``image_shape``);
  ``binary``: pixels are 0 / 1 (dSprites), not 0..255; ``label``: (feature, target name,
  classes); ``factors``: (feature, factor name, size) each; ``attributes``: the feature holding
  a dict of booleans.
  """
  catalog: str
  splits: Mapping[str, str]
  image_shape: tuple[int, int, int]
  preprocess: str = "none"
  binary: bool = False
  label: tuple[str, str, int] | None = None
  factors: tuple[tuple[str, str, int], ...] = ()
  attributes: str | None = None


_CELEBA_ALL = "train+validation+test"
LAYOUTS: dict[str, Layout] = {
    "mnist": Layout("mnist", {"train": "train", "test": "test"}, (32, 32, 1), "mnist",
                    label=("label", "digit", 10)),
    "fashion_mnist": Layout("fashion_mnist", {"train": "train", "test": "test"}, (32, 32, 1),
                            "mnist", label=("label", "class", 10)),
    "dsprites": Layout("dsprites", {"train": "train", "all": "train"}, (64, 64, 1), binary=True,
                       factors=(("label_shape", "shape", 3), ("label_scale", "scale", 6),
                                ("label_orientation", "orientation", 40),
                                ("label_x_position", "pos_x", 32),
                                ("label_y_position", "pos_y", 32))),
    "celeba": Layout("celeb_a", {"train": _CELEBA_ALL, "all": _CELEBA_ALL,
                                 "official_train": "train", "official_valid": "validation",
                                 "official_test": "test"}, (64, 64, 3), "celeba",
                     attributes="attributes"),
    "shapes3d": Layout("shapes3d", {"train": "train", "all": "train"}, (64, 64, 3),
                       factors=(("label_floor_hue", "floor_hue", 10),
                                ("label_wall_hue", "wall_hue", 10),
                                ("label_object_hue", "object_hue", 10),
                                ("label_scale", "scale", 8), ("label_shape", "shape", 4),
                                ("label_orientation", "orientation", 15))),
    # 'all': both chunks, as disentanglement_lib reads them (data/ground_truth/norb.py, 34-37)
    "smallnorb": Layout("smallnorb", {"train": "train", "test": "test", "all": "train+test"},
                        (64, 64, 1), "lanczos",
                        factors=(("label_category", "category", 5),
                                 ("label_elevation", "elevation", 9),
                                 ("label_azimuth", "azimuth", 18),
                                 ("label_lighting", "lighting", 6))),
}


def resolve_tfds_data_dir(configured: str | os.PathLike | None) -> str:
  """``configured`` if given, else ``$TFDS_DATA_DIR``, else ``~/tensorflow_datasets`` (TFDS's
  default). ``~`` is expanded for local folders; ``gs://`` paths are kept as they are."""
  value = os.fspath(configured) if configured else (os.environ.get(TFDS_DATA_DIR_ENV)
                                                    or DEFAULT_TFDS_DATA_DIR)
  return value if "://" in value else os.path.expanduser(value)


def prepare_command(tfds_name: str, data_dir: str) -> str:
  """The command that prepares ``tfds_name`` under ``data_dir`` in array_record."""
  if tfds_name in PROJECT_BUILDERS:
    return f"python -m disentangle.data.build --name={tfds_name} --data_dir={data_dir}"
  return (f"tfds build {tfds_name} --data_dir={data_dir} --file_format=array_record "
          f"(needs TensorFlow, once, on one machine)")
