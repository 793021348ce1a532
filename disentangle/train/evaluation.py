"""Evaluation: at eval steps during training (`Evaluator`) and of a saved run (`evaluate_run`).

Metrics run on host in numpy (`disentangle.metrics`); pictures go to the run directory.

`Evaluator` (built by `factory(config)`, called by the trainer every ``eval_every`` steps):
information estimates (KL_j, I(x; z_j), TC, I(x; d)) on ``config.eval.num_points`` points, the
unsupervised accuracy of the discrete code against labels, the CascadeVAE disentanglement score
(``config.eval.factor_score``, ``eval.factor_score_votes`` votes; a monitor: global variances over
the eval points and votes drawn from their encodings, so it costs no extra encoding) and the
pictures. Each call returns a flat dict of ``eval/...`` values for ``metrics.jsonl`` and writes
``eval/step_<n>.json``.

`evaluate_run(workdir, step=None)` (``python -m experiments.evaluate``): restores a checkpoint
read-only (the latest, or ``step``; every seed of a multi-seed run) and runs the full evaluation:

- ``factor_score``: CascadeVAE supplement C with the paper's protocol (800 votes x 100 examples,
  global variances over the whole dataset, KL pruning at 0.1, discrete code included);
- ``mig``: MIG, disentanglement_lib's histogram estimator (10,000 points, 20 bins);
- ``shape_accuracy``: one-to-one accuracy of the discrete code against the shape factor over the
  whole dataset (dSprites, CascadeVAE Table 2);
- ``accuracy``: one-to-one accuracy of the discrete code against the labels of every example of
  the evaluation split (MNIST / Fashion-MNIST test set, CascadeVAE Tables 3-4);
- ``information``: as the `Evaluator`, on ``config.eval.num_points`` points;

and writes ``results.json`` (every number with its settings, the seed, the step and whether it is
the run's final checkpoint), ``report.md`` and pictures ``images/evaluate_step_<n>_*.png`` (named
apart from the trainer's pictures). The checkpoints are opened with a read-only orbax manager
(never saves, deletes or cleans), so a running run can be evaluated: orbax renames a checkpoint
into place only once complete, and the latest complete one is read.

Ground-truth data that can be enumerated (dSprites: 737,280 images) is encoded once, streamed, and
every ground-truth metric reads those encodings (`disentangle.train.encodings`): the authors'
protocol (they encode the dataset once and draw the votes from the encodings), no image encoded
twice. Labelled data is encoded whole once for the accuracy; the information estimates and the
pictures reuse those encodings.
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import pathlib
import time
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import orbax.checkpoint as ocp

from disentangle import data as data_lib
from disentangle import methods
from disentangle import metrics
from disentangle import viz
from disentangle.train import encodings
from disentangle.train import host

# Traversal ranges of the papers' figures (CascadeVAE Figs. 5, 8, 9).
TRAVERSAL_RANGE = {"dsprites": 1.2, "mnist": 2.0, "fashion_mnist": 2.0, "chairs": 2.0,
                   "celeba": 2.0}


def load_eval_data(config):
  d = config.dataset
  split = d.eval_split if d.name in ("mnist", "fashion_mnist") else "train"
  return data_lib.load_dataset(d.name, data_dir=d.data_dir, split=split, source=d.source,
                               synthetic_if_missing=d.synthetic_if_missing,
                               allow_download=d.allow_download)


def save_pictures(method, params, images: np.ndarray, rep: metrics.Representation,
                  img_dir: pathlib.Path, *, dataset_name: str, prefix: str = "",
                  decode=None, reconstruct=None) -> dict:
  """Reconstructions, traversals sorted by KL and the discrete traversal; {kind: path}."""
  img_dir.mkdir(parents=True, exist_ok=True)
  decode = decode or host.jit(method.decode)
  reconstruct = reconstruct or host.jit(method.reconstruct)
  paths = {}
  recon = np.asarray(reconstruct(params, jnp.asarray(images)))
  paths["reconstructions"] = img_dir / f"{prefix}reconstructions.png"
  viz.save_image_grid(paths["reconstructions"], viz.reconstruction_grid(images, recon), nrow=None)
  kl = (metrics.kl_per_dim(rep.mean, rep.logvar) if rep.logvar is not None
        else np.var(rep.mean, 0))
  span = TRAVERSAL_RANGE.get(dataset_name, 2.0)
  values = np.linspace(-span, span, 10)
  d0 = None if rep.discrete is None else int(rep.discrete[0])

  def decode_z(z):
    d = None if d0 is None else jnp.full((len(z),), d0, jnp.int32)
    return np.asarray(decode(params, jnp.asarray(z, jnp.float32), d))

  paths["traversals"] = img_dir / f"{prefix}traversals.png"
  viz.save_image_grid(paths["traversals"],
                      viz.traversal_grid(decode_z, rep.mean[0], np.argsort(-kl), values),
                      nrow=len(values))
  if rep.discrete is not None:
    def decode_d(z, d):
      return np.asarray(decode(params, jnp.asarray(z, jnp.float32), jnp.asarray(d)))
    paths["discrete_traversal"] = img_dir / f"{prefix}discrete_traversal.png"
    viz.save_image_grid(paths["discrete_traversal"],
                        viz.discrete_traversal_grid(decode_d, rep.mean[:8], method.num_discrete),
                        nrow=8)
  return paths


def eval_indices(config, num_examples: int) -> np.ndarray:
  """The ``config.eval.num_points`` evaluation points (all when 0), drawn with the config seed."""
  k = config.eval.num_points
  k = num_examples if k in (0, None) else min(k, num_examples)
  if k == num_examples:
    return np.arange(num_examples)
  return np.sort(np.random.default_rng(config.seed).choice(num_examples, k, replace=False))


class Evaluator:
  """Evaluates one run (one seed) at eval steps."""

  def __init__(self, config, method, run_dir, *, dataset=None,
               batch_size: Optional[int] = None):
    self.config = config
    self.method = method
    self.run_dir = pathlib.Path(run_dir)
    self.dataset = dataset if dataset is not None else load_eval_data(config)
    self.batch_size = batch_size or encodings.default_batch_size()
    self.indices = eval_indices(config, self.dataset.num_examples)
    labels = getattr(self.dataset, "labels", None)
    self.labels = None if labels is None else np.asarray(labels)[self.indices]
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

  def run(self, params, step: int) -> dict:
    cfg = self.config.eval
    rng = np.random.default_rng([self.config.seed, step])
    rep, _ = encodings.encode_streamed(
        lambda a, b: self.dataset.get_images(self.indices[a:b]), len(self.indices),
        lambda x: self._represent(params, x), self.batch_size)
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
    if cfg.factor_score and encodings.is_ground_truth(self.dataset):
      score = self._factor_score(params, rep, rng)
      details["factor_score"] = score
      out["eval/factor_score"] = score["score"]
    classes = getattr(self.dataset, "latents_classes", None)
    if classes is not None and rep.discrete is not None:  # dSprites: d against the shape factor
      acc = metrics.cluster_accuracy(np.asarray(classes(self.indices))[:, 1], rep.discrete)
      details["shape_accuracy"] = acc
      out["eval/shape_accuracy"] = acc["one_to_one"]
    self.pictures(params, rep, step)
    self._write_details(step, details)
    return out

  def _factor_score(self, params, rep, rng) -> dict:
    """The score from the eval points' encodings (global variances over them, votes drawn from
    them), so an eval step encodes nothing more; ``eval.num_points = 0``: the whole dataset.

    The paper's protocol over the whole dataset is `evaluate_run` (``experiments.evaluate``).
    """
    cfg = self.config.eval
    if self.rows is not None:
      encoded = encodings.EncodedGroundTruth(self.rows[self.indices], rep,
                                             self.dataset.factor_sizes)
      score = metrics.factor_vae_score(encoded, encoded.represent, rng,
                                       num_votes=cfg.factor_score_votes,
                                       whole_dataset_max=len(self.indices))
      return dict(score, points=f"the {len(self.indices)} eval points' encodings")
    return metrics.factor_vae_score(self.dataset, self.represent_fn(params), rng,
                                    num_votes=cfg.factor_score_votes,
                                    num_variance_points=len(self.indices))

  def pictures(self, params, rep, step: int) -> None:
    images = self.dataset.get_images(self.indices[:self.config.eval.num_images])
    img_dir = self.run_dir / "images"
    save_pictures(self.method, params, images, rep.take(slice(0, len(images))), img_dir,
                  dataset_name=self.config.dataset.name, decode=self._decode,
                  reconstruct=self._reconstruct)
    if len(self.history) >= 2:
      steps = [s for s, _ in self.history]
      values_t = np.stack([v for _, v in self.history])
      viz.plot_information_curves(img_dir / "information.png", steps, values_t,
                                  [f"z{j}" for j in range(values_t.shape[1])])

  def _write_details(self, step: int, details: dict) -> None:
    path = self.run_dir / "eval"
    path.mkdir(exist_ok=True)
    tmp = path / f".step_{step}.json.tmp"
    tmp.write_text(json.dumps(details, indent=1, default=to_json))
    tmp.replace(path / f"step_{step}.json")


def to_json(v):
  """``json.dumps`` default: numpy arrays and scalars to lists and numbers."""
  if isinstance(v, np.ndarray):
    return v.tolist()
  if isinstance(v, np.generic):
    return v.item()
  if isinstance(v, pathlib.Path):
    return str(v)
  return str(v)


def factory(config):
  """``evaluator_factory`` for :func:`disentangle.train.trainer.train`; shares the eval data."""
  cache = {}

  def make(method, run_dir, seed_index):
    del seed_index
    if "data" not in cache:
      cache["data"] = load_eval_data(config)
    return Evaluator(config, method, run_dir, dataset=cache["data"])

  return make


# -- evaluation of a saved run ----------------------------------------------------------------

def load_config(path) -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict(json.loads(pathlib.Path(path).read_text()))


def locate_run(workdir) -> tuple[ml_collections.ConfigDict, list[pathlib.Path]]:
  """(config of the whole run, run directories) of a single- or multi-seed ``workdir``.

  A single run has ``config.json`` beside ``checkpoints/``; a multi-seed run has one
  ``seed_<s>/config.json`` per seed (``num_seeds = 1`` each) and the stacked checkpoints in
  ``workdir/checkpoints``: its config is the first seed's with ``num_seeds`` = the number of seeds.
  """
  workdir = pathlib.Path(workdir)
  if (workdir / "config.json").is_file():
    config = load_config(workdir / "config.json")
    if config.num_seeds == 1 and not (workdir / "checkpoints").is_dir() and \
        (workdir.parent / "checkpoints").is_dir() and workdir.name.startswith("seed_"):
      raise FileNotFoundError(f"{workdir} is one seed of a multi-seed run: evaluate its parent "
                              f"{workdir.parent}, which holds the checkpoints")
    return config, [workdir]
  seeds = sorted(workdir.glob("seed_*/config.json"), key=lambda p: int(p.parent.name[5:]))
  if not seeds:
    raise FileNotFoundError(f"{workdir} has no config.json (nor seed_*/config.json): not a run "
                            f"directory")
  config = load_config(seeds[0])
  config.num_seeds = len(seeds)
  return config, [p.parent for p in seeds]


def checkpoint_manager(workdir) -> ocp.CheckpointManager:
  """A read-only manager of ``workdir/checkpoints``: it never saves, deletes or cleans."""
  directory = pathlib.Path(workdir).resolve() / "checkpoints"
  if not directory.is_dir():
    raise FileNotFoundError(f"{directory} does not exist: the run has no checkpoint yet")
  options = ocp.CheckpointManagerOptions(read_only=True, create=False, max_to_keep=None,
                                         save_interval_steps=0)
  return ocp.CheckpointManager(directory, options=options)


def restore_params(workdir, config, method, step: Optional[int] = None) -> tuple[list, dict]:
  """Parameters of every seed at ``step`` (default: latest) and the checkpoint facts."""
  manager = checkpoint_manager(workdir)
  available = sorted(int(s) for s in manager.all_steps())
  if not available:
    raise FileNotFoundError(f"{manager.directory} holds no complete checkpoint yet")
  chosen = available[-1] if step is None else int(step)
  if chosen not in available:
    raise ValueError(f"no checkpoint at step {chosen} in {manager.directory}; available steps: "
                     f"{available}")
  n = config.num_seeds
  keys = jnp.stack([jax.random.PRNGKey(config.seed + i) for i in range(n)])
  init = jax.vmap(method.init) if n > 1 else (lambda k: method.init(k[0]))
  sharding = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
  abstract = jax.tree_util.tree_map(
      lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding),
      jax.eval_shape(init, keys))
  state = manager.restore(chosen, args=ocp.args.StandardRestore(abstract))
  manager.close()
  params = [jax.tree_util.tree_map(lambda a, i=i: a[i], state.params) if n > 1 else state.params
            for i in range(n)]
  facts = {"step": chosen, "num_steps": int(config.num_steps),
           "final": chosen == int(config.num_steps), "latest_step": available[-1],
           "available_steps": available, "selection": "latest" if step is None else "requested",
           "directory": str(manager.directory)}
  return params, facts


def describe_dataset(dataset, config, overridden: bool) -> dict:
  """What the numbers were computed on, and whether they can sit beside published ones."""
  source = getattr(dataset, "source", None)
  comparable = not overridden and source != "render"
  if comparable and config.dataset.synthetic_if_missing:
    comparable = None  # the loader may have used generated stand-ins (see its log)
  return {"name": config.dataset.name, "class": type(dataset).__name__,
          "repr": repr(dataset)[:200], "source": source,
          "num_examples": int(dataset.num_examples), "override": overridden,
          "comparable_with_published": comparable}


def _information_history(run_dir: pathlib.Path) -> list[tuple[int, np.ndarray]]:
  history = []
  path = run_dir / "metrics.jsonl"
  for line in path.read_text().splitlines() if path.is_file() else ():
    try:
      record = json.loads(line)
    except json.JSONDecodeError:
      continue
    if "eval/mi_per_dim" in record:
      history.append((int(record["step"]), np.asarray(record["eval/mi_per_dim"], np.float64)))
  return history


@dataclasses.dataclass(frozen=True)
class RunSettings:
  """Settings of `evaluate_run`'s metrics (defaults: the papers' protocols)."""
  num_votes: int = encodings.PAPER_NUM_VOTES      # M of the disentanglement score
  vote_batch: int = encodings.PAPER_VOTE_BATCH    # L, examples per vote
  mig_points: int = encodings.MIG_NUM_POINTS      # points of the MIG estimate (histogram)
  encode_batch_size: int = encodings.CPU_BATCH_SIZE  # images per encoder call


class _Jitted(NamedTuple):
  represent: Callable
  decode: Callable
  reconstruct: Callable


def evaluate_params(config, method, params, step: int, *, dataset, ground_truth, run_dir,
                    settings: RunSettings, jitted: _Jitted) -> dict:
  """Every metric of one seed's ``params`` (see the module doc) and its pictures; a dict."""
  represent, batch = jitted.represent, settings.encode_batch_size
  host_fn = encodings.host_fn(represent, params)
  rng = np.random.default_rng([config.seed, step])
  out, timings = {}, {}
  indices = eval_indices(config, dataset.num_examples)
  rep_eval = None
  if ground_truth is not None:
    encoded, are_indices, enc_t = encodings.encode_ground_truth(ground_truth, represent, params,
                                                                batch_size=batch)
    timings.update({f"encode_{k}": v for k, v in enc_t.items() if k.endswith("_s")})
    gt = encodings.ground_truth_metrics(
        ground_truth, host_fn, rng, encoded=encoded, num_votes=settings.num_votes,
        vote_batch=settings.vote_batch, mig_points=settings.mig_points, encode_batch_size=batch)
    timings.update(gt.pop("timings"))
    out.update(gt)
    if encoded is not None and are_indices and ground_truth is dataset:
      rep_eval = encoded.rep.take(indices)  # row i is example i: no second encoding
  labels = getattr(dataset, "labels", None)
  if labels is not None and method.num_discrete:
    t0 = time.perf_counter()
    rep_all, _ = encodings.encode_streamed(lambda a, b: dataset.get_images(np.arange(a, b)),
                                           dataset.num_examples,
                                           lambda x: represent(params, x), batch)
    acc = metrics.cluster_accuracy(np.asarray(labels), rep_all.discrete)
    out["accuracy"] = dict(acc, value=acc["one_to_one"], mapping="one_to_one (Hungarian)",
                           points="every example of the evaluation split")
    rep_eval = rep_all.take(indices)
    timings["accuracy_s"] = time.perf_counter() - t0
  if rep_eval is None:
    rep_eval = metrics.encode_in_batches(host_fn, dataset.get_images(indices), batch)
  if rep_eval.logvar is not None:
    t0 = time.perf_counter()
    info = metrics.information_report(rep_eval, rng, num_samples=min(1000, len(indices)))
    out["information"] = dict(info, value=info["total_correlation"],
                              value_is="total_correlation")
    timings["information_s"] = time.perf_counter() - t0
  prefix = f"evaluate_step_{step}_"
  images = dataset.get_images(indices[:config.eval.num_images])
  pictures = save_pictures(method, params, images, rep_eval.take(slice(0, len(images))),
                           run_dir / "images", dataset_name=config.dataset.name, prefix=prefix,
                           decode=jitted.decode, reconstruct=jitted.reconstruct)
  history = [(s, v) for s, v in _information_history(run_dir) if s < step]
  if "information" in out:
    history.append((step, np.asarray(out["information"]["mi_per_dim"])))
  if len(history) >= 2 and len({len(v) for _, v in history}) == 1:
    pictures["information"] = run_dir / "images" / f"{prefix}information.png"
    viz.plot_information_curves(pictures["information"], [s for s, _ in history],
                                np.stack([v for _, v in history]),
                                [f"z{j}" for j in range(len(history[0][1]))])
  return {"metrics": out, "timings_s": timings,
          "images": {k: str(p.relative_to(run_dir)) for k, p in pictures.items()}}


