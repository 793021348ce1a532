"""Evaluation at eval steps during training: `Evaluator`, built by `factory(config)`.

The trainer calls `Evaluator.run(params, step, rep)` every ``eval_every`` steps (process 0, on a
host copy of the parameters, beside the training steps: `disentangle.train.background`), with the
encodings of the ``config.eval.num_points`` eval points that `RunsEncoder` computed for every run
at once on the device (or it encodes them itself when called without), and runs the
registered metrics (`disentangle.metrics.registry`, stage ``"training"``) that their
``config.eval`` flags switch on: information estimates (KL_j, I(x; z_j), TC, I(x; d)), the
unsupervised accuracy of the discrete code against labels, the CascadeVAE disentanglement score
(``eval.factor_score``, ``eval.factor_score_votes`` votes; a monitor: global variances over the
eval points and votes drawn from their encodings, so it costs no extra encoding), MIG
(``eval.mig``, ``eval.mig_estimator``, ``eval.use_discrete``) and the shape accuracy of the
discrete code (dSprites). Each call returns a flat dict of ``eval/...`` values for
``metrics.jsonl``, writes ``eval/step_<n>.json`` (every metric with its settings) and the
pictures.

The evaluation data is ``dataset.eval_name`` (default: the training set) at ``dataset.eval_split``
(`load_eval_data`); under ``eval.select='best_validation'`` the in-training evaluation reads the
held-out validation split instead (never the test split), and the trainer keeps the best
checkpoint by ``eval.select_metric`` (`disentangle.train.selection`). The paper protocols over
the whole dataset are `evaluate_run`
(``python -m experiments.evaluate``).
"""
from __future__ import annotations

import json
import pathlib
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from disentangle import atomic
from disentangle import data as data_lib
from disentangle import metrics
from disentangle import paths
from disentangle import viz
from disentangle.evaluation import encodings
from disentangle.metrics import registry
from disentangle.train import host
from disentangle.train import seeds
from disentangle.train import selection


def eval_data_names(config, stage: str = "run") -> dict:
  """{'trained_on', 'evaluated_on', 'split'} of a config's evaluation data.

  ``stage='training'`` under ``eval.select='best_validation'``: the validation split of the
  training set (`selection.training_eval_data`), which selects the kept checkpoint.

  ``dataset.eval_name`` ('': the training set's name) and ``dataset.eval_split`` (a config
  written before them is filled with '' and 'test', `config.fill_missing`); a dataset without
  that split (`data.SPLITS`: dSprites and Chairs have one,
CelebA's default 'test' is none of its official partitions) is read whole ('train'). The split
used is recorded with the results.
  """
  if stage == "training" and selection.training_eval_data(config) is not None:
    return selection.training_eval_data(config)
  d = config.dataset
  name = d.eval_name or d.name
  split = d.eval_split
  if split not in data_lib.SPLITS.get(name, (split,)):
    split = "train"
  return {"trained_on": d.name, "evaluated_on": name, "split": split}


def load_eval_data(config, stage: str = "run"):
  """The evaluation dataset of ``config`` at ``stage`` (see `eval_data_names`)."""
  d, names = config.dataset, eval_data_names(config, stage)
  return data_lib.load_dataset(names["evaluated_on"], data_dir=d.data_dir, split=names["split"],
                               source=d.source, synthetic_if_missing=d.synthetic_if_missing,
                               allow_download=d.allow_download, **data_lib.tfds_kwargs(d),
                               unfair=data_lib.unfair_settings(d),
                               variant_draw=d.variant_draw)


def eval_indices(config, num_examples: int) -> np.ndarray:
  """The ``config.eval.num_points`` evaluation points (all when 0), drawn with the config seed."""
  k = config.eval.num_points
  k = num_examples if k in (0, None) else min(k, num_examples)
  if k == num_examples:
    return np.arange(num_examples)
  return np.sort(np.random.default_rng(config.seed).choice(num_examples, k, replace=False))


