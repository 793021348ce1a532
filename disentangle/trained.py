"""A trained model in a few lines: load a run directory or a shipped model, then encode, decode,
reconstruct and traverse.

    import disentangle
    model = disentangle.load("cascadevae_mnist_m10")   # shipped with the package: no network
    # or disentangle.load("runs/mnist_m10"), or a gs:// run directory
    codes = model.encode(images)                       # float32 [n, H, W, C] in [0, 1]
    codes.mean, codes.logvar, codes.discrete           # [n, m], [n, m], int [n] (or None)
    model.decode(codes.mean, codes.discrete)           # pixel means [n, H, W, C]

The config and the step come from the run (or the shipped model's files), the image shape from
its data set (`data.loading.IMAGE_SHAPES`) or the shipped model's files; the parameters are
restored read-only through the trainer's checkpoint reader (the newest complete checkpoint unless
``step`` is given), on whatever backend JAX has (CPU or GPU).

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
from typing import Any, Optional, Sequence

import flax.serialization
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from disentangle import atomic
from disentangle import errors
from disentangle import methods
from disentangle import metrics
from disentangle import paths
from disentangle import viz
from disentangle.data import loading
from disentangle.evaluation import encodings
from disentangle.metrics import registry
from disentangle.train import host

PRETRAINED = pathlib.Path(__file__).parent / "pretrained"
PARAMS, CONFIG, MODEL = "params.msgpack", "config.json", "model.json"


class ModelError(errors.UserError, ValueError):
  """A model that cannot be loaded or an input it cannot take (one line: what and where)."""


def shipped() -> list[str]:
  """The names of the models shipped with the package (their cards: the site's Shipped models
  page, written by :func:`~disentangle.trained.card`)."""
  if not PRETRAINED.is_dir():
    return []
  return sorted(p.name for p in PRETRAINED.iterdir() if (p / MODEL).is_file())


def model_info(name: str) -> dict:
  """A shipped model's ``model.json``: what it is, how it was trained and what it scored."""
  if name not in shipped():
    raise ModelError(f"{name}: not a shipped model ({', '.join(shipped()) or 'none'})")
  return json.loads((PRETRAINED / name / MODEL).read_text())


# The scores a card shows, in this order, where a model's results hold them.
_CARD_SCORES = {"accuracy_direct": "accuracy of the code, identity mapping",
                "accuracy": "accuracy of the code, one-to-one (Hungarian) mapping",
                "accuracy_many_to_one": "accuracy of the code, many-to-one mapping"}


def _published(info: dict, metric: str) -> str:
  published = info["results"].get("published", {})
  if metric in published:
    return f"{published[metric]:g}"
  if metric == "accuracy" and "mean" in published:
    return (f"{published['mean']:g} ({published['std']:g}) over {published['seeds']} seeds, "
            f"best {published['best']:g}")
  return ""


def card(name: str) -> str:
  """The card of a shipped model (Markdown), written from its ``model.json`` alone: data and
  split, command, seed, steps, device, training time, versions, every score with its settings
  beside the published number, intended use and known limits."""
  info = model_info(name)
  r, v = info["results"], info["versions"]
  hours, rest = divmod(int(info["training_seconds"]), 3600)
  settings = "; ".join(f"{k}: {val}" for k, val in r["settings"].items())
  stack = ", ".join(f"{k} {v[k]}" for k in ("jax", "jaxlib", "flax", "scikit-learn", "numpy",
                                            "python"))
  lines = [
      f"# `{name}`", "", info["paper"] + ".", "",
      "```python", "import disentangle", "", f'model = disentangle.load("{name}")', "```", "",
      "| | |", "|---|---|",
      f"| method | `{info['method']}` |",
      f"| data | {info['data']} |",
      f"| split | trained on {info['split']['train']}; scored on {info['split']['evaluation']} |",
      f"| command | `{info['command']}` |",
      f"| seed | {info['seed']} |",
      f"| steps | {info['step']:,} |",
      f"| device | {info['device']} |",
      f"| training time | {info['training_seconds']:,} s ({hours} h {rest // 60} min) |",
      f"| trained and scored with | disentangle {v['disentangle']} (commit `{v['commit']}`): "
      f"{stack}; {v['stack']} |",
      f"| image shape | {' x '.join(map(str, info['image_shape']))} |",
      f"| parameters | {info['params_bytes']:,} bytes, sha256 `{info['params_sha256']}` "
      f"(checked at every load) |", "",
      "## Scores", "",
      "| score | value | published | comparable with the published number |", "|---|---|---|---|",
      *[f"| {title} (`{metric}`) | {r[metric]} ({100 * r[metric]:.2f} %) | "
        f"{_published(info, metric)} | {r['comparable_with_published']} |"
        for metric, title in _CARD_SCORES.items() if metric in r], "",
      f"What each is: {r['accuracy_is']}. Settings: {settings}.", "",
      "## Intended use", "", info["intended_use"], "",
      "## Known limits", "", *[f"- {limit}" for limit in info["limits"]], ""]
  return "\n".join(lines)