def evaluate_run(workdir, step: Optional[int] = None, *, dataset=None, ground_truth=None,
                 factor_score_votes: int = encodings.PAPER_NUM_VOTES,
                 vote_batch: int = encodings.PAPER_VOTE_BATCH,
                 mig_points: int = encodings.MIG_NUM_POINTS,
                 encode_batch_size: Optional[int] = None,
                 conv_impl: Optional[str] = None, write: bool = True) -> dict:
  """Evaluates the checkpoint of ``workdir`` at ``step`` (default latest), read-only.

  Args:
    workdir: a run directory (``config.json`` + ``checkpoints/``) or a multi-seed workdir.
    step: checkpoint step; None takes the latest (recorded, with whether it is the final one).
    dataset: evaluation data (default: the config's, as at training eval steps); recorded as an
      override (numbers then marked not comparable with published ones).
    ground_truth: ground-truth data for the disentanglement metrics (default: ``dataset`` when it
      implements the protocol, e.g. dSprites).
    factor_score_votes: M of the disentanglement score (paper: 800).
    vote_batch: L, examples per vote (paper: 100).
    mig_points: points of the MIG estimate.
    encode_batch_size: images per encoder call (None: `encodings.default_batch_size()`, 100 on
      CPU, 1000 on accelerators).
    conv_impl: override ``model.conv_impl`` ('flax' / 'fast': same parameters and outputs up to
      float rounding); recorded.
    write: write ``results.json`` and ``report.md`` (per seed, plus a summary for several seeds).

  Returns:
    The results of a single run, or ``{"workdir", "checkpoint", "seeds": [per-seed results]}``.
  """
  workdir = pathlib.Path(workdir)
  config, run_dirs = locate_run(workdir)
  if conv_impl is not None:
    config.model.conv_impl = conv_impl
  overridden = dataset is not None
  dataset = dataset if dataset is not None else load_eval_data(config)
  if ground_truth is None and encodings.is_ground_truth(dataset):
    ground_truth = dataset
  method = methods.build(config, dataset.image_shape)
  params, facts = restore_params(workdir, config, method, step)
  settings = RunSettings(factor_score_votes, vote_batch, mig_points,
                         encode_batch_size or encodings.default_batch_size())
  jitted = _Jitted(encodings.jit_represent(method, config), host.jit(method.decode, config),
                   host.jit(method.reconstruct, config))
  recorded = dict(dataclasses.asdict(settings), score_protocol="cascadevae",
                  information_points=int(config.eval.num_points),
                  conv_impl=config.model.conv_impl, metric_rng="default_rng([seed, step])")
  runs = []
  for i, run_dir in enumerate(run_dirs):
    config_i = ml_collections.ConfigDict(config.to_dict())
    config_i.seed, config_i.num_seeds = config.seed + i, 1
    t0 = time.perf_counter()
    result = {"run_dir": str(run_dir), "workdir": str(workdir), "seed": int(config_i.seed),
              "seed_index": i, "num_seeds": int(config.num_seeds), "method": config.method,
              "latent_dim": int(config.model.latent_dim), "checkpoint": facts,
              "dataset": describe_dataset(dataset, config, overridden),
              "ground_truth": None if ground_truth is None else type(ground_truth).__name__,
              "settings": recorded, "evaluated_at": datetime.datetime.now().isoformat(),
              "jax": {"version": jax.__version__, "backend": jax.default_backend()}}
    result.update(evaluate_params(config_i, method, params[i], facts["step"], dataset=dataset,
                                  ground_truth=ground_truth, run_dir=run_dir,
                                  settings=settings, jitted=jitted))
    result["timings_s"]["total_s"] = time.perf_counter() - t0
    if write:
      write_json(run_dir / "results.json", result)
      write_report(result, run_dir / "report.md")
    runs.append(result)
  if len(runs) == 1:
    return runs[0]
  summary = {"workdir": str(workdir), "checkpoint": facts, "seeds": runs}
  if write:
    write_json(workdir / "results.json", summary)
    write_report(summary, workdir / "report.md")
  return summary


