"""The PyTorch PartedVAE reference of the speed comparison computes the same terms as the JAX
method's shared pieces (`disentangle.mixture`), and its supervised update touches only the trunk
and the c head (as the authors' warm-up optimiser). torch is an optional extra: skipped without."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from benchmarks import torch_reference as ref  # noqa: E402  # pylint: disable=g-import-not-at-top
from disentangle import mixture  # noqa: E402  # pylint: disable=g-import-not-at-top


def test_bc_and_gaussian_kl_equal_the_jax_pieces():
  rng = np.random.default_rng(0)
  mu, lv = rng.standard_normal((4, 3)), rng.uniform(-3, 1, (4, 3))
  bc = ref._bhattacharyya(torch.tensor(mu), torch.tensor(lv)).numpy()
  want = np.asarray(mixture.bhattacharyya_coefficient(mu[:, None], lv[:, None], mu[None],
                                                       lv[None]))
  np.testing.assert_allclose(bc, want, rtol=1e-5)
  penalty = sum(max(bc[k, l] - 0.1, 0) for k in range(4) for l in range(k))
  np.testing.assert_allclose(penalty, float(mixture.bhattacharyya_penalty(mu, lv, 0.1)),
                             rtol=1e-5)
  mq, lq = rng.standard_normal((5, 1, 3)), rng.standard_normal((5, 1, 3))
  kl = ref._gaussian_kl(*(torch.tensor(a) for a in (mq, lq, mu[None], lv[None]))).numpy()
  want = np.asarray(mixture.gaussian_kl(mq, lq, mu[None], lv[None])).sum(-1)
  np.testing.assert_allclose(kl, want, rtol=1e-5)


def test_supervised_update_moves_only_trunk_and_c_head():
  model, optimizers = ref.build_parted("mnist", sizes=(3, 2), u_dim=2)
  before = {n: p.detach().clone() for n, p in model.named_parameters()}
  x = torch.rand(8, 1, 32, 32)
  labels = torch.stack([torch.randint(0, 3, (8,)), torch.randint(0, 2, (8,))], 1)
  logq = model.log_q_c(model.hidden(x))
  ce = -sum(lq.gather(1, labels[:, i:i + 1]).mean() for i, lq in enumerate(logq))
  optimizers["supervised"].zero_grad()
  ce.backward()
  optimizers["supervised"].step()
  trunk = {id(p) for p in model.trunk_parameters()}
  for name, p in model.named_parameters():
    changed = not torch.equal(p.detach(), before[name])
    assert changed == (id(p) in trunk), name
  out = ref.parted_step(model, optimizers, torch.rand(8, 1, 32, 32), x, labels)
  assert all(np.isfinite(float(v)) for v in out.values())
  assert not torch.equal(model.prior_mean.detach(), before["prior_mean"])  # psi trains