def save_pictures(method, params, images: np.ndarray, rep: metrics.Representation,
                  img_dir: pathlib.Path, *, dataset_name: str, prefix: str = "",
                  decode=None, reconstruct=None, order=None) -> dict:
  """Reconstructions, traversals (``order``: the dimensions by I(x; z_j), largest first, as
  CascadeVAE Figs. 6 and 9; None: by KL), the same traversals animated (GIF), the discrete
  traversal (Fig. 7) and the method's own pictures (``method.evaluation_pictures``, e.g.
  PartedVAE's); {kind: path}."""
  img_dir.mkdir(parents=True, exist_ok=True)
  decode = decode or host.jit(method.decode)
  reconstruct = reconstruct or host.jit(method.reconstruct)
  paths = {}
  recon = np.asarray(reconstruct(params, jax.device_put(images)))
  paths["reconstructions"] = img_dir / f"{prefix}reconstructions.png"
  viz.save_image_grid(paths["reconstructions"], viz.reconstruction_grid(images, recon), nrow=None)
  if order is None:
    order = viz.latent_order(metrics.kl_per_dim(rep.mean, rep.logvar) if rep.logvar is not None
                             else np.var(rep.mean, 0))
  values = viz.traversal_values(dataset_name)
  d0 = None if rep.discrete is None else int(rep.discrete[0])

  def decode_z(z, d=None):  # d: the first image's code unless given
    if d is None and d0 is not None:
      d = np.full(len(z), d0)
    return np.asarray(decode(params, jnp.asarray(z, jnp.float32),
                             None if d is None else jnp.asarray(d, jnp.int32)))

  traversed = viz.traversal_images(decode_z, rep.mean[0], order, values)
  paths["traversals"] = img_dir / f"{prefix}traversals.png"
  viz.save_image_grid(paths["traversals"], traversed.reshape((-1,) + traversed.shape[2:]),
                      nrow=len(values))
  paths["traversals_gif"] = img_dir / f"{prefix}traversals.gif"
  viz.save_traversal_gif(paths["traversals_gif"], traversed)
  if rep.discrete is not None:
    paths["discrete_traversal"] = img_dir / f"{prefix}discrete_traversal.png"
    viz.save_image_grid(paths["discrete_traversal"],
                        viz.discrete_traversal_grid(decode_z, rep.mean[:8], method.num_discrete),
                        nrow=8)
  pictures = method.evaluation_pictures(params, images, rep, decode=decode, span=values[-1],
                                       values=values)
  for kind, picture in pictures.items():
    paths[kind] = img_dir / f"{prefix}{kind}.png"
    viz.save_image(paths[kind], picture)
  return paths


def information_row(info: dict) -> np.ndarray:
  """One evaluation's I(x; z_1) ... I(x; z_m), then I(x; d) where the method has a discrete code
  (the curves of CascadeVAE Fig. 9, left), from the ``information`` metric's result."""
  row = list(np.asarray(info["mi_per_dim"], np.float64))
  if info.get("discrete_mi") is not None:
    row.append(float(info["discrete_mi"]))
  return np.asarray(row)


def information_order(history, latent_dim: int):
  """The continuous dimensions by their latest I(x; z_j), largest first (None without one)."""
  return viz.latent_order(history[-1][1][:latent_dim]) if history else None


def plot_information(path, history, latent_dim: int) -> bool:
  """I(x; z_j) (and I(x; d)) against steps from ``history`` [(step, `information_row`)], when
  it holds two evaluations of one width; whether it wrote ``path``."""
  if len(history) < 2 or len({len(v) for _, v in history}) != 1:
    return False
  values = np.stack([v for _, v in history])
  labels = [f"z{j}" for j in range(latent_dim)] + ["d"] * (values.shape[1] - latent_dim)
  viz.plot_information_curves(path, [s for s, _ in history], values, labels,
                              ylabel="I(x; z_j), I(x; d) (nats)")
  return True


def information_history(run_dir: pathlib.Path, before: int) -> list[tuple[int, np.ndarray]]:
  """(step, `information_row`) of the run's evaluations written before step ``before``
  (``eval/step_<n>.json``), by step."""
  out = []
  for path in (run_dir / "eval").glob("step_*.json"):
    tail = path.stem.split("_", 1)[1]
    if tail.isdigit() and int(tail) < before:
      info = json.loads(path.read_text()).get("information") or {}
      if "mi_per_dim" in info:
        out.append((int(tail), information_row(info)))
  return sorted(out, key=lambda e: e[0])


def code_named_by_labels(method) -> bool:
  """True when the method names its discrete code by labels (its `BatchSpec.targets`, set by the
  semi-supervised variants): only then do the identity-mapping (``*_direct``) accuracies mean
  anything, so only then are they computed (`registry.Inputs.code_named`)."""
  return bool(method.batch_spec(method.config).targets)


def target_names_of(method, dataset) -> tuple:
  """The method's target columns (`BatchSpec.targets`, e.g. PartedVAE's variables) that
  ``dataset`` carries; () when it carries none of them all."""
  names = tuple(method.batch_spec(method.config).targets)
  have = set(getattr(dataset, "target_names", ()))
  return names if names and set(names) <= have and hasattr(dataset, "targets_of") else ()


def to_json(v):
  """``json.dumps`` default: numpy arrays and scalars to lists and numbers."""
  if isinstance(v, np.ndarray):
    return v.tolist()
  if isinstance(v, np.generic):
    return v.item()
  return str(v)