def write_json(path: pathlib.Path, value) -> None:
  tmp = path.with_name(f".{path.name}.tmp")
  tmp.write_text(json.dumps(value, indent=1, default=to_json, allow_nan=True))
  tmp.replace(path)


_HEADLINE = (("factor_score", "disentanglement score (CascadeVAE supp. C)"),
             ("shape_accuracy", "dSprites shape accuracy of d (Table 2)"),
             ("accuracy", "accuracy of d against labels (Tables 3-4)"),
             ("mig", "MIG (histogram)"), ("information", "total correlation (nats)"))


def _settings_line(name: str, m: dict) -> str:
  if name == "factor_score":
    return (f"{m['num_votes']} votes x {m['batch_size']}, variances over "
            f"{m['num_variance_points']} points ({m['variance_source']}), votes from "
            f"{m['vote_source']}, KL pruning {m['prune_kl']}, kept dims {m['kept_dims']}")
  if name == "mig":
    return (f"{m['estimator']}, {m['num_points']} points, {m['num_bins']} bins, factors "
            f"{m['factors_used']}")
  if name in ("accuracy", "shape_accuracy"):
    return (f"{m['mapping']}, {m['num_examples']} examples ({m['points']}), many-to-one "
            f"{m['many_to_one']:.4f}, {m['num_clusters']} clusters / {m['num_labels']} labels")
  return f"{m['estimator']}, {m['num_points']} points, {m['num_samples']} samples"


