"""Each registered metric draws from its own random stream; repeats; bad input is one line."""
import numpy as np
import pytest

from disentangle.data.ground_truth import InMemoryGroundTruth
from disentangle.metrics import registry
from disentangle.metrics.representation import as_representation
from tests import synthetic_factors as syn

SIZES = (3, 4, 5)


def _grid():
  return np.indices(SIZES).reshape(len(SIZES), -1).T.astype(np.int64)


def _inputs(seed=0):
  """A tiny ground truth whose 'observations' are the factors with a little noise, a code
  equal to them (plus a discrete code carrying factor 0), every field the metrics read."""
  factors = np.repeat(_grid(), 4, axis=0)
  noise = np.random.default_rng(7).normal(0, 0.05, factors.shape)
  data = InMemoryGroundTruth(factors, factors + noise, SIZES,
                             factor_names=("shape", "scale", "x"))
  def represent(obs):
    obs = np.asarray(obs, np.float64)
    return {"mean": obs, "logvar": np.full_like(obs, -2.0),
            "discrete": np.rint(obs[:, 0]).astype(np.int64)}
  rep = as_representation(represent(data._observations))  # pylint: disable=protected-access
  return registry.Inputs("run", np.random.default_rng([seed, 6]), rep=rep, ground_truth=data,
                         represent=represent, factor_names=("shape", "scale", "x"),
                         encode_batch_size=64)


SMALL = {"dci": {"num_train": 100, "num_test": 100},  # the slowest of the suite's metrics
         "factor_score": {"num_votes": 60, "batch_size": 10},
         "factor_score_no_discrete": {"num_votes": 60, "batch_size": 10},
         "mig": {"num_points": 200}, "shape_accuracy": {"num_points": 200}}


def _equal(a, b):
  if isinstance(a, dict):
    return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
  if isinstance(a, (list, tuple)):
    return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
  if isinstance(a, np.ndarray):
    return a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
  if isinstance(a, float) and np.isnan(a):
    return isinstance(b, float) and np.isnan(b)
  return a == b


def _run(names=None):
  return registry.run(_inputs(), {"information": True}, names=names,
                      overrides=registry_overrides())[0]


def registry_overrides():
  """Few points for every metric (disentanglement_lib's suite included)."""
  return {k: v for k, v in dict(syn.small_settings(udr_sample={"num_points": 100}),
                                **SMALL).items() if k in registry.METRICS}


@pytest.fixture(scope="module")
def full():
  """Every registered metric's result on `_inputs` (computed once for the tests that change the
  registry and compare)."""
  return _run()


@pytest.mark.slow
@pytest.mark.parametrize("removed", ["factor_score", "mig", "information"])
def test_removing_a_metric_leaves_every_other_result_bitwise_equal(monkeypatch, full, removed):
  assert removed in full and len(full) >= 4
  # A new dict, not a deleted item: undoing a deletion would register the metric again last.
  monkeypatch.setattr(registry, "METRICS",
                      {k: m for k, m in registry.METRICS.items() if k != removed})
  fewer = _run()
  assert set(fewer) == set(full) - {removed}
  for name in fewer:
    assert _equal(fewer[name], full[name]), name


@pytest.mark.slow
def test_reordering_metrics_leaves_results_equal(monkeypatch, full):
  reordered = dict(reversed(list(registry.METRICS.items())))
  monkeypatch.setattr(registry, "METRICS", reordered)
  again = _run()
  for name in full:
    assert _equal(again[name], full[name]), name


def test_streams_differ_between_metrics_repeats_and_seeds():
  base = np.random.default_rng([0, 6])
  draws = {(n, r): registry.metric_rng(base, n, r).integers(0, 2**62)
           for n in ("mig", "factor_score") for r in (0, 1)}
  assert len(set(draws.values())) == 4
  again = registry.metric_rng(np.random.default_rng([0, 6]), "mig", 0).integers(0, 2**62)
  other_seed = registry.metric_rng(np.random.default_rng([1, 6]), "mig", 0).integers(0, 2**62)
  assert again == draws[("mig", 0)] != other_seed