class Evaluator:
  """Evaluates one run (one seed) at eval steps."""

  def __init__(self, config, method, run_dir, *, dataset=None,
               batch_size: Optional[int] = None):
    self.config = config
    self.method = method
    self.run_dir = paths.as_path(run_dir)
    self.dataset = dataset if dataset is not None else load_eval_data(config, "training")
    self.batch_size = batch_size or encodings.ENCODE_BATCH
    self.indices = eval_indices(config, self.dataset.num_examples)
    labels = getattr(self.dataset, "labels", None)
    self.labels = None if labels is None else np.asarray(labels)[self.indices]
    self.target_names = target_names_of(method, self.dataset)
    self.code_named = code_named_by_labels(method)
    self.targets = (np.asarray(self.dataset.targets_of(self.indices, self.target_names))
                    if self.target_names else None)
    self.rows = None  # factor rows of the examples (row i = example i), for the score
    if encodings.is_ground_truth(self.dataset):
      rows, are_indices = encodings.enumerate_rows(self.dataset)
      self.rows = rows if are_indices else None
    self._represent = encodings.jit_represent(method, config)
    self._decode = host.jit(method.decode, config)
    self._reconstruct = host.jit(method.reconstruct, config)
    self.history: list[tuple[int, np.ndarray]] = []

  def represent_fn(self, params):
    return encodings.host_fn(self._represent, params)

  def inputs(self, params, rep: metrics.Representation, rng) -> registry.Inputs:
    """What the registered metrics read at an eval step: the eval points' encodings; the score
    and MIG sample from them when their factor rows are known (so an eval step encodes nothing
    more), else from the dataset through the encoder."""
    n = len(self.indices)
    inputs = registry.Inputs("training", rng, rep=rep, labels=self.labels, labelled_rep=rep,
                             code_named=self.code_named,
                             targets=self.targets, target_names=self.target_names,
                             factor_names=tuple(getattr(self.dataset, "factor_names", ())),
                             encode_batch_size=self.batch_size)
    if self.rows is not None:
      rows = self.rows[self.indices]
      inputs.ground_truth = encodings.EncodedGroundTruth(rows, rep, self.dataset.factor_sizes)
      inputs.represent = inputs.ground_truth.represent
      inputs.factors, inputs.factor_rep = rows, rep
      inputs.whole_dataset_max = n
    elif encodings.is_ground_truth(self.dataset):
      inputs.ground_truth, inputs.represent = self.dataset, self.represent_fn(params)
    return inputs

  def _overrides(self) -> dict:
    n = len(self.indices)
    if self.rows is not None:
      points = {"points": f"the {n} eval points' encodings"}
      return {"factor_score": points, "factor_score_no_discrete": points,
              "mig": {"num_points": n}}
    return {"factor_score": {"num_variance_points": n},
            "factor_score_no_discrete": {"num_variance_points": n}, "mig": {"num_points": n}}

  def run(self, params, step: int, rep: Optional[metrics.Representation] = None) -> dict:
    """The evaluation of ``params`` at ``step``; ``rep``: the eval points' encodings when the
    caller has them (`RunsEncoder`), else they are encoded here."""
    rng = np.random.default_rng([self.config.seed, step])
    if rep is None:
      rep, _ = encodings.encode_streamed(
          lambda a, b: self.dataset.get_images(self.indices[a:b]), len(self.indices),
          lambda x: self._represent(params, x), self.batch_size)
    results, _ = registry.run(self.inputs(params, rep, rng), self.config.eval,
                              overrides=self._overrides())
    details = {"step": step, "num_points": int(len(self.indices)),
               "dataset": eval_data_names(self.config, "training")}
    out = {}
    for name, result in results.items():
      details[name] = result
      out.update({f"eval/{k}": v
                  for k, v in registry.METRICS[name].log_values(result).items()})
    if "information" in results:
      if not self.history:  # a resumed run: the evaluations before it, from their files
        self.history = information_history(self.run_dir, step)
      self.history.append((step, information_row(results["information"])))
    self.pictures(params, rep, step)
    self._write_details(step, details)
    return out

  def pictures(self, params, rep, step: int) -> None:
    del step
    images = self.dataset.get_images(self.indices[:self.config.eval.num_images])
    img_dir = self.run_dir / "images"
    save_pictures(self.method, params, images, rep.take(slice(0, len(images))), img_dir,
                  dataset_name=eval_data_names(self.config, "training")["evaluated_on"],
                  decode=self._decode, reconstruct=self._reconstruct,
                  order=information_order(self.history, rep.mean.shape[1]))
    plot_information(img_dir / "information.png", self.history, rep.mean.shape[1])

  def _write_details(self, step: int, details: dict) -> None:
    atomic.write_text(self.run_dir / "eval" / f"step_{step}.json",
                      json.dumps(details, indent=1, default=to_json))