@dataclasses.dataclass
class TrainedModel:
  """A method with its parameters: pure functions of numpy arrays, jitted once each (``method``:
  the method built from ``config``, built here when not given)."""
  config: ml_collections.ConfigDict
  params: Any
  step: int
  image_shape: tuple[int, int, int]
  source: str
  info: dict = dataclasses.field(default_factory=dict)
  method: Any = None

  def __post_init__(self):
    if self.method is None:
      self.method = methods.build(self.config, self.image_shape)
    self._represent = encodings.jit_represent(self.method, self.config)
    self._decode = host.jit(self.method.decode, self.config)
    x = jax.ShapeDtypeStruct((1,) + tuple(self.image_shape), jnp.float32)
    # m of encode's means and decode's z (PartedVAE: concat(z, u)); values of d (0: none)
    self.latent_dim = jax.eval_shape(self.method.represent, self.params, x)["mean"].shape[-1]
    self.num_discrete = int(self.method.num_discrete)

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

  def encode(self, images, batch_size: int = encodings.ENCODE_BATCH) -> metrics.Representation:
    """The posterior means and log-variances (float32 [n, m]) of ``images`` [n, H, W, C] and their
    discrete code (int32 [n], or None), encoded as the evaluation encodes
    (`encodings.encode_streamed`: ``batch_size`` images a call, the last padded with copies).

    d is the method's ``represent``'s. CascadeVAE: d = argmax_k log p(x | mu(x), e_k) (Section 4)
    under ``cascade.eval_discrete='argmax'``; under ``'assignment'`` the balanced assignment of
    each call's images, so an image's d depends on the images encoded with it. JointVAE: the
    argmax of the first categorical's q(c|x). PartedVAE: c = argmax q(c_1|x) of its first class
    variable, beside means and log-variances of concat(z, u). Other methods: None.
    """
    x = self._images(images)
    rep, _ = encodings.encode_streamed(lambda a, b: x[a:b], len(x),
                                       lambda v: self._represent(self.params, v), batch_size)
    return rep._replace(mean=rep.mean.astype(np.float32), logvar=rep.logvar.astype(np.float32),
                        discrete=None if rep.discrete is None else rep.discrete.astype(np.int32))

  def decode(self, z, d=None) -> np.ndarray:
    """Pixel means [n, H, W, C] of continuous latents ``z`` [n, m] and discrete codes ``d`` [n]
    (the method's ``decode``: CascadeVAE's decoder reads d, None as an all-zero one-hot, as
    before t_d; PartedVAE's d sets u_1 to the mean of its prior component d)."""
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

  def _own_code(self, codes) -> Optional[np.ndarray]:
    """The code that decodes ``codes`` as encoded: d where the decoder reads it (CascadeVAE,
    JointVAE), None where z holds it (PartedVAE's u; a d would set u_1 to its prior mean)."""
    return codes.discrete if self.method.decoder_input_dim() > self.latent_dim else None

  def reconstruct(self, images) -> np.ndarray:
    """The decoded posterior means (and discrete code) of ``images``: [n, H, W, C]."""
    codes = self.encode(images)
    return self.decode(codes.mean, self._own_code(codes))

  def traverse(self, image, dims: Optional[Sequence[int]] = None,
               values: Optional[Sequence[float]] = None) -> np.ndarray:
    """Continuous traversals around one image's code: [len(dims), len(values), H, W, C].

    Row r sets latent ``dims[r]`` (default: every latent, in index order; see
    :meth:`latent_order`) to each of ``values`` (default: the papers' for the model's data set,
    `viz.traversal_values`) with the other latents at the image's posterior mean and the
    discrete code at the image's own where the decoder reads one (CascadeVAE Figs. 6, 9 right).
    """
    codes = self.encode(self._images(image)[:1] if np.ndim(image) == 4 else
                        self._images(np.asarray(image)[None]))
    d = self._own_code(codes)
    return viz.traversal_images(
        lambda z: self.decode(z, None if d is None else np.repeat(d, len(z))), codes.mean[0],
        range(self.latent_dim) if dims is None else dims,
        viz.traversal_values(self.config.dataset.name) if values is None else values)

  def traverse_discrete(self, images) -> np.ndarray:
    """Each image's continuous code decoded with every value of d: [S, n, H, W, C], row k with
    d = k (CascadeVAE Fig. 7)."""
    if not self.num_discrete:
      raise ModelError(f"{self.source}: {self.config.method} has no discrete code to traverse")
    return viz.discrete_traversal_images(self.decode, self.encode(images).mean, self.num_discrete)

  def latent_order(self, images, seed: int = 0) -> np.ndarray:
    """The continuous latents by I(x; z_j) on ``images``, largest first (the order of
    CascadeVAE Figs. 6 and 9; the evaluation's ``information`` estimate)."""
    codes = self.encode(images)
    report = metrics.information_report(
        metrics.Representation(codes.mean, codes.logvar), np.random.default_rng(seed),
        num_samples=min(registry.INFORMATION_SAMPLES, len(codes.mean)))
    return viz.latent_order(report["mi_per_dim"])


