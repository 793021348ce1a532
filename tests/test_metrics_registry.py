"""The metric registry drives every consumer; K discrete codes; MIG's protocol and use_discrete."""
import json

import jax
import numpy as np
import pytest

from disentangle import config as config_lib
from disentangle import methods
from disentangle import metrics
from disentangle.data.ground_truth import InMemoryGroundTruth
from disentangle.evaluation import aggregate
from disentangle.evaluation import evaluator as evaluator_lib
from disentangle.evaluation import report
from disentangle.evaluation import score as score_lib
from disentangle.metrics import registry
from disentangle.metrics.representation import as_representation
from disentangle.metrics.representation import concatenate
from tests import helpers

SIZES = (3, 4, 5)


def _mean_abs(inputs, settings):
  return {"value": float(np.abs(inputs.rep.mean).mean()) * settings["scale"],
          "scale": settings["scale"], "num_points": inputs.rep.num_examples}


PROBE = registry.Metric("mean_abs", "mean |z|", _mean_abs,
                        lambda cfg, stage: {"scale": 0.5 if stage == "training" else 1.0},
                        describe=lambda m: f"scale {m['scale']}")


def test_a_metric_registered_once_appears_in_evaluator_report_and_aggregate(tmp_path,
                                                                           monkeypatch):
  monkeypatch.setitem(registry.METRICS, PROBE.name, PROBE)
  # In-training evaluator: logged as eval/mean_abs and written with its settings.
  data = helpers.TinyImages(n=48)
  config = helpers.tiny_config(**{"eval.num_points": 40, "eval.num_images": 4,
                                  "eval.information": False})
  method = methods.build(config, data.image_shape)
  params = jax.jit(method.init)(jax.random.PRNGKey(0)).params
  ev = evaluator_lib.Evaluator(config, method, tmp_path / "run", dataset=data)
  out = ev.run(params, step=5)
  rep = metrics.as_representation(jax.device_get(
      jax.jit(method.represent)(params, data.images[ev.indices])))
  expected = 0.5 * np.abs(rep.mean).mean()
  assert out["eval/mean_abs"] == pytest.approx(expected, rel=1e-5)
  details = json.loads((tmp_path / "run" / "eval" / "step_5.json").read_text())
  assert details["mean_abs"]["scale"] == 0.5 and details["mean_abs"]["num_points"] == 40

  # Tables over seeds: a column titled from the registry, values in percent.
  runs = []
  for seed, value in ((0, 0.2), (1, 0.4)):
    run_dir = tmp_path / f"s{seed}"
    run_dir.mkdir()
    cfg = helpers.tiny_config(seed=seed)
    (run_dir / "config.json").write_text(config_lib.to_json(cfg))
    result = {"run_dir": str(run_dir), "workdir": str(run_dir), "seed": seed,
              "method": cfg.method, "latent_dim": 3,
              "dataset": {"name": "mnist", "class": "TinyImages", "source": None,
                          "num_examples": 48, "comparable_with_published": False},
              "checkpoint": {"step": 6, "num_steps": 6, "final": True,
                             "available_steps": [6], "selection": "latest"},
              "metrics": {"mean_abs": {"value": value, "scale": 1.0}},
              "settings": {}, "evaluated_at": "now", "timings_s": {}, "images": {},
              "jax": {"version": jax.__version__, "backend": "cpu"}}
    report.write_json(run_dir / "results.json", result)
    runs.append(run_dir)
  table = aggregate.aggregate_runs(runs)
  (row,) = table["rows"]
  assert row["metrics"]["mean_abs"]["mean"] == pytest.approx(30.0)
  assert "| mean |z| | mean |z| (paper) |" in aggregate.markdown_table(table)
  # The report of evaluate_run lists it with its settings line.
  report.write_report(json.loads((runs[0] / "results.json").read_text()), runs[0] / "r.md")
  assert "| mean |z| | 0.2000 | scale 1.0 |" in (runs[0] / "r.md").read_text()