def test_repeats_give_mean_and_std_of_independent_streams():
  inputs = _inputs()
  one, _ = registry.run(inputs, {}, names=["mig"], overrides=registry_overrides())
  three, _ = registry.run(inputs, {"repeats": 3}, names=["mig"], overrides=registry_overrides())
  m = three["mig"]
  assert m["repeats"] == 3 and len(m["values"]) == 3 and len(set(m["values"])) == 3
  assert m["values"][0] == one["mig"]["value"]  # repeat 0 is the single run's stream
  assert m["value"] == pytest.approx(np.mean(m["values"]))
  assert m["value_std"] == pytest.approx(np.std(m["values"], ddof=1))
  with pytest.raises(ValueError, match="repeats"):
    registry.run(inputs, {"repeats": 0}, names=["mig"])


def test_a_failing_metric_is_one_line_and_the_others_still_run(monkeypatch):
  def broken(inputs, settings):
    raise registry.MetricInputError("the representation has NaN")
  monkeypatch.setitem(registry.METRICS, "broken",
                      registry.Metric("broken", "b", broken, ground_truth=True))
  errors = {}
  out, _ = registry.run(_inputs(), {}, names=["broken", "mig"], overrides=registry_overrides(),
                        errors=errors)
  assert "mig" in out and "broken" not in out
  assert errors == {"broken": "broken: the representation has NaN"}


def test_std_across_repeats_shrinks_when_the_points_grow():
  stds = {}
  for n in (100, 3000):
    over = dict(registry_overrides(), mig={"num_points": n})
    stds[n] = registry.run(_inputs(), {"repeats": 8}, names=["mig"],
                           overrides=over)[0]["mig"]["value_std"]
  assert stds[100] > 2 * stds[3000] > 0


def test_aggregate_shows_the_repeats_std_beside_the_spread_across_seeds(tmp_path):
  import jax  # pylint: disable=g-import-not-at-top

  from disentangle import config as config_lib  # pylint: disable=g-import-not-at-top
  from disentangle.evaluation import aggregate  # pylint: disable=g-import-not-at-top
  from disentangle.evaluation import report  # pylint: disable=g-import-not-at-top
  from tests import helpers  # pylint: disable=g-import-not-at-top
  runs = []
  for seed, (value, std) in enumerate(((0.2, 0.01), (0.4, 0.03))):
    run_dir = tmp_path / f"s{seed}"
    run_dir.mkdir()
    cfg = helpers.tiny_config(seed=seed)
    (run_dir / "config.json").write_text(config_lib.to_json(cfg))
    report.write_json(run_dir / "results.json", {
        "run_dir": str(run_dir), "workdir": str(run_dir), "seed": seed, "method": cfg.method,
        "latent_dim": 3, "dataset": {"name": "mnist", "class": "TinyImages", "source": None,
                                     "num_examples": 48, "comparable_with_published": False},
        "checkpoint": {"step": 6, "num_steps": 6, "final": True, "available_steps": [6],
                       "selection": "latest"},
        "metrics": {"mig": {"value": value, "value_std": std, "repeats": 3}},
        "settings": {}, "evaluated_at": "now", "timings_s": {}, "images": {},
        "jax": {"version": jax.__version__, "backend": "cpu"}})
    runs.append(run_dir)
  table = aggregate.aggregate_runs(runs)
  (row,) = table["rows"]
  assert row["metrics"]["mig"]["repeat_std"] == pytest.approx(2.0)  # percent, mean over seeds
  assert row["metrics"]["mig"]["std"] == pytest.approx(10.0)
  assert "30.00 (10.00) / 40.00 [2.00]" in aggregate.markdown_table(table, "all")
