"""Proportional budgets: a shortened run keeps every schedule at its fraction.

The references are the schedules themselves (``schedules.num_relieved`` over every iteration,
``schedules.linear_capacity``), evaluated for the paper config and for the shortened one.
"""
import fractions
import importlib

import numpy as np
import pytest

from disentangle import config as config_lib
from disentangle import schedules
from experiments.configs import common


def config(name, arg=""):
  return importlib.import_module(f"experiments.configs.{name}").get_config(arg)


def relief_fractions(c):
  """The iterations t at which one more dimension runs at beta_l, as fractions of the run."""
  t = np.arange(0, c.num_steps + 1)
  n = np.asarray(schedules.num_relieved(t, num_dims=c.model.latent_dim,
                                        relieve_every=c.cascade.relieve_every,
                                        relieved_at_start=c.cascade.relieved_at_start))
  steps = t[1:][np.diff(n) > 0]
  return [fractions.Fraction(int(s), c.num_steps) for s in steps]


@pytest.mark.parametrize("name,row", [("mnist_cascade", "m10"), ("mnist_cascade", "m4"),
                                      ("fashion_mnist_cascade", "m10")])
def test_cpu_variant_relieves_at_the_papers_fractions(name, row):
  paper, cpu = config(name, row), config(name, f"{row},cpu")
  assert cpu.num_steps < paper.num_steps
  expected = relief_fractions(paper)
  assert len(expected) == paper.model.latent_dim  # every dimension is relieved within the run
  assert relief_fractions(cpu) == expected
  assert (fractions.Fraction(cpu.cascade.discrete_start, cpu.num_steps)
          == fractions.Fraction(paper.cascade.discrete_start, paper.num_steps))


@pytest.mark.parametrize("name", ["mnist_jointvae", "fashion_mnist_jointvae"])
def test_cpu_variant_keeps_the_capacity_curves(name):
  paper, cpu = config(name, "m10"), config(name, "m10,cpu")
  ratio = fractions.Fraction(paper.num_steps, cpu.num_steps)
  assert ratio.denominator == 1 and ratio > 1
  t = np.arange(0, cpu.num_steps + 1)
  for kind in ("cont", "disc"):
    def curve(c, steps):
      j = c.jointvae
      return np.asarray(schedules.linear_capacity(
          steps, c_min=j[f"{kind}_min"], c_max=j[f"{kind}_max"], num_steps=j[f"{kind}_steps"]))
    np.testing.assert_allclose(curve(cpu, t), curve(paper, t * int(ratio)), rtol=1e-6)


@pytest.mark.parametrize("name", ["mnist_cascade", "fashion_mnist_cascade", "mnist_jointvae",
                                  "fashion_mnist_jointvae", "dsprites_annealedvae",
                                  "dsprites_dipvae", "dsprites_weak"])
def test_cpu_variant_changes_only_the_schedule(name):
  paper, cpu = config(name, ""), config(name, "cpu")
  f = fractions.Fraction(cpu.num_steps, paper.num_steps)
  assert f == common.CPU_FRACTION
  flat_paper, flat_cpu = dict(config_lib.flatten(paper)), dict(config_lib.flatten(cpu))
  scheduled = set(common.schedule_fields(paper))
  for path, value in flat_paper.items():
    if path in scheduled:
      assert flat_cpu[path] == value * f, path
    elif path in common.PERIODS:
      assert abs(flat_cpu[path] - value * f) <= 0.5, path
    else:
      assert flat_cpu[path] == value, path


def test_scale_schedule_dsprites_cascade():
  paper = config("dsprites_cascade", "m6")  # r = 2e4, t_d = 1e5, 3e5 iterations
  short = config("dsprites_cascade", "m6")
  common.scale_schedule(short, 0.1)
  assert (short.num_steps, short.cascade.relieve_every, short.cascade.discrete_start,
          short.eval_every, short.checkpoint_every) == (30_000, 2_000, 10_000, 1_000, 1_000)
  assert relief_fractions(short) == relief_fractions(paper)


def test_scale_schedule_keeps_never_and_rejects_uneven_fractions():
  c = config("dsprites_cascade", "cascade_c")  # no discrete code: t_d = NEVER
  common.scale_schedule(c, fractions.Fraction(1, 10))
  assert c.cascade.discrete_start == common.NEVER
  c = config("dsprites_cascade", "m6")
  with pytest.raises(config_lib.ConfigError, match="cascade.relieve_every"):
    common.scale_schedule(c, fractions.Fraction(1, 3))  # 2e4 / 3 is not a whole step
  with pytest.raises(config_lib.ConfigError, match="fraction"):
    common.scale_schedule(c, 1.5)


def test_authors_code_variant_relieves_as_their_run_batch():
  """dsprites_cascade:authors_code: one dim at step 0, one more every 2e4, a pause at t_d = 8e4."""
  import importlib

  from disentangle import methods
  c = importlib.import_module("experiments.configs.dsprites_cascade").get_config("authors_code")
  methods.validate(c)
  assert (c.optimizer.learning_rate, c.cascade.beta_low, c.cascade.discrete_start,
          c.weight_decay, c.model.posterior_head) == (1e-4, 0.1, 80_000, 4e-5, "softplus_sigma")
  method = methods.build(c, (64, 64, 1))
  relieved = [int(np.sum(np.asarray(method.betas(t)) == 0.1))
              for t in (1, 20_001, 40_001, 60_001, 80_001, 100_001, 120_001, 299_999)]
  assert relieved == [1, 2, 3, 4, 4, 5, 6, 6]
  plain = importlib.import_module("experiments.configs.dsprites_cascade").get_config("m6")
  assert plain.cascade.pause_at_discrete_start is False and plain.cascade.relieved_at_start == 0


@pytest.mark.parametrize("name,row,fraction", [("dsprites_parted", "labels10000", (1, 30)),
                                               ("mnist_parted", "labels256", (1, 5))])
def test_parted_cpu_variant_keeps_capacities_and_plateau_epoch(name, row, fraction):
  paper, cpu = config(name, row), config(name, f"{row},cpu")
  f = fractions.Fraction(*fraction)
  assert fractions.Fraction(cpu.num_steps, paper.num_steps) == f
  t = np.arange(0, cpu.num_steps + 1)
  for kind in ("z", "u"):
    def curve(c, steps):
      p = c.parted
      return np.asarray(schedules.linear_capacity(
          steps, c_min=p[f"{kind}_capacity_min"], c_max=p[f"{kind}_capacity_max"],
          num_steps=p[f"{kind}_capacity_steps"]))
    np.testing.assert_allclose(curve(cpu, t), curve(paper, t * int(1 / f)), rtol=1e-6)
  assert cpu.parted.plateau_epoch_steps == round(paper.parted.plateau_epoch_steps * f)
  epochs = lambda c: c.num_steps / c.parted.plateau_epoch_steps  # 30 (dSprites), ~60 (MNIST)
  assert abs(epochs(cpu) - epochs(paper)) < 0.01 * epochs(paper)
  # everything but the schedule, the periods and the plateau epoch is the paper's
  flat_paper, flat_cpu = dict(config_lib.flatten(paper)), dict(config_lib.flatten(cpu))
  changed = {p for p in flat_paper if flat_paper[p] != flat_cpu[p]}
  allowed = (set(common.schedule_fields(paper)) | set(common.PERIODS)
             | {"parted.plateau_epoch_steps"})
  assert changed <= allowed, changed - allowed
