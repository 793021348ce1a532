"""Datasets: loaders of the canonical files, the dSprites renderer, synthetic stand-ins.

``load_dataset(name, data_dir=..., split=...)`` (`loading`) is the one entry point used by
experiments; it returns an object with ``num_examples``, ``image_shape``, ``get_images(indices)``
(float32 NHWC in [0, 1]), ``labels`` (int64 array or None) and its named supervision
(``supervision``: target columns and binary attributes asked for by name; MNIST "digit",
Fashion-MNIST "class", dSprites its five factors, CelebA its 40 attributes, Chairs none). dSprites
also implements the ground-truth protocol (``ground_truth.GroundTruthData``) used by the metrics.
``SPLITS`` lists the splits each set accepts.

disentanglement_lib's other sets (``DLIB_SETS``) are ground-truth sets too: its dSprites variants
(``dsprites_variants``: color, noisy, scream, noshape) over our dSprites, Cars3D (``cars3d``) and
MPI3D toy / realistic / real (``mpi3d``), read from their published files.

``source='tfds'`` reads any of them (and the ground-truth sets ``shapes3d``, ``smallnorb``, which
exist only there) from a prepared TFDS set, by index, without TensorFlow (``tfds_source``);
``builders`` holds the project's own sets as TFDS builders (``python -m disentangle.data.build``).

This file only names the package's public parts; the loading logic is `loading`'s, the dataset
names the config's (``config.DATASETS``).
"""
from disentangle.data.arrays import ArrayImages
from disentangle.data.arrays import ImageDataset
from disentangle.data.arrays import to_float_images
from disentangle.data.datasets.dsprites import DSprites
from disentangle.data.datasets.dsprites import ProceduralDataWarning
from disentangle.data.datasets.dsprites_unfair import DSpritesUnfair
from disentangle.data.files import ChecksumError
from disentangle.data.files import DataFileError
from disentangle.data.files import MissingDataError
from disentangle.data.files import data_dir_origin
from disentangle.data.ground_truth import GroundTruthData
from disentangle.data.ground_truth import InMemoryGroundTruth
from disentangle.data.labels.batch_spec import IMAGES_ONLY
from disentangle.data.labels.batch_spec import BatchSpec
from disentangle.data.labels.batch_spec import LabelledSpec
from disentangle.data.labels.labelled import check_batch_spec
from disentangle.data.loading import ALL_SPLITS
from disentangle.data.loading import BUCKET_READABLE
from disentangle.data.loading import DATASETS
from disentangle.data.loading import DLIB_SETS
from disentangle.data.loading import DSPRITES_BASED
from disentangle.data.loading import SPLITS
from disentangle.data.loading import TFDS_ONLY
from disentangle.data.loading import VALIDATION_SPLITS
from disentangle.data.loading import check_split
from disentangle.data.loading import check_variant_draw
from disentangle.data.loading import load_dataset
from disentangle.data.loading import tfds_kwargs
from disentangle.data.loading import unfair_settings

__all__ = [
    # loading
    "DATASETS", "DLIB_SETS", "DSPRITES_BASED", "TFDS_ONLY", "SPLITS", "ALL_SPLITS",
    "VALIDATION_SPLITS", "BUCKET_READABLE", "load_dataset", "check_split", "check_variant_draw",
    "tfds_kwargs", "unfair_settings",
    "data_dir_origin",
    # what a loaded set is
    "ImageDataset", "ArrayImages", "to_float_images", "GroundTruthData", "InMemoryGroundTruth",
    "DSprites", "DSpritesUnfair",
    # what a method asks of a batch
    "BatchSpec", "LabelledSpec", "IMAGES_ONLY", "check_batch_spec",
    # errors and warnings
    "DataFileError", "MissingDataError", "ChecksumError", "ProceduralDataWarning",
]
