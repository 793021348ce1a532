"""A new method through the public surface alone: a beta-VAE with a supervised label head."""
import json

import flax.linen as nn
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from disentangle import config as config_lib
from disentangle import methods
from disentangle.data.labels import batch_spec
from disentangle.methods import base
from disentangle.methods import optimizers
from disentangle.train import trainer
from tests import helpers


class SupervisedBetaVAE(base.VAEMethod):
  """-log p(x|z) + beta KL + alpha CE(head(mean), y): a label head on the posterior means."""

  @classmethod
  def batch_spec(cls, config):
    return batch_spec.BatchSpec(targets=("label",))

  def groups(self):
    head = nn.Dense(self.config.supbeta.num_classes)
    init = lambda k: head.init(k, jnp.zeros((1, self.latent_dim)))["params"]
    return dict(super().groups(), head=init)

  def make_optimizers(self):
    return dict(super().make_optimizers(), head=optimizers.optimizer("head", optax.adam(1e-2)))

  def latent_regularizer(self, params, outputs, rng, t):
    """beta KL + alpha CE: the shared ELBO (``base.VAEMethod.elbo``) supplies the rest."""
    c, y = self.config.supbeta, outputs.batch["targets"][:, 0]
    logits = nn.Dense(c.num_classes).apply({"params": params["head"]}, outputs.mean)
    ce = jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, y))
    return c.beta * jnp.sum(outputs.kl) + c.alpha * ce, dict(cross_entropy=ce)


methods.register("supbeta", SupervisedBetaVAE, "supbeta",
                 lambda: ml_collections.ConfigDict(dict(beta=4.0, alpha=10.0, num_classes=4)),
                 {"supbeta.beta": config_lib.NONNEG, "supbeta.alpha": config_lib.NONNEG})


class LabelledImages(helpers.TinyImages):  # a tiny in-memory set with one named target
  target_names, target_sizes = ("label",), {"label": 4}

  def targets_of(self, indices, names):
    return self.labels[np.asarray(indices)][:, None].astype(np.int32)


@pytest.mark.slow
def test_a_new_method_trains_through_the_trainer(tmp_path):
  config = helpers.tiny_config("supbeta", num_steps=30, log_every=5, batch_size=16)
  state = trainer.train(config, tmp_path, dataset=LabelledImages())
  lines = [json.loads(l) for l in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert lines[-1]["cross_entropy"] < 0.5 * lines[0]["cross_entropy"]
  assert {"loss", "reconstruction", "kl", "kl_per_dim"} <= set(lines[-1])  # the ELBO's metrics
  assert sorted(state.params) == sorted(state.opt_state) == ["head", "vae"] and state.step == 30