def test_metric_off_at_eval_steps_unless_its_flag_is_set(monkeypatch):
  flagged = registry.Metric("flagged", "f", lambda i, s: {"value": 1.0}, training_flag="mig")
  monkeypatch.setitem(registry.METRICS, flagged.name, flagged)
  inputs = registry.Inputs("training", np.random.default_rng(0))
  assert "flagged" not in registry.run(inputs, {"mig": False}, names=["flagged"])[0]
  assert "flagged" in registry.run(inputs, {"mig": True}, names=["flagged"])[0]
  run_inputs = registry.Inputs("run", np.random.default_rng(0))
  assert "flagged" in registry.run(run_inputs, {"mig": False}, names=["flagged"])[0]
  with pytest.raises(ValueError, match="already registered"):
    registry.register(flagged)


def test_representation_with_k_codes_round_trips():
  rng = np.random.default_rng(0)
  n, k = 10, 3
  codes = rng.integers(0, 4, (n, k))
  raw = {"mean": rng.normal(size=(n, 2)).astype(np.float32),
         "logvar": np.zeros((n, 2), np.float32), "discrete": codes[:, 0].astype(np.int32),
         "discrete_codes": codes.astype(np.int32)}
  rep = as_representation(raw)
  np.testing.assert_array_equal(rep.discrete_codes, codes)
  np.testing.assert_array_equal(rep.discrete, codes[:, 0])
  assert rep.discrete_codes.dtype == np.int64
  np.testing.assert_array_equal(rep.codes, codes)
  # Slicing, concatenation, a Representation read again and batched encoding keep every code.
  back = concatenate([rep.take(slice(0, 4)), rep.take(slice(4, n))])
  np.testing.assert_array_equal(back.discrete_codes, codes)
  np.testing.assert_array_equal(as_representation(back).discrete_codes, codes)
  np.testing.assert_array_equal(rep.take(np.array([7, 2])).discrete_codes, codes[[7, 2]])
  index = np.arange(n)
  batched = metrics.encode_in_batches(
      lambda idx: {k_: v[np.asarray(idx, int)] for k_, v in raw.items()}, index, 4)
  np.testing.assert_array_equal(batched.discrete_codes, codes)
  # The codes alone give the first as `discrete`; a different `discrete` is refused.
  only = as_representation({"mean": raw["mean"], "discrete_codes": codes})
  np.testing.assert_array_equal(only.discrete, codes[:, 0])
  with pytest.raises(ValueError, match="first column"):
    as_representation(dict(raw, discrete=(codes[:, 0] + 1)))
  assert rep.without_discrete().codes is None
  single = as_representation({"mean": raw["mean"], "discrete": codes[:, 1]})
  np.testing.assert_array_equal(single.codes, codes[:, 1:2])


def _plugin_mi_by_hand(a, b):
  """I(a; b) in nats from the contingency table, written out."""
  n = len(a)
  mi = 0.0
  for x in np.unique(a):
    for y in np.unique(b):
      pxy = np.sum((a == x) & (b == y)) / n
      if pxy > 0:
        mi += pxy * np.log(pxy / (np.mean(a == x) * np.mean(b == y)))
  return mi


def _entropy_by_hand(a):
  p = np.unique(a, return_counts=True)[1] / len(a)
  return float(-(p * np.log(p)).sum())


def _noisy_grid():
  factors = np.indices(SIZES).reshape(len(SIZES), -1).T
  return InMemoryGroundTruth(factors, factors.astype(np.float64))


def _encoder(x):
  # Two continuous dimensions (factor 0 with noise, a mix of factors 1 and 2) and two codes.
  noise = np.sin(x[:, 0] * 12.9898 + x[:, 1] * 78.233 + x[:, 2] * 3.7) * 0.4
  mean = np.stack([x[:, 0] + noise, x[:, 1] + 0.3 * x[:, 2]], axis=1)
  codes = np.stack([x[:, 1], (x[:, 2] % 2)], axis=1).astype(np.int64)
  return metrics.Representation(mean=mean, discrete=codes[:, 0], discrete_codes=codes)


