"""A trained model in a few lines: load a run directory or a shipped model, then encode, decode,
reconstruct and traverse.

    import disentangle
    model = disentangle.load("cascadevae_mnist_m10")   # shipped with the package: no network
    # or disentangle.load("runs/mnist_m10"), or a gs:// run directory
    codes = model.encode(images)                       # float32 [n, H, W, C] in [0, 1]
    codes.mean, codes.logvar, codes.discrete           # [n, m], [n, m], int [n] (or None)
    model.decode(codes.mean, codes.discrete)           # pixel means [n, H, W, C]

The config, the step and the image shape come from the run (or the shipped model's files); the
parameters are restored read-only through the trainer's checkpoint reader (the newest complete
checkpoint unless ``step`` is given), on whatever backend JAX has (CPU or GPU).

A shipped model is a folder of ``disentangle/pretrained/<name>/``: ``config.json`` (the run's
resolved config), ``params.msgpack`` (the parameters, ``flax.serialization``) and
``model.json`` (what it is: its command, seed, step, image shape, the results of its run and the
sha256 of ``params.msgpack``, checked at every load). :func:`export` writes one from any run.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
from typing import Any, NamedTuple, Optional, Sequence

import flax.serialization
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from disentangle import atomic
from disentangle import methods
from disentangle import paths
from disentangle import viz
from disentangle.train import host

PRETRAINED = pathlib.Path(__file__).parent / "pretrained"
PARAMS, CONFIG, MODEL = "params.msgpack", "config.json", "model.json"
TRAVERSAL_VALUES = tuple(np.linspace(-2.0, 2.0, 10))  # CascadeVAE Figs. 6, 8, 9: (-2, 2)


class ModelError(ValueError):
  """A model that cannot be loaded or an input it cannot take (one line: what and where)."""


class Encoding(NamedTuple):
  """What the encoder says of n images (numpy): the posterior of the continuous latents and the
  discrete code (None for a method without one)."""
  mean: np.ndarray                 # float32 [n, m]
  logvar: np.ndarray               # float32 [n, m], log sigma^2
  discrete: Optional[np.ndarray]   # int32 [n] or None


def shipped() -> list[str]:
  """The names of the models shipped with the package."""
  if not PRETRAINED.is_dir():
    return []
  return sorted(p.name for p in PRETRAINED.iterdir() if (p / MODEL).is_file())


@dataclasses.dataclass
class TrainedModel:
  """A method with its parameters: pure functions of numpy arrays, jitted once each."""
  config: ml_collections.ConfigDict
  params: Any
  step: int
  image_shape: tuple[int, int, int]
  source: str
  info: dict = dataclasses.field(default_factory=dict)

  def __post_init__(self):
    self.method = methods.build(self.config, self.image_shape)
    self._represent = host.jit(self.method.represent)
    self._decode = host.jit(self.method.decode)

  @property
  def latent_dim(self) -> int:
    return int(self.config.model.latent_dim)

  @property
  def num_discrete(self) -> int:
    """Values of the discrete code (0 for a method without one)."""
    return int(getattr(self.method, "num_discrete", 0) or 0)

  def _images(self, images) -> np.ndarray:
    x = np.asarray(images)
    if x.dtype == np.uint8:
      x = x.astype(np.float32) / 255.0
    if x.ndim == len(self.image_shape) and self.image_shape[-1] == 1:
      x = x[..., None]  # [n, H, W] of a one-channel model
    if x.ndim != 4 or tuple(x.shape[1:]) != self.image_shape:
      raise ModelError(f"images: expected shape [n, {', '.join(map(str, self.image_shape))}] "
                       f"(float in [0, 1] or uint8), got {list(x.shape)}")
    return x.astype(np.float32)

  def encode(self, images, batch_size: int = 500) -> Encoding:
    """The posterior means and log-variances of ``images`` [n, H, W, C] and the discrete code
    the method infers (CascadeVAE: d = argmax_k log p(x | mu(x), e_k), Section 4)."""
    x = self._images(images)
    parts = [jax.device_get(self._represent(self.params, jnp.asarray(x[i:i + batch_size])))
             for i in range(0, len(x), batch_size)]
    rep = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]} if parts else {}
    discrete = rep.get("discrete")
    return Encoding(np.asarray(rep["mean"], np.float32), np.asarray(rep["logvar"], np.float32),
                    None if discrete is None else np.asarray(discrete, np.int32))

  def decode(self, z, d=None) -> np.ndarray:
    """Pixel means [n, H, W, C] of continuous latents ``z`` [n, m] (and discrete codes ``d``
    [n]; None feeds an all-zero one-hot, as before CascadeVAE's t_d)."""
    z = np.asarray(z, np.float32)
    if z.ndim != 2 or z.shape[1] != self.latent_dim:
      raise ModelError(f"z: expected shape [n, {self.latent_dim}], got {list(z.shape)}")
    if d is not None:
      d = np.asarray(d, np.int32)
      if d.shape != z.shape[:1] or not self.num_discrete or d.min() < 0 or \
          d.max() >= self.num_discrete:
        raise ModelError(f"d: expected {z.shape[0]} integers in [0, {self.num_discrete}), got "
                         f"shape {list(d.shape)}" + ("" if self.num_discrete else
                                                     " (this model has no discrete code)"))
      d = jnp.asarray(d)
    return np.asarray(self._decode(self.params, jnp.asarray(z), d))

  def reconstruct(self, images) -> np.ndarray:
    """The decoded posterior means (and discrete code) of ``images``: [n, H, W, C]."""
    codes = self.encode(images)
    return self.decode(codes.mean, codes.discrete)

  def traverse(self, image, dims: Optional[Sequence[int]] = None,
               values: Sequence[float] = TRAVERSAL_VALUES) -> np.ndarray:
    """Continuous traversals around one image's code: [len(dims), len(values), H, W, C].

    Row r sets latent ``dims[r]`` (default: every latent, in index order; see
    :meth:`latent_order`) to each of ``values`` with the other latents at the image's posterior
    mean and the discrete code at the image's own (CascadeVAE Figs. 6 and 9, right).
    """
    codes = self.encode(self._images(image)[:1] if np.ndim(image) == 4 else
                        self._images(np.asarray(image)[None]))
    dims = range(self.latent_dim) if dims is None else dims
    d = None if codes.discrete is None else int(codes.discrete[0])
    return viz.traversal_images(
        lambda z: self.decode(z, None if d is None else np.full(len(z), d)), codes.mean[0],
        dims, values)

  def traverse_discrete(self, images) -> np.ndarray:
    """Each image's continuous code decoded with every value of d: [S, n, H, W, C], row k with
    d = k (CascadeVAE Fig. 7)."""
    if not self.num_discrete:
      raise ModelError(f"{self.source}: {self.config.method} has no discrete code to traverse")
    codes = self.encode(images)
    n, s = len(codes.mean), self.num_discrete
    out = self.decode(np.tile(codes.mean, (s, 1)), np.repeat(np.arange(s), n))
    return out.reshape((s, n) + out.shape[1:])

  def latent_order(self, images, seed: int = 0) -> np.ndarray:
    """The continuous latents by I(x; z_j) on ``images``, largest first (the order of
    CascadeVAE Figs. 6 and 9; the estimator of `disentangle.metrics.information`)."""
    from disentangle.metrics import information  # pylint: disable=g-import-not-at-top
    codes = self.encode(images)
    report = information.information_report(
        information.Representation(codes.mean, codes.logvar), np.random.default_rng(seed),
        num_samples=min(1000, len(codes.mean)))
    return np.argsort(-np.asarray(report["mi_per_dim"]), kind="stable")


def load(name_or_path, *, step: Optional[int] = None, seed: int = 0,
         image_shape: Optional[Sequence[int]] = None) -> TrainedModel:
  """A shipped model by name (:func:`shipped`) or a run directory (local or ``gs://``).

  Args:
    name_or_path: a shipped model's name, a shipped-model folder, or a run directory (one run,
      or the workdir of several runs in one program: ``seed`` picks one).
    step: the checkpoint of a run directory (default: the newest complete one).
    seed: which run of a several-run workdir (its index, 0 for a single run).
    image_shape: (H, W, C) of a run directory's images; default: read from its evaluation data.
  """
  text = str(name_or_path)
  if text in shipped():
    return _load_folder(PRETRAINED / text)
  if not paths.is_remote(text) and (pathlib.Path(text) / MODEL).is_file():
    return _load_folder(pathlib.Path(text))
  if not paths.is_remote(text) and not pathlib.Path(text).exists():
    raise ModelError(f"{text}: neither a shipped model ({', '.join(shipped()) or 'none'}) nor "
                     f"a run directory")
  return _load_run(text, step=step, seed=seed, image_shape=image_shape)


def _load_run(workdir, *, step, seed, image_shape) -> TrainedModel:
  from disentangle.evaluation import evaluate_run  # pylint: disable=g-import-not-at-top
  from disentangle.evaluation import evaluator  # pylint: disable=g-import-not-at-top
  config, run_dirs = evaluate_run.locate_run(workdir)
  if not 0 <= seed < len(run_dirs):
    raise ModelError(f"seed: {workdir} holds runs 0..{len(run_dirs) - 1}, not {seed}")
  if image_shape is None:
    image_shape = evaluator.load_eval_data(config).image_shape
  method = methods.build(config, tuple(image_shape))
  params, facts = evaluate_run.restore_params(workdir, config, method, step)
  single = (config if len(run_dirs) == 1 else
            evaluate_run.load_config(paths.as_path(run_dirs[seed]) / CONFIG))
  return TrainedModel(single, jax.device_get(params[seed]), int(facts["step"]),
                      tuple(int(v) for v in image_shape), str(run_dirs[seed]))


def _sha256(path: pathlib.Path) -> str:
  return hashlib.sha256(path.read_bytes()).hexdigest()


def _load_folder(folder: pathlib.Path) -> TrainedModel:
  from disentangle.evaluation import evaluate_run  # pylint: disable=g-import-not-at-top
  info = json.loads((folder / MODEL).read_text())
  digest = _sha256(folder / PARAMS)
  if digest != info["params_sha256"]:
    raise ModelError(f"{folder / PARAMS}: sha256 {digest} does not match model.json's "
                     f"{info['params_sha256']}: the file is damaged; reinstall the package")
  config = evaluate_run.load_config(folder / CONFIG)
  shape = tuple(int(v) for v in info["image_shape"])
  method = methods.build(config, shape)
  template = jax.eval_shape(method.init, jax.random.key(0)).params
  params = flax.serialization.from_bytes(template, (folder / PARAMS).read_bytes())
  return TrainedModel(config, jax.tree_util.tree_map(np.asarray, params), int(info["step"]),
                      shape, folder.name, info)


def export(model: TrainedModel, folder, **facts) -> dict:
  """Writes ``model`` as a shipped-model folder (parameters, config, ``model.json`` holding
  ``facts``, e.g. the command, seed and results of its run); returns ``model.json``'s dict."""
  folder = paths.as_path(folder)
  folder.mkdir(parents=True, exist_ok=True)
  data = flax.serialization.to_bytes(jax.tree_util.tree_map(np.asarray, model.params))
  atomic.write_bytes(folder / PARAMS, data)
  atomic.write_text(folder / CONFIG, model.config.to_json(indent=1))
  info = dict(facts, method=model.config.method, step=model.step,
              image_shape=list(model.image_shape), params_bytes=len(data),
              params_sha256=hashlib.sha256(data).hexdigest())
  atomic.write_text(folder / MODEL, json.dumps(info, indent=1) + "\n")
  return info