def load(name_or_path, *, step: Optional[int] = None, seed: Optional[int] = None,
         run: Optional[str] = None, image_shape: Optional[Sequence[int]] = None) -> TrainedModel:
  """A shipped model by name (:func:`~disentangle.trained.shipped`) or a run directory (local or
  ``gs://``). The shipped models, each with its card (data, command, seed, steps, device,
  versions, scores beside the published ones, intended use and limits): the site's *Shipped
  models* page, written from each model's ``model.json`` (:func:`~disentangle.trained.card`).

  Args:
    name_or_path: a shipped model's name, a shipped-model folder, or a run directory (one run,
      or the workdir of several runs trained in one program: ``seed`` or ``run`` picks one).
    step: the checkpoint of a run directory (default: the newest complete one).
    seed: the seed the run was trained with (its directory ``seed_<seed>``).
    run: the name of the run's directory, where seeds repeat (a sweep's ``beta=4_seed_0``).
    image_shape: (H, W, C) of a run directory's images; default: its data set's
      (`data.loading.IMAGE_SHAPES`); give it for a run trained on images of your own.
  """
  text = str(name_or_path)
  if text in shipped():
    return _load_folder(PRETRAINED / text)
  if not paths.is_remote(text) and (pathlib.Path(text) / MODEL).is_file():
    return _load_folder(pathlib.Path(text))
  if not paths.is_remote(text) and not pathlib.Path(text).exists():
    raise ModelError(f"{text}: neither a shipped model ({', '.join(shipped()) or 'none'}) nor "
                     f"a run directory")
  return _load_run(text, step=step, seed=seed, run=run, image_shape=image_shape)


def _load_run(workdir, *, step, seed, run, image_shape) -> TrainedModel:
  from disentangle.evaluation import evaluate_run  # pylint: disable=g-import-not-at-top
  config, run_dirs = evaluate_run.locate_run(workdir)
  configs = [config] if len(run_dirs) == 1 else [
      evaluate_run.load_config(paths.as_path(d) / CONFIG) for d in run_dirs]
  picked = [i for i, (d, c) in enumerate(zip(run_dirs, configs))
            if seed in (None, c.seed) and run in (None, paths.as_path(d).name)]
  if len(picked) != 1:
    held = ", ".join(f"{paths.as_path(d).name} (seed {c.seed})" for d, c in zip(run_dirs, configs))
    asked = " and ".join(f"{k}={v!r}" for k, v in (("seed", seed), ("run", run)) if v is not None)
    raise ModelError(f"{workdir} holds {held}: " + (f"none has {asked}" if not picked else
                                                     "choose one by seed= or run="))
  i = picked[0]
  shape = tuple(int(v) for v in image_shape or loading.IMAGE_SHAPES[config.dataset.name])
  method = methods.build(configs[i], shape)
  params, facts = evaluate_run.restore_params(workdir, config, method, step)
  return TrainedModel(configs[i], jax.device_get(params[i]), int(facts["step"]), shape,
                      str(run_dirs[i]), method=method)


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
                      shape, folder.name, info, method)


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