def _seed_section(result: dict, base: pathlib.Path) -> list[str]:
  ck = result["checkpoint"]
  lines = [f"seed {result['seed']}, step {ck['step']} of {ck['num_steps']} "
           f"({'final checkpoint' if ck['final'] else 'NOT the final checkpoint'}; "
           f"{ck['selection']}; available {ck['available_steps']})", "",
           "| metric | value | settings |", "|---|---|---|"]
  for name, title in _HEADLINE:
    m = result["metrics"].get(name)
    if m is not None:
      lines.append(f"| {title} | {m['value']:.4f} | {_settings_line(name, m)} |")
  info = result["metrics"].get("information")
  if info is not None:
    lines += ["", "| dim | KL_j | I(x; z_j) |", "|---|---|---|"]
    lines += [f"| z{j} | {k:.3f} | {i:.3f} |"
              for j, (k, i) in enumerate(zip(info["kl_per_dim"], info["mi_per_dim"]))]
    if "discrete_mi" in info:
      lines.append(f"| d | - | {info['discrete_mi']:.3f} |")
  lines.append("")
  run_dir = pathlib.Path(result["run_dir"])
  for kind, rel in result["images"].items():
    path = (run_dir / rel).relative_to(base) if run_dir.is_relative_to(base) else run_dir / rel
    lines.append(f"![{kind}]({path.as_posix()})")
  return lines + [""]


