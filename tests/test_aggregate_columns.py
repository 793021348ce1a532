"""The columns of the tables over seeds (`aggregate.table_columns`): the compact default (the
headline metrics beside the published ones), every column, a list of names. The command line's
``--columns``: tests/test_evaluate.py (``test_aggregate_mean_std_best_beside_published``)."""
import types

import pytest

from disentangle.evaluation import aggregate
from disentangle.metrics import registry
from tests import helpers

COMPACT_MAX = 10  # columns of the compact table


def _records(values, *, selected=None):
  """One record per seed of a tiny CascadeVAE run with every tabulated metric at ``values``."""
  out = []
  for seed, v in enumerate(values):
    result = {"run_dir": f"s{seed}", "seed": seed, "method": "cascadevae", "latent_dim": 3,
              "dataset": {"name": "mnist", "class": "ArrayImages", "source": None,
                          "comparable_with_published": True},
              "checkpoint": {"step": 6, "num_steps": 6, "final": True},
              "metrics": {n: {"value": v} for n in registry.tabulated()}}
    if selected is not None:
      result["selected"] = {"rule": selected, "step": 3 if selected != "final" else 6,
                            "label": selected,
                            "metrics": {n: {"value": v} for n in registry.tabulated()}}
    out.append({"run_dir": f"s{seed}", "results": result,
                "config": helpers.tiny_config("cascadevae", seed=seed).to_dict()})
  return out


def _table(published, *, selected=None):
  module = types.ModuleType("experiments.configs.fake_cascade")
  module.PUBLISHED = {"row": published} if published else {}
  module.VARIANTS = ("row",)
  module.get_config = lambda arg=None: helpers.tiny_config("cascadevae", seed=0)
  return aggregate.aggregate(_records([0.8, 0.9, 0.7], selected=selected),
                             aggregate.config_candidates([module]))


def _head(text):
  return [c.strip() for c in text.splitlines()[0].strip("|").split("|")]


@pytest.mark.parametrize("published,selected,head,cells", [
    ({"accuracy": {"mean": 81.41, "std": 9.54, "best": 97.31}}, None,
     ["accuracy", "accuracy (paper)"], "| 80.00 (8.16) | 81.41 (9.54) |"),
    ({"factor_score": {"mean": 95.0}, "shape_accuracy": {"mean": 83.0, "std": 1.5}}, "final",
     ["score", "score (paper)", "shape acc.", "shape acc. (paper)"],
     "| 80.00 (8.16) | 95.00 (-) | 80.00 (8.16) | 83.00 (1.50) |"),
    (None, None, ["score", "score (paper)", "MIG", "MIG (paper)"], "| 80.00 (8.16) | - |"),
    ({"accuracy": {"mean": 81.41}}, "best_validation",
     ["accuracy (final)", "accuracy (selected)", "accuracy (paper)"],
     "| 80.00 (8.16) | 80.00 (8.16) | 81.41 (-) |"),
], ids=["published", "two-published-no-selection", "none-published", "selected"])
def test_the_compact_table_is_the_headline_metrics_beside_the_published(published, selected,
                                                                       head, cells):
  """By default: experiment, method, seeds, step, then the metrics the config's published
  numbers name (the factor score and MIG where none) as mean (std), each beside the published
  mean (std); the selected checkpoint's only where one was selected ('final': none). Every
  column (each tabulated metric with its best seed, m, the selected figures) with 'all'."""
  table = _table(published, selected=selected)
  text = aggregate.markdown_table(table)
  assert _head(text) == ["experiment", "method", "seeds", "step", *head]
  assert len(_head(text)) <= COMPACT_MAX
  assert cells in text and "| fake_cascade:row | cascadevae | 3 | 6 |" in text
  every = aggregate.markdown_table(table, "all")
  per_metric = 3 if selected else 2
  assert len(_head(every)) == 5 + per_metric * len(registry.tabulated())
  assert _head(every)[:5] == ["experiment", "method", "m", "seeds", "step"]
  assert "80.00 (8.16) / 90.00" in every
  assert aggregate.cell_text(table["rows"][0]["metrics"]["mig"]) in every


def test_a_list_of_column_names_picks_those_and_an_unknown_name_is_one_line():
  table = _table({"accuracy": {"mean": 81.41, "std": 9.54, "best": 97.31}})
  text = aggregate.markdown_table(table, "seeds, mig,accuracy:paper")
  assert _head(text) == ["seeds", "MIG", "accuracy (paper)"]
  assert "| 3 | 80.00 (8.16) / 90.00 | 81.41 (9.54) / 97.31 |" in text
  assert aggregate.markdown_table(table, ["seeds", "mig", "accuracy:paper"]) == text
  with pytest.raises(aggregate.UnknownColumn, match=r"^--columns: 'mig:selected', 'nope' not "
                     r"in this table; its columns: experiment, method, m, seeds, step, ") as e:
    aggregate.markdown_table(table, "mig:selected,nope")
  assert "\n" not in str(e.value)
