"""PartedVAE: heads and prior, the objective's terms, the two-update step, plateau, evaluation."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disentangle import methods
from disentangle import mixture
from disentangle.methods import partedvae_nets as nets
from disentangle.train import input_pipeline
from tests import helpers


def _method(config, shape=(32, 32, 1)):
  methods.validate(config)
  return methods.build(config, shape)


def _batch(data, rows=np.arange(8), labelled=np.arange(8, 16), labels=None):
  y = data.labels[labelled, None] if labels is None else labels
  return {"image": jnp.asarray(data.get_images(rows)),
          "labelled_image": jnp.asarray(data.get_images(labelled)),
          "labelled_targets": jnp.asarray(y, jnp.int32)}


# -- heads and prior ---------------------------------------------------------------------------
def test_prior_logvar_stays_in_its_bounds():
  lv = np.asarray(nets.prior_logvar(jnp.array([-1e3, -1.0, 0.0, 1.0, 1e3])))
  assert np.all(lv >= -3.0) and np.all(lv <= 1.0)
  np.testing.assert_allclose(lv[[0, 2, 4]], [-3.0, -1.0, 1.0], atol=1e-6)
  np.testing.assert_allclose(lv[3], 2 * np.tanh(1.0) - 1, rtol=1e-6)


def test_sharpness_schedule_and_evaluation_value():
  kw = dict(start=1.0, step=2e-4, maximum=8.0)
  np.testing.assert_allclose(float(nets.sharpness(1, **kw)), 1.0002, rtol=1e-7)
  assert float(nets.sharpness(35_000, **kw)) == 8.0
  assert float(nets.sharpness(1_000_000, **kw)) == 8.0
  assert nets.eval_sharpness(**kw) == 8.0
  assert nets.eval_sharpness(start=1.0, step=0.0, maximum=1.0) == 1.0  # the paper's sigmoid


@pytest.mark.slow
def test_u_i_depends_on_its_own_code_only():
  sizes, u_dim, hidden = (4, 3, 2), 2, 16
  heads = nets.init_heads(jax.random.PRNGKey(0), sizes, hidden, u_dim)
  h = jax.random.normal(jax.random.PRNGKey(1), (hidden,))
  codes = jax.nn.softmax(jax.random.normal(jax.random.PRNGKey(2), (sum(sizes),)))

  def u_of(flat):
    parts = jnp.split(flat, np.cumsum(sizes)[:-1].tolist())
    return nets.all_u_posteriors(heads, h, parts, 1.5)[0]  # [K d_u]

  jac = np.asarray(jax.jacobian(u_of)(codes))  # [K d_u, sum L]
  starts = np.concatenate([[0], np.cumsum(sizes)])
  for i in range(3):
    for j in range(3):
      block = jac[i * u_dim:(i + 1) * u_dim, starts[j]:starts[j + 1]]
      if i == j:
        assert np.abs(block).max() > 1e-4
      else:
        assert np.all(block == 0.0)


# -- the objective ------------------------------------------------------------------------------
def test_capacities_at_known_steps():
  m = _method(helpers.parted_config(**{"parted.z_capacity_max": 7.0, "parted.z_capacity_steps": 100_000,
                             "parted.u_capacity_min": 1.0, "parted.u_capacity_max": 5.0,
                             "parted.u_capacity_steps": 1000}))
  for t, cz, cu in [(0, 0.0, 1.0), (500, 0.035, 3.0), (56_280, 3.9396, 5.0), (10**6, 7.0, 5.0)]:
    got = m.capacities(t)
    np.testing.assert_allclose([float(got[0]), float(got[1])], [cz, cu], rtol=1e-5)


@pytest.mark.slow
def test_loss_is_the_sum_of_its_logged_terms_and_matches_numpy():
  config = helpers.parted_config(**{"parted.discrete_sizes": (4, 3, 2), "parted.num_labelled": 0,
                          "parted.bc_threshold": 0.0, "parted.gamma_bc": 3.0,
                          "parted.prior_c": ((.1, .2, .3, .4), (.5, .25, .25), (.3, .7))})
  m = _method(config)
  params = m.init(jax.random.PRNGKey(3)).params
  data = helpers.TinyDigits()
  batch = {"image": jnp.asarray(data.get_images(np.arange(8)))}
  loss, aux = jax.jit(m.loss, static_argnums=3)(params, batch, jax.random.PRNGKey(4), 10)
  names = ("reconstruction", "z_term", "u_term", "h_term", "c_term", "bc_term", "regularizer")
  np.testing.assert_allclose(float(loss), sum(float(aux[n]) for n in names), rtol=1e-6)
  # per-variable KL(q_hat || p) and entropies against float64 numpy from the logits
  _, _, blocks, _ = jax.jit(m.encode_all)(params["vae"], batch["image"])
  for i, (block, prior) in enumerate(zip(blocks, config.parted.prior_c)):
    q = np.exp(np.asarray(block, np.float64))
    q /= q.sum(-1, keepdims=True)
    qhat, prior = q.mean(0), np.asarray(prior)
    np.testing.assert_allclose(float(aux["kl_qc_per_var"][i]), np.sum(qhat * np.log(qhat / prior)),
                               rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(float(aux["entropy_per_var"][i]),
                               -np.mean(np.sum(q * np.log(q), -1)), rtol=1e-4)
    np.testing.assert_allclose(np.asarray(aux[f"qc_hat_{i}"]), qhat, rtol=1e-4)
  # bc: pairs k < l inside each variable, delta = 0, counted by hand
  bc = 0.0
  for mean, logvar in m.prior_components(params["vae"]):
    for k in range(mean.shape[0]):
      for l in range(k + 1, mean.shape[0]):
        bc += float(mixture.bhattacharyya_coefficient(mean[k], logvar[k], mean[l], logvar[l]))
  np.testing.assert_allclose(float(aux["bc_term"]), 3.0 * bc, rtol=1e-5)


@pytest.mark.slow
def test_expected_and_sampled_u_kl_agree_for_one_hot_posteriors():
  sizes = (4, 3, 2)
  ms = {k: _method(helpers.parted_config(**{"parted.discrete_sizes": sizes, "parted.num_labelled": 0,
                                  "parted.u_kl": k})) for k in ("expected", "sampled")}
  params = ms["expected"].init(jax.random.PRNGKey(0)).params["vae"]
  h = jax.random.normal(jax.random.PRNGKey(1), (5, 256))
  classes = np.array([[0, 1, 1], [3, 2, 0], [1, 0, 1], [2, 2, 0], [0, 1, 0]])
  blocks = [jnp.asarray(1e4 * (np.eye(k)[classes[:, i]] - 1.0)) for i, k in enumerate(sizes)]
  codes = [jax.nn.one_hot(classes[:, i], k) for i, k in enumerate(sizes)]
  u_parts = [nets.u_posterior(params["heads"], i, h, c, 2.0) for i, c in enumerate(codes)]
  kls = {k: np.asarray(m.u_kls(params, h, blocks, u_parts, 2.0)) for k, m in ms.items()}
  np.testing.assert_allclose(kls["expected"], kls["sampled"], rtol=1e-5)
  assert np.all(kls["expected"] > 0)


# -- the step -----------------------------------------------------------------------------------
def _changed(a, b):
  return {jax.tree_util.keystr(p): x.tobytes() != y.tobytes() for (p, x), y in zip(
      jax.tree_util.tree_leaves_with_path(jax.tree_util.tree_map(np.asarray, a)),
      jax.tree_util.tree_leaves(jax.tree_util.tree_map(np.asarray, b)))}


@pytest.mark.slow
def test_supervised_update_changes_only_trunk_and_c_head_and_the_step_lowers_the_loss():
  m = _method(helpers.parted_config(**{"parted.unsupervised": False}))
  state = m.init(jax.random.PRNGKey(0))
  new, metrics = jax.jit(m.train_step)(state, _batch(helpers.TinyDigits()))
  changed = _changed(state.params, new.params)
  trained = ("conv0", "conv1", "conv2", "'fc'", "'extra'")
  for path, moved in changed.items():
    expect = path.startswith("['vae']['encoder']") and any(t in path for t in trained)
    assert moved == expect, path
  assert set(m.optimizers) == {"supervised"} and float(metrics["loss"]) > 0
  # both updates: the supervised one touches only opt_state['supervised'] ...
  m2 = _method(helpers.parted_config())
  s2 = m2.init(jax.random.PRNGKey(0))
  sup_grads = jax.jit(jax.grad(lambda p: m2.supervised_loss(p, _batch(helpers.TinyDigits()))[0]))(
      s2.params)
  after_sup = m2.apply_update(s2, "supervised", sup_grads["vae"])
  assert not any(_changed(s2.opt_state["vae"], after_sup.opt_state["vae"]).values())
  assert any(_changed(s2.opt_state["supervised"], after_sup.opt_state["supervised"]).values())
  # ... and the unsupervised one changes psi, the heads and the decoder
  batch = _batch(helpers.TinyDigits())
  step = helpers.step_traced_once(m2)
  full, _ = step(s2, batch)
  moved = _changed(after_sup.params, full.params)
  for part in ("['prior']", "['decoder']", "['heads']", "['encoder']['head']"):
    assert any(v for k, v in moved.items() if part in k), part
  # the step, traced once, lowers the loss in 4 steps
  rng = jax.random.PRNGKey(5)
  before = float(m2.loss(s2.params, batch, rng, 1)[0])
  for _ in range(3):
    full, _ = step(full, batch)
  assert float(m2.loss(full.params, batch, rng, 1)[0]) < before
  assert int(full.step) == 4


@pytest.mark.slow
def test_unknown_labels_contribute_nothing():
  m = _method(helpers.parted_config(**{"parted.discrete_sizes": (4, 3), "parted.targets": ("a", "b")}))
  params = m.init(jax.random.PRNGKey(0)).params
  data = helpers.TinyDigits()
  y = np.stack([data.labels[8:16], np.full(8, -1)], axis=1)
  with_unknown, aux = m.supervised_loss(params, _batch(data, labels=y))
  _, _, blocks, _ = m.encode_all(params["vae"], jnp.asarray(data.get_images(np.arange(8, 16))))
  log_q = np.asarray(jax.nn.log_softmax(blocks[0]))
  np.testing.assert_allclose(float(with_unknown), -np.mean(log_q[np.arange(8), y[:, 0]]),
                             rtol=1e-6)
  acc = np.mean(np.argmax(log_q, -1) == y[:, 0])
  np.testing.assert_allclose(float(aux["sup_accuracy"]), acc)
  unlabelled = _batch(data, labels=np.full((8, 2), -1))
  g = jax.jit(jax.grad(lambda p: m.supervised_loss(p, unlabelled)[0]))(params)
  assert all(float(jnp.abs(x).max()) == 0.0 for x in jax.tree_util.tree_leaves(g))


def _torch_reduce_on_plateau(values, *, factor, patience, rtol, cooldown):
  """PyTorch's ReduceLROnPlateau (mode 'min', threshold_mode 'rel') written out: the scales."""
  best, bad, cool, scale, out = np.inf, 0, 0, 1.0, []
  for v in values:
    if v < best * (1 - rtol):
      best, bad = v, 0
    else:
      bad += 1
    if cool > 0:
      cool, bad = cool - 1, 0
    if bad > patience:
      scale, cool, bad = scale * factor, cooldown, 0
    out.append(scale)
  return out


