"""Tables over seeds: the mean with outliers excluded (FFVAE Figs. 6-7) and MIG's factor set."""
import json

import numpy as np
import pytest

from disentangle.evaluation import aggregate
from experiments.configs import dsprites_unfair_ffvae


def test_outlier_excluded_mean_by_hand():
  # Q1 = 2, Q3 = 4 (linear quartiles of 1, 2, 3, 4, 100), IQR = 2: fences [-1, 7]; 100 is out.
  out = aggregate.outlier_excluded_mean([1.0, 2.0, 3.0, 4.0, 100.0])
  assert (out["low"], out["high"]) == (-1.0, 7.0)
  assert out["excluded"] == [100.0] and out["n_kept"] == 4 and out["mean"] == 2.5
  # Values on a fence are kept: 0, 1, 1, 1, 2 has Q1 = Q3 = 1 (IQR 0), fences [1, 1].
  tight = aggregate.outlier_excluded_mean([0.0, 1.0, 1.0, 1.0, 2.0])
  assert tight["excluded"] == [0.0, 2.0] and tight["mean"] == 1.0
  assert aggregate.outlier_excluded_mean([])["mean"] is None


def test_three_values_or_fewer_are_never_excluded():
  rng = np.random.default_rng(0)
  for n in (1, 2, 3):
    for _ in range(200):
      v = rng.standard_cauchy(n)
      out = aggregate.outlier_excluded_mean(v)
      assert out["excluded"] == [] and out["mean"] == pytest.approx(v.mean())


def _ffvae_run(path, alpha, gamma, seed, hist, sampled):
  config = dsprites_unfair_ffvae.get_config(f"ffvae,ffvae.alpha={alpha},ffvae.gamma={gamma}")
  config.seed = seed
  path.mkdir(parents=True)
  (path / "config.json").write_text(json.dumps(config.to_dict()))
  mig = {"value": hist, "estimator": "histogram", "factor_set": "all",
         "factor_names": ["shape", "scale", "orientation", "pos_x", "pos_y"],
         "by_estimator": {
             "histogram": {"value": hist, "factor_set": "all",
                           "factor_names": ["shape", "scale", "orientation", "pos_x", "pos_y"]},
             "sampled": {"value": sampled, "factor_set": "chen_et_al",
                         "factor_names": ["scale", "orientation", "pos_x", "pos_y"]}}}
  (path / "results.json").write_text(json.dumps({
      "run_dir": str(path), "seed": seed, "method": "ffvae", "latent_dim": 10,
      "dataset": {"name": "dsprites", "class": "DSprites", "source": "render",
                  "comparable_with_published": False},
      "checkpoint": {"step": 6, "num_steps": 6, "final": True},
      "metrics": {"mig": mig}}))
  return path


def test_ffvae_sweep_table_states_the_factor_sets_and_the_outlier_excluded_means(tmp_path):
  # Two grid points (alpha 300 and 400 at gamma 40), four seeds each; one seed of alpha 300
  # collapsed (MIG 0.9 among ~0.2s).
  hist = {300: [0.20, 0.22, 0.24, 0.90], 400: [0.30, 0.31, 0.32, 0.33]}
  runs = [_ffvae_run(tmp_path / f"a{a}_s{s}", a, 40, s, h, h / 2)
          for a, values in hist.items() for s, h in enumerate(values)]
  table = aggregate.aggregate_runs(runs)
  assert table["outlier_rule"].startswith("Tukey's fences")
  rows = {r["per_seed"][0]["run_dir"].split("/")[-1][:4]: r for r in table["rows"]}
  mig300 = rows["a300"]["metrics"]["mig"]
  # By hand: 20, 22, 24, 90 -> Q1 = 21.5, Q3 = 40.5, IQR 19, fences [-7, 69]: 90 is out.
  assert mig300["mean"] == pytest.approx(39.0)
  assert mig300["mean_outliers_excluded"] == pytest.approx(22.0)
  assert mig300["outliers_excluded"] == pytest.approx([90.0])
  assert rows["a400"]["metrics"]["mig"]["mean_outliers_excluded"] == pytest.approx(31.5)
  settings = rows["a300"]["metric_settings"]["mig"]
  assert settings["histogram"]["factor_set"] == "all"
  assert settings["sampled"] == {"factor_set": "chen_et_al",
                                 "factor_names": ["scale", "orientation", "pos_x", "pos_y"]}
  sampled = rows["a300"]["metrics_by_estimator"]["mig"]["sampled"]
  assert sampled["mean"] == pytest.approx(19.5)
  assert sampled["mean_outliers_excluded"] == pytest.approx(11.0)
  # Along alpha (FFVAE Fig. 6a's dashed line): each alpha's runs; along gamma (one value): none.
  swept = [s for s in table["swept_means"] if s["metric"] == "mig"]
  assert [(s["field"], s["value"]) for s in swept] == [("ffvae.alpha", 300.0),
                                                       ("ffvae.alpha", 400.0)]
  assert swept[0]["mean_outliers_excluded"] == pytest.approx(22.0)
  assert any(s["metric"] == "mig_sampled" and s["mean_outliers_excluded"] == pytest.approx(11.0)
             for s in table["swept_means"])
  text = aggregate.markdown_table(table, "all")
  assert "39.00 (29.48) / 90.00 ‡22.00" in text
  assert "‡: the mean with outliers excluded (Tukey's fences" in text
  assert ("histogram estimator over all factors (shape, scale, orientation, pos_x, pos_y): the MIG "
          "column; "
          "sampled estimator over chen_et_al factors (scale, orientation, pos_x, pos_y): "
          "19.50 (14.74) / 45.00 ‡11.00") in text
  assert "- mig, ffvae ffvae.alpha = 300.0: 39.00 / 22.00 (n = 4, excluded 90.00)" in text
  # The compact table (no config matched, nothing published: MIG as the headline) shows mean
  # (std) in its MIG column; the notes under it keep the outlier-excluded means.
  compact = aggregate.markdown_table(table)
  assert "| experiment | method | seeds | step | MIG | MIG (paper) |" in compact
  assert "| 39.00 (29.48) | - |" in compact and "| 39.00 (29.48) / " not in compact
  assert "19.50 (14.74) / 45.00 ‡11.00" in compact and "‡: the mean with outliers" in compact
