"""The flexibly-fair classification audit of a trained FFVAE run (App. D; main paper Sec. 5).

python -m experiments.fair_classification --workdir=RUN [--target=pos_x] [--sensitive=shape]
    [--baseline=RUN_ALPHA0] [--step=N]

Restores RUN's checkpoint read-only (``checkpoint.Checkpointer(read_only=True)``: never saves,
deletes or cleans), draws ``sum(ffvae.fair.*_size)`` seeded examples of the run's training set
(DSpritesUnfair), encodes them with ``represent`` (posterior means; ``ffvae.fair.representation
= 'sample'``: one draw of q), and runs ``disentangle.train.fair_classification.audit``: the App. D
classifier on the whole representation (the unfair baseline) and with the b_j of the subgroup
(``--sensitive`` / ``ffvae.fair.subgroup``) removed (``ffvae.fair.remove``), predicting
``--target`` / ``ffvae.fair.target``; test accuracy, ΔDP and ΔEO per group. ``--baseline`` (e.g.
the alpha = 0 run, FactorVAE on [z, b] with FFVAE's grouping: its b carry no attribute by
construction, but it is an ffvae-method run and has the same ``sensitive_dims``) adds that run's
two rows. Writes ``RUN/fairness.json`` (every row with its settings) and ``RUN/fairness.md``
atomically, on process 0 only. A run whose method has no b is refused (``ValueError`` naming the
run and the method); a target inside the subgroup, or a name the data lacks, is a ``ConfigError``.
"""
from __future__ import annotations

import json
import pathlib
import sys
from typing import Optional

import numpy as np

from disentangle import atomic
from disentangle import config as config_lib

ROW_SELECTION_SEED = 1  # the examples audited: default_rng([fair.seed, 1]).choice (no replacement)


def _check_run(run_dir, config) -> None:
  from disentangle import methods  # pylint: disable=g-import-not-at-top
  from disentangle.methods import ffvae  # pylint: disable=g-import-not-at-top
  if not issubclass(methods.spec(config.method).cls, ffvae.FFVAE):
    raise ValueError(f"run {run_dir}: method {config.method!r} has no sensitive dimensions b "
                     f"(the fairness audit removes b_j; train an ffvae run)")


def audit_run(run_dir, *, target: Optional[str] = None, subgroup=None, step: Optional[int] = None,
              dataset=None, label: Optional[str] = None) -> list[dict]:
  """The audit rows of every seed of ``run_dir`` (each row labelled ``run``)."""
  from disentangle import methods  # pylint: disable=g-import-not-at-top
  from disentangle.data import supervision  # pylint: disable=g-import-not-at-top
  from disentangle.methods import ffvae  # pylint: disable=g-import-not-at-top
  from disentangle.train import encodings  # pylint: disable=g-import-not-at-top
  from disentangle.train import evaluate_run  # pylint: disable=g-import-not-at-top
  from disentangle.train import fair_classification  # pylint: disable=g-import-not-at-top
  from disentangle.train import trainer  # pylint: disable=g-import-not-at-top
  run_dir = pathlib.Path(run_dir)
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
                                       encodings.default_batch_size())
    x = np.asarray(rep.mean, np.float32)
    if fair.representation == "sample":
      noise = np.random.default_rng([fair.seed, 2]).standard_normal(x.shape)
      x = (x + np.exp(0.5 * np.asarray(rep.logvar)) * noise).astype(np.float32)
    rows = fair_classification.audit(
        x, None, attributes, names, method.sensitive_dims, subgroup, target,
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
  from disentangle.train import fair_classification  # pylint: disable=g-import-not-at-top
  run_dir = pathlib.Path(run_dir)
  paths = run_dir / "fairness.json", run_dir / "fairness.md"
  atomic.write_text(paths[0], json.dumps(rows, indent=1, default=float))
  settings = rows[0]["settings"] if rows else {}
  head = (f"# Fair classification audit of {run_dir}\n\n"
          f"Target {settings.get('target')}, subgroup {settings.get('subgroup')}, removal "
          f"{settings.get('remove')!r}, sizes {settings.get('sizes')}, audit seed "
          f"{settings.get('seed')}; classifier App. D (2 x 128 ReLU, Adam 1e-3, patience 5). "
          f"Representation: posterior {rows[0]['representation'] if rows else ''}.\n\n")
  atomic.write_text(paths[1], head + fair_classification.to_markdown(rows))
  return paths


def main(argv=None):
  from absl import app  # pylint: disable=g-import-not-at-top
  from absl import flags  # pylint: disable=g-import-not-at-top
  flags.DEFINE_string("workdir", None, "The FFVAE run (or multi-seed workdir).", required=True)
  flags.DEFINE_string("target", None, "Attribute predicted (default ffvae.fair.target).")
  flags.DEFINE_string("sensitive", None, "Comma-separated subgroup whose b is removed "
                      "(default ffvae.fair.subgroup).")
  flags.DEFINE_string("baseline", None, "A second run audited beside it (e.g. alpha = 0).")
  flags.DEFINE_integer("step", None, "Checkpoint step (default: the latest).")
  flags_ = flags.FLAGS

  def run(_):
    import jax  # pylint: disable=g-import-not-at-top
    from absl import logging  # pylint: disable=g-import-not-at-top
    if not flags_["verbosity"].present:
      logging.set_verbosity(logging.WARNING)  # orbax logs every restore at INFO
    if jax.process_index() != 0:
      return
    subgroup = (tuple(s.strip() for s in flags_.sensitive.split(",") if s.strip())
                if flags_.sensitive else None)
    try:
      rows = audit_run(flags_.workdir, target=flags_.target, subgroup=subgroup, step=flags_.step)
      if flags_.baseline:
        rows += audit_run(flags_.baseline, target=flags_.target, subgroup=subgroup)
    except (FileNotFoundError, ValueError) as e:  # ConfigError is a ValueError
      print(f"error: {e}", file=sys.stderr)
      sys.exit(2)
    json_path, md_path = write(flags_.workdir, rows)
    print(md_path.read_text())
    print(f"wrote {json_path} and {md_path}")

  app.run(run, argv)


if __name__ == "__main__":
  main()