@pytest.mark.slow
def test_plateau_follows_pytorch_reduce_lr_on_plateau_per_epoch():
  m = _method(helpers.parted_config(**{"parted.plateau_epoch_steps": 2, "parted.plateau_patience": 1,
                             "parted.plateau_cooldown": 2, "parted.plateau_rtol": 1e-2}))
  tx = m.optimizers["vae"].transform
  params = {"w": jnp.ones(3)}
  state = tx.init(params)
  rng = np.random.default_rng(0)
  epochs = [10, 9, 9.5, 9.3, 9.2, 8, 8.5, 8.4, 8.3, 8.2, 8.1, 7, 7.5, 7.4]
  scales = []
  for v in epochs:  # two steps per epoch whose mean is v
    d = rng.normal()
    for value in (v + d, v - d):
      _, state = tx.update({"w": jnp.ones(3)}, state, params, value=jnp.float32(value))
    scales.append(float(state[1].scale))
  expected = _torch_reduce_on_plateau(epochs, factor=0.5, patience=1, rtol=1e-2, cooldown=2)
  np.testing.assert_allclose(scales, expected, rtol=1e-6)
  assert min(expected) < 1.0


# -- data and evaluation ------------------------------------------------------------------------
def test_labelled_stream_of_the_spec():
  config = helpers.parted_config(**{"parted.num_labelled": 32, "parted.labelled_batch_size": 8})
  spec = methods.spec("partedvae").cls.batch_spec(config)
  data = helpers.TinyDigits()
  src = input_pipeline.make_source(data, spec, global_batch=8, seed=3)
  again = input_pipeline.make_source(data, spec, global_batch=8, seed=3)
  for s in (0, 1, 7):
    rows = src.labelled_indices(s)
    assert len(set(rows.tolist())) == 8 and set(rows.tolist()) <= set(range(32))  # 'first'
    np.testing.assert_array_equal(rows, again.labelled_indices(s))
    b = src.local_batch(s)
    np.testing.assert_array_equal(b["labelled_targets"][:, 0], data.labels[rows])
  assert not np.array_equal(src.labelled_indices(0), src.labelled_indices(1))
  unsup = helpers.parted_config(**{"parted.num_labelled": 0})
  assert methods.spec("partedvae").cls.batch_spec(unsup).images_only