class RunsEncoder:
  """The eval points of every run of a program encoded on the device in one compiled call.

  ``encoder(params)``: ``params`` on the device (the runs stacked on a leading axis when there
  are several) -> one `Representation` per run. The call unrolls the runs (each run's own
  ``method.represent`` on its slice, as `seeds` ``'unroll'``), so that every run sees the
  encoder, the batches (``batch_size`` rows, the last padded with copies of the last image) and
  the micro-batches of `Evaluator.run`'s own encoding: the same float32 numbers, without a host
  copy of the parameters or one call per run. Images are sent in chunks of at most
  ``chunk_bytes`` (one chunk, one call, for the usual ``eval.num_points``).
  """

  CHUNK_BYTES = 256 << 20

  def __init__(self, evaluators, config, chunk_bytes: int = CHUNK_BYTES):
    first = evaluators[0]
    self.n = len(first.indices)
    self.batch_size = min(first.batch_size, self.n)
    self._get = lambda a, b: first.dataset.get_images(first.indices[a:b])
    row_bytes = 4 * int(np.prod(first.dataset.image_shape))
    self.chunk = self.batch_size * max(1, chunk_bytes // (self.batch_size * row_bytes))
    represents = [encodings.micro_batched(ev.method) for ev in evaluators]
    multi, size = len(evaluators) > 1, self.batch_size

    def encode(params, images):
      def batch(x):
        if not multi:
          return represents[0](params, x)
        return seeds.stack([r(seeds.take(params, i), x) for i, r in enumerate(represents)])
      return jax.lax.map(batch, images.reshape((-1, size) + images.shape[1:]))

    self._encode = host.jit(encode, config)
    self.num_runs = len(evaluators)

  @classmethod
  def of(cls, evaluators, config) -> Optional["RunsEncoder"]:
    """The encoder of ``evaluators`` when all are `Evaluator` of the same points, else None."""
    if not evaluators or not all(type(ev) is Evaluator for ev in evaluators):
      return None
    first = evaluators[0]
    if not all(ev.dataset is first.dataset and ev.batch_size == first.batch_size and
               np.array_equal(ev.indices, first.indices) for ev in evaluators):
      return None
    return cls(evaluators, config)

  def __call__(self, params) -> list[metrics.Representation]:
    parts, pending = [], None
    for start in range(0, self.n, self.chunk):
      images = np.asarray(self._get(start, min(self.n, start + self.chunk)), np.float32)
      pad = -len(images) % self.batch_size
      if pad:
        images = np.concatenate([images, np.repeat(images[-1:], pad, axis=0)])
      out = self._encode(params, jax.device_put(images))
      if pending is not None:
        parts.append(jax.device_get(pending))
      pending = out
    parts.append(jax.device_get(pending))
    reps = []
    for i in range(self.num_runs):
      run = {k: np.concatenate([_rows(p[k], i, self.num_runs) for p in parts])[:self.n]
             for k in parts[0]}
      reps.append(metrics.as_representation(run))
    return reps


def _rows(a: np.ndarray, i: int, num_runs: int) -> np.ndarray:
  """Run ``i``'s rows of an encoder output [batches, (runs,) rows, ...]."""
  a = a[:, i] if num_runs > 1 else a
  return a.reshape((-1,) + a.shape[2:])


class EvaluatorFactory:
  """The trainer's ``evaluator_factory``: each run's :class:`Evaluator`, on one shared copy of the
  evaluation data (``dataset``, or `load_eval_data`'s, opened once).

  The trainer calls :meth:`load_data` before it creates anything (a missing or corrupt file
  raises there), the factory itself for each run, and :meth:`runs_encoder` for the evaluators it
  made. Any callable ``(method, run_dir, run_index) -> evaluator`` also serves as a factory.
  """

  def __init__(self, config, dataset=None):
    self.config = config
    self._data = dataset

  def load_data(self):
    """The evaluation data, opened on the first call."""
    if self._data is None:
      self._data = load_eval_data(self.config, "training")
    return self._data

  def __call__(self, method, run_dir, run_index) -> "Evaluator":
    del run_index  # every run is evaluated on the same data
    return Evaluator(self.config, method, run_dir, dataset=self.load_data())

  def runs_encoder(self, evaluators) -> "RunsEncoder":
    """Every run's evaluation points encoded in one call on the device."""
    return RunsEncoder.of(evaluators, self.config)


def factory(config, dataset=None) -> EvaluatorFactory:
  """:class:`EvaluatorFactory` of ``config`` (sharing ``dataset`` when given)."""
  return EvaluatorFactory(config, dataset)
