"""The flexibly-fair classification audit of a trained FFVAE run (App. D; main paper Sec. 5).

Restores the run's checkpoint read-only (``checkpoint.Checkpointer(read_only=True)``: never
saves, deletes or cleans), draws ``sum(ffvae.fair.*_size)`` seeded examples of the run's training
set (DSpritesUnfair), encodes them with ``represent`` (posterior means; ``ffvae.fair.representation
= 'sample'``: one draw of q), and runs `fair_classification.audit`: the App. D classifier on the
whole representation (the unfair baseline) and with the b_j of the subgroup removed
(``ffvae.fair.remove``), predicting ``ffvae.fair.target``; test accuracy, ΔDP and ΔEO per group.
`write` puts ``fairness.json`` (every row with its settings) and ``fairness.md`` in the run
directory atomically. A run whose method has no b is refused (``ValueError`` naming the run and
the method); a target inside the subgroup, or a name the data lacks, is a ``ConfigError``.
"""
from __future__ import annotations

import json
import pathlib
from typing import Optional

import numpy as np

from disentangle import atomic
from disentangle import config as config_lib
from disentangle import errors
from disentangle import methods
from disentangle import paths
from disentangle.data.labels import supervision
from disentangle.evaluation import encodings
from disentangle.evaluation import evaluate_run
from disentangle.evaluation import fair_classification
from disentangle.methods import ffvae
from disentangle.train import trainer

ROW_SELECTION_SEED = 1  # the examples audited: default_rng([fair.seed, 1]).choice (no replacement)


class NotAnFFVAERun(errors.UserError, ValueError):
  """The run audited has no sensitive dimensions b (not an ffvae-method run)."""


def _check_run(run_dir, config) -> None:
  if not issubclass(methods.spec(config.method).cls, ffvae.FFVAE):
    raise NotAnFFVAERun(f"run {run_dir}: method {config.method!r} has no sensitive dimensions b "
                     f"(the fairness audit removes b_j; train an ffvae run)")


def audit_run(run_dir, *, target: Optional[str] = None, subgroup=None, step: Optional[int] = None,
              dataset=None, label: Optional[str] = None) -> list[dict]:
  """The audit rows of every seed of ``run_dir`` (each row labelled ``run``)."""
  run_dir = paths.as_path(run_dir)
  config, run_dirs = evaluate_run.locate_run(run_dir)
  _check_run(run_dir, config)
  fair = config.ffvae.fair
  target = fair.target if target is None else target
  subgroup = tuple(fair.subgroup if subgroup is None else subgroup)
  ffvae.check_fair(config, target, subgroup)
  dataset = dataset if dataset is not None else trainer.load_training_data(config)
  supervision.check_names(dataset, subgroup, "attributes", "ffvae.fair.subgroup")
  supervision.check_names(dataset, (target,), "attributes", "ffvae.fair.target")
  sizes = (fair.train_size, fair.validation_size, fair.test_size)
  if sum(sizes) > dataset.num_examples:
    raise config_lib.ConfigError(
        f"config fields 'ffvae.fair.*_size' ask for {sum(sizes)} examples; the dataset has "
        f"{dataset.num_examples}")
  method = methods.build(config, dataset.image_shape)
  params, facts = evaluate_run.restore_params(run_dir, config, method, step)
  rows_idx = np.sort(np.random.default_rng([fair.seed, ROW_SELECTION_SEED]).choice(
      dataset.num_examples, sum(sizes), replace=False))
  names = tuple(dataset.attribute_names)
  attributes = dataset.attributes_of(rows_idx, names)
  represent = encodings.jit_represent(method, config)
  out = []
  for i, (p, seed_dir) in enumerate(zip(params, run_dirs)):
    rep, _ = encodings.encode_streamed(lambda a, b: dataset.get_images(rows_idx[a:b]),
                                       len(rows_idx), lambda x, p=p: represent(p, x),
                                       encodings.ENCODE_BATCH)
    x = np.asarray(rep.mean, np.float32)
    if fair.representation == "sample":
      noise = np.random.default_rng([fair.seed, 2]).standard_normal(x.shape)
      x = (x + np.exp(0.5 * np.asarray(rep.logvar)) * noise).astype(np.float32)
    rows = fair_classification.audit(
        x, attributes, names, method.sensitive_dims, subgroup, target,
        remove=fair.remove, seed=fair.seed, sizes=sizes, batch_size=fair.batch_size,
        max_epochs=fair.max_epochs)
    name = label or run_dir.name
    if len(run_dirs) > 1:
      name = f"{name}/{seed_dir.name}"
    for row in rows:
      row["run"] = f"{name} (alpha={config.ffvae.alpha:g})"
      row["run_dir"], row["method"] = str(seed_dir), config.method
      row["alpha"], row["gamma"] = float(config.ffvae.alpha), float(config.ffvae.gamma)
      row["checkpoint_step"], row["representation"] = facts["step"], fair.representation
      row["audited_rows"] = {"count": int(len(rows_idx)),
                             "selection": f"default_rng([{fair.seed}, {ROW_SELECTION_SEED}])"}
      row["dataset"] = getattr(dataset, "settings", {"name": getattr(dataset, "name", None)})
      row["seed_index"] = i
    out.extend(rows)
  return out


def write(run_dir, rows: list[dict]) -> tuple[pathlib.Path, pathlib.Path]:
  """``fairness.json`` and ``fairness.md`` in ``run_dir``, atomically."""
  run_dir = paths.as_path(run_dir)
  written = run_dir / "fairness.json", run_dir / "fairness.md"
  atomic.write_text(written[0], json.dumps(rows, indent=1, default=float))
  settings = rows[0]["settings"] if rows else {}
  head = (f"# Fair classification audit of {run_dir}\n\n"
          f"Target {settings.get('target')}, subgroup {settings.get('subgroup')}, removal "
          f"{settings.get('remove')!r}, sizes {settings.get('sizes')}, audit seed "
          f"{settings.get('seed')}; classifier App. D (2 x 128 ReLU, Adam 1e-3, patience 5). "
          f"Representation: posterior {rows[0]['representation'] if rows else ''}.\n\n")
  atomic.write_text(written[1], head + fair_classification.to_markdown(rows))
  return written