@pytest.mark.slow
def test_represent_decode_reconstruct_and_generate():
  m = _method(helpers.parted_config(**{"parted.discrete_sizes": (4, 3), "parted.targets": ("a", "b")}))
  params = m.init(jax.random.PRNGKey(0)).params
  x = jnp.asarray(helpers.TinyDigits().get_images(np.arange(6)))
  rep = m.represent(params, x)
  assert rep["mean"].shape == (6, 3 + 2 * 2) and rep["logvar"].shape == (6, 7)
  mean_z, logvar_z, blocks, _ = m.encode_all(params["vae"], x)
  np.testing.assert_allclose(rep["mean"][:, :3], mean_z, rtol=1e-6)
  np.testing.assert_array_equal(rep["discrete_codes"],
                                np.stack([np.argmax(b, -1) for b in blocks], 1))
  np.testing.assert_array_equal(rep["discrete"], rep["discrete_codes"][:, 0])
  # decode: d >= 0 puts the prior mean mu_{1,d} in place of u_1; -1 leaves z as it is
  d = jnp.array([2, -1, 0, 3, -1, 1])
  latent = np.asarray(m.prior_mode_latent(params["vae"], rep["mean"], d))
  means = np.asarray(m.prior_components(params["vae"])[0][0])
  for i, di in enumerate(np.asarray(d)):
    want = np.asarray(rep["mean"][i]).copy()
    if di >= 0:
      want[3:5] = means[di]
    np.testing.assert_array_equal(latent[i], want)
  np.testing.assert_allclose(m.reconstruct(params, x), m.decode(params, rep["mean"]), rtol=1e-5)
  assert m.generate(params, jax.random.PRNGKey(1), 5).shape == (5, 32, 32, 1)