def write_report(results: dict, path) -> None:
  """A readable markdown report of `evaluate_run`'s results (one seed or several)."""
  path = pathlib.Path(path)
  runs = results.get("seeds", [results])
  first = runs[0]
  ds = first["dataset"]
  lines = [f"# Evaluation of {results.get('workdir', first['workdir'])}", "",
           f"- method {first['method']}, m = {first['latent_dim']}, dataset {ds['name']} "
           f"({ds['class']}, source {ds['source']}, {ds['num_examples']} examples), "
           f"comparable with published numbers: {ds['comparable_with_published']}",
           f"- settings: `{json.dumps(first['settings'])}`",
           f"- evaluated {first['evaluated_at']} with jax {first['jax']['version']} "
           f"({first['jax']['backend']}); timings (s): "
           + ", ".join(f"{k} {v:.1f}" for k, v in first["timings_s"].items()), ""]
  if not first["checkpoint"]["final"]:
    lines += [f"**Warning**: step {first['checkpoint']['step']} is not the final step "
              f"({first['checkpoint']['num_steps']}): the run is unfinished or was stopped.", ""]
  for result in runs:
    lines += [f"## Seed {result['seed']}", ""] + _seed_section(result, path.parent)
  tmp = path.with_name(f".{path.name}.tmp")
  tmp.write_text("\n".join(lines))
  tmp.replace(path)
