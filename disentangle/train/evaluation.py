"""Evaluation at eval steps: metrics on host, pictures in the run directory.

Built from the config (``config.eval``): information estimates (KL_j, I(x; z_j), TC, I(x; d)),
unsupervised accuracy of the discrete code against labels, the CascadeVAE disentanglement score
on ground-truth data, and the pictures (reconstructions, continuous traversals sorted by KL, the
discrete traversal, I(x; z_j) against steps). Each call returns a flat dict of ``eval/...``
scalars and vectors for ``metrics.jsonl`` and writes ``eval/step_<n>.json`` with every setting.
"""
from __future__ import annotations

import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from disentangle import data as data_lib
from disentangle import metrics
from disentangle import viz

# Traversal ranges of the papers' figures (CascadeVAE Figs. 5, 8, 9).
TRAVERSAL_RANGE = {"dsprites": 1.2, "mnist": 2.0, "fashion_mnist": 2.0, "chairs": 2.0,
                   "celeba": 2.0}


def load_eval_data(config):
  d = config.dataset
  split = d.eval_split if d.name in ("mnist", "fashion_mnist") else "train"
  return data_lib.load_dataset(d.name, data_dir=d.data_dir, split=split, source=d.source,
                               synthetic_if_missing=d.synthetic_if_missing,
                               allow_download=d.allow_download)


class Evaluator:
  """Evaluates one run (one seed) at eval steps."""

  def __init__(self, config, method, run_dir, *, dataset=None, batch_size: int = 500):
    self.config = config
    self.method = method
    self.run_dir = pathlib.Path(run_dir)
    self.dataset = dataset if dataset is not None else load_eval_data(config)
    self.batch_size = batch_size
    n = self.dataset.num_examples
    k = n if config.eval.num_points in (0, None) else min(config.eval.num_points, n)
    rng = np.random.default_rng(config.seed)
    self.indices = np.arange(n) if k == n else np.sort(rng.choice(n, k, replace=False))
    self.labels = None
    labels = getattr(self.dataset, "labels", None)
    if labels is not None:
      self.labels = np.asarray(labels)[self.indices]
    self._represent = jax.jit(method.represent)
    self._decode = jax.jit(method.decode)
    self._reconstruct = jax.jit(method.reconstruct)
    self.history: list[tuple[int, np.ndarray]] = []

  def represent_fn(self, params):
    def fn(images):
      return jax.device_get(self._represent(params, jnp.asarray(images)))
    return fn

  def run(self, params, step: int) -> dict:
    cfg = self.config.eval
    rng = np.random.default_rng([self.config.seed, step])
    images = self.dataset.get_images(self.indices)
    rep = metrics.encode_in_batches(self.represent_fn(params), images, self.batch_size)
    out, details = {}, {"step": step, "num_points": int(len(self.indices))}
    if cfg.information and rep.logvar is not None:
      info = metrics.information_report(rep, rng, num_samples=min(1000, len(self.indices)))
      details["information"] = info
      out["eval/kl_per_dim"] = info["kl_per_dim"]
      out["eval/mi_per_dim"] = info["mi_per_dim"]
      out["eval/total_correlation"] = info["total_correlation"]
      if "discrete_mi" in info:
        out["eval/discrete_mi"] = info["discrete_mi"]
      self.history.append((step, np.asarray(info["mi_per_dim"])))
    if cfg.cluster_accuracy and self.labels is not None and rep.discrete is not None:
      acc = metrics.cluster_accuracy(self.labels, rep.discrete)
      details["cluster_accuracy"] = acc
      out["eval/accuracy"] = acc["one_to_one"]
      out["eval/accuracy_many_to_one"] = acc["many_to_one"]
    if cfg.factor_score and hasattr(self.dataset, "factor_sizes"):
      score = metrics.factor_vae_score(self.dataset, self.represent_fn(params), rng,
                                       num_votes=cfg.factor_score_votes)
      details["factor_score"] = score
      out["eval/factor_score"] = score["score"]
    if hasattr(self.dataset, "factor_sizes") and rep.discrete is not None:
      classes = getattr(self.dataset, "latents_classes", None)
      if classes is not None:  # dSprites: the discrete code against the shape factor
        shape = np.asarray(classes(self.indices))[:, 0]
        acc = metrics.cluster_accuracy(shape, rep.discrete)
        out["eval/shape_accuracy"] = acc["one_to_one"]
    self.pictures(params, images, rep, step)
    self._write_details(step, details)
    return out

  def pictures(self, params, images, rep, step: int) -> None:
    img_dir = self.run_dir / "images"
    img_dir.mkdir(parents=True, exist_ok=True)
    n = min(self.config.eval.num_images, len(images))
    recon = np.asarray(self._reconstruct(params, jnp.asarray(images[:n])))
    viz.save_image_grid(img_dir / "reconstructions.png",
                        viz.reconstruction_grid(images[:n], recon), nrow=None)
    kl = metrics.kl_per_dim(rep.mean, rep.logvar) if rep.logvar is not None else \
        np.var(rep.mean, 0)
    order = np.argsort(-kl)
    span = TRAVERSAL_RANGE.get(self.config.dataset.name, 2.0)
    values = np.linspace(-span, span, 10)
    base_z = rep.mean[0]
    d0 = None if rep.discrete is None else int(rep.discrete[0])

    def decode(z):
      d = None if d0 is None else jnp.full((len(z),), d0, jnp.int32)
      return np.asarray(self._decode(params, jnp.asarray(z, jnp.float32), d))

    viz.save_image_grid(img_dir / "traversals.png",
                        viz.traversal_grid(decode, base_z, order, values), nrow=len(values))
    if rep.discrete is not None:
      def decode_d(z, d):
        return np.asarray(self._decode(params, jnp.asarray(z, jnp.float32), jnp.asarray(d)))
      num_classes = self.method.num_discrete
      viz.save_image_grid(img_dir / "discrete_traversal.png",
                          viz.discrete_traversal_grid(decode_d, rep.mean[:8], num_classes),
                          nrow=8)
    if len(self.history) >= 2:
      steps = [s for s, _ in self.history]
      values_t = np.stack([v for _, v in self.history])
      viz.plot_information_curves(img_dir / "information.png", steps, values_t,
                                  [f"z{j}" for j in range(values_t.shape[1])])

  def _write_details(self, step: int, details: dict) -> None:
    path = self.run_dir / "eval"
    path.mkdir(exist_ok=True)
    tmp = path / f".step_{step}.json.tmp"
    tmp.write_text(json.dumps(details, indent=1, default=_to_json))
    tmp.replace(path / f"step_{step}.json")


def _to_json(v):
  if isinstance(v, np.ndarray):
    return v.tolist()
  if isinstance(v, np.generic):
    return v.item()
  return str(v)


def factory(config):
  """``evaluator_factory`` for :func:`disentangle.train.trainer.train`; shares the eval data."""
  cache = {}

  def make(method, run_dir, seed_index):
    if "data" not in cache:
      cache["data"] = load_eval_data(config)
    return Evaluator(config, method, run_dir, dataset=cache["data"])

  return make