def _mig_by_hand(seed, num_points, use_discrete, num_bins=20):
  rng = np.random.default_rng(seed)
  data = _noisy_grid()
  factors = data.sample_factors(num_points, rng)
  rep = _encoder(data.sample_observations_from_factors(factors, rng))
  rows = []
  for j in range(rep.mean.shape[1]):
    x = rep.mean[:, j]
    edges = np.linspace(x.min(), x.max(), num_bins + 1)[:-1]
    rows.append(np.digitize(x, edges))
  if use_discrete:
    rows += list(rep.discrete_codes.T)
  mi = np.array([[_plugin_mi_by_hand(r, factors[:, k]) for k in range(len(SIZES))]
                 for r in rows])
  gaps = []
  for k in range(len(SIZES)):
    top = np.sort(mi[:, k])[::-1]
    gaps.append((top[0] - top[1]) / _entropy_by_hand(factors[:, k]))
  return float(np.mean(gaps)), mi


def test_mig_default_is_disentanglement_libs_and_use_discrete_adds_the_rows():
  default = metrics.mig(_noisy_grid(), _encoder, np.random.default_rng(4), num_points=3000)
  score, mi = _mig_by_hand(4, 3000, use_discrete=False)
  assert default["protocol"] == "disentanglement_lib" and not default["use_discrete"]
  assert default["mutual_information"].shape == (2, 3)
  np.testing.assert_allclose(default["mutual_information"], mi, atol=1e-10)
  assert default["score"] == pytest.approx(score, abs=1e-10)

  with_codes = metrics.mig(_noisy_grid(), _encoder, np.random.default_rng(4), num_points=3000,
                           use_discrete=True)
  score_d, mi_d = _mig_by_hand(4, 3000, use_discrete=True)
  assert with_codes["mutual_information"].shape == (4, 3)  # two codes: two more rows
  np.testing.assert_allclose(with_codes["mutual_information"], mi_d, atol=1e-10)
  assert with_codes["score"] == pytest.approx(score_d, abs=1e-10)
  assert with_codes["protocol"] == "disentanglement_lib+discrete_codes"
  assert with_codes["use_discrete"] and with_codes["num_discrete_rows"] == 2
  assert with_codes["score"] != pytest.approx(default["score"], abs=1e-3)


def test_score_passes_use_discrete_and_estimator_from_the_config():
  factors = np.indices(SIZES).reshape(len(SIZES), -1).T
  # The factors as 1x3 images, which the encoder reads as its three inputs.
  data = InMemoryGroundTruth(factors, factors[:, None, :].astype(np.float32),
                             factor_names=("shape", "b", "c"))
  represent = lambda x: _encoder(x.reshape(len(x), -1))
  kw = dict(metrics=("factor_score", "mig", "shape_accuracy"), max_points=600, seed=1,
            encode_batch_size=64, log=None)
  out = score_lib.score(represent, data, **kw)["metrics"]
  assert out["mig"]["protocol"] == "disentanglement_lib" and not out["mig"]["use_discrete"]
  assert out["mig"]["estimator"] == "histogram"
  assert out["factor_score"]["use_discrete"]  # CascadeVAE's protocol keeps d
  assert out["shape_accuracy"]["points"] == "whole_dataset"
  out = score_lib.score(represent, data, eval_overrides={"eval.use_discrete": "include"},
                        **kw)["metrics"]
  assert out["mig"]["use_discrete"] and out["mig"]["mutual_information"].shape[0] == 4
  rep = lambda x: represent(x)._replace(logvar=np.zeros((len(x), 2)))
  out = score_lib.score(rep, data, eval_overrides={"eval.use_discrete": "exclude",
                                                   "eval.mig_estimator": "sampled"},
                        **kw)["metrics"]
  assert not out["factor_score"]["use_discrete"] and out["factor_score"]["discrete_dim"] is None
  assert out["mig"]["estimator"] == "sampled" and out["mig"]["protocol"] == "chen_et_al_2018"
  with pytest.raises(config_lib.ConfigError, match="eval.mig_estimator"):
    score_lib.score(represent, data, eval_overrides={"eval.mig_estimator": "kde"}, **kw)
