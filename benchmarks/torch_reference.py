"""PyTorch eager (or ``torch.compile``) references of train steps, for speed only.

  python -m benchmarks.torch_reference --dataset=dsprites|mnist --steps=N [--compile]
  python -m benchmarks.torch_reference --method=partedvae --dataset=mnist --steps=N

PartedVAE (`build_parted`, `parted_step`): the authors' MNIST model and loss (``sinahmr/parted-vae``
``partedvae/models.py``, ``training.py``: supervised update on a labelled batch of 64, then Eq. 6
with the sampled-c u KL, BC over pairs k > l, capacities |C - KL|), written anew; below, the
CascadeVAE step.

torch is an optional, benchmark-only extra (``pip install torch``); the library never imports it.
The model is the one of :mod:`disentangle.nn.networks` (CascadeVAE supplement Tables 1-2): 64x64
(dSprites) encoder 4x4 stride-2 convs 32, 32, 64, 64 (ReLU), dense 256 (ReLU), dense 2m; decoder
dense 256, dense 1024 (ReLU), 4x4x64, transposed convs 64, 32, 32 (ReLU) and one to 1 channel
(Bernoulli logits); 32x32 (MNIST): convs 32, 32, 64 and transposed convs 32, 32, 1. Padding 1 with
kernel 4 and stride 2 is TF/Flax SAME for even sizes. Conv kernels variance-scaling (He, truncated
normal), dense Glorot-uniform, zero biases. sigma = softplus(raw) (the authors' code).

One step, with the discrete branch on (t > t_d, the expensive case):
encode; sample eps once, z = mu + sigma * eps; without gradient, decode z with every one-hot e_k
(one batched decoder call on n * S rows) to get unary[i, k] = log p(x_i | z_i, e_k); assign d by
``scipy.optimize.linear_sum_assignment`` on the replicated-slot matrix (n rows, S * n slots, slot
m of class k costs -unary[i, k] + lam * m: the min-cost flow of the authors' code); decode z (same
eps) with one_hot(d) with gradient; loss = Bernoulli cross-entropy summed over pixels, mean over
the batch, + sum_j beta_j KL_j (KL per dimension averaged over the batch; optional L2 on kernels);
backward; Adam.

Prints ONE JSON line: median / p10 / p90 ms per step after the warm-up, the median ms of the host
assignment alone, the threads (``torch.set_num_threads`` = the cores of this process) and the
machine's load average. Batches are synthetic (uniform random images in [0, 1]).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import time
from typing import Any

import numpy as np
import scipy.optimize
import torch
from torch import nn
import torch.nn.functional as F

DATASETS = {  # image size, m, S (experiments/configs/{dsprites,mnist}_cascade.py defaults)
    "dsprites": dict(image_size=64, latent_dim=6, num_discrete=3),
    "mnist": dict(image_size=32, latent_dim=10, num_discrete=10),
}
_ENCODER_WIDTHS = {64: (32, 32, 64, 64), 32: (32, 32, 64)}
_DECODER_WIDTHS = {64: (64, 32, 32), 32: (32, 32)}
_HIDDEN, _BOTTLENECK = 256, (64, 4, 4)


def _conv_init(module: nn.Module) -> None:
  """TF ``variance_scaling(2.0, 'fan_in', 'truncated_normal')``, zero bias."""
  weight = module.weight
  # Conv2d weight [out, in, kh, kw]; ConvTranspose2d [in, out, kh, kw]: fan_in is in * kh * kw
  # for the convolution, and for the transposed one (as TF/Flax count it on its [kh, kw, in, out]).
  fan_in = weight.shape[1 if isinstance(module, nn.Conv2d) else 0] * weight[0, 0].numel()
  std = math.sqrt(2.0 / fan_in) / 0.87962566103423978  # std of N(0, 1) truncated to [-2, 2]
  nn.init.trunc_normal_(weight, 0.0, std, -2 * std, 2 * std)
  nn.init.zeros_(module.bias)


def _dense(cin: int, cout: int) -> nn.Linear:
  layer = nn.Linear(cin, cout)
  nn.init.xavier_uniform_(layer.weight)
  nn.init.zeros_(layer.bias)
  return layer


class Encoder(nn.Module):
  """x [N, 1, H, W] -> (mu, sigma) [N, m]."""

  def __init__(self, image_size: int, latent_dim: int, channels: int = 1):
    super().__init__()
    convs, cin = [], channels
    for width in _ENCODER_WIDTHS[image_size]:
      convs += [nn.Conv2d(cin, width, 4, stride=2, padding=1), nn.ReLU()]
      _conv_init(convs[-2])
      cin = width
    self.convs = nn.Sequential(*convs)
    self.fc = _dense(cin * (image_size // 2**len(_ENCODER_WIDTHS[image_size]))**2, _HIDDEN)
    self.head = _dense(_HIDDEN, 2 * latent_dim)

  def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    h = F.relu(self.fc(self.convs(x).flatten(1)))
    mu, raw = self.head(h).chunk(2, dim=-1)
    return mu, F.softplus(raw)


class Decoder(nn.Module):
  """concat(z, one-hot d) [N, m + S] -> Bernoulli logits [N, 1, H, W]."""

  def __init__(self, image_size: int, latent_dim: int, num_discrete: int, channels: int = 1):
    super().__init__()
    self.fc0 = _dense(latent_dim + num_discrete, _HIDDEN)
    self.fc1 = _dense(_HIDDEN, math.prod(_BOTTLENECK))
    layers, cin = [], _BOTTLENECK[0]
    for width in _DECODER_WIDTHS[image_size] + (channels,):
      layers += [nn.ConvTranspose2d(cin, width, 4, stride=2, padding=1), nn.ReLU()]
      _conv_init(layers[-2])
      cin = width
    self.deconvs = nn.Sequential(*layers[:-1])  # no ReLU on the logits

  def forward(self, latent: torch.Tensor) -> torch.Tensor:
    h = F.relu(self.fc1(F.relu(self.fc0(latent))))
    return self.deconvs(h.view(-1, *_BOTTLENECK))


class CascadeVAE(nn.Module):
  """Encoder, decoder and the loss settings of one CascadeVAE model."""

  def __init__(self, image_size: int, latent_dim: int, num_discrete: int, betas: torch.Tensor,
               lam: float, weight_decay: float):
    super().__init__()
    self.encoder = Encoder(image_size, latent_dim)
    self.decoder = Decoder(image_size, latent_dim, num_discrete)
    self.num_discrete, self.lam, self.weight_decay = num_discrete, lam, weight_decay
    self.register_buffer("betas", betas)
    self.register_buffer("eye", torch.eye(num_discrete))


def build(dataset: str = "dsprites", latent_dim: int | None = None,
          num_discrete: int | None = None, beta_high: float = 10.0, beta_low: float = 1.0,
          num_relieved: int = 1, lam: float = 0.001, learning_rate: float = 3e-4,
          weight_decay: float = 0.0, compile_model: bool = False,
          seed: int = 0) -> tuple[CascadeVAE, torch.optim.Optimizer]:
  """The model and its Adam optimiser, from config-like settings.

  Args:
    dataset: 'dsprites' (64x64, default m=6, S=3) or 'mnist' (32x32, default m=10, S=10).
    latent_dim: m, continuous dimensions (default per dataset).
    num_discrete: S, classes of the discrete code (default per dataset).
    beta_high: beta of the dimensions not yet relieved.
    beta_low: beta of the relieved dimensions (the first `num_relieved`, in index order).
    num_relieved: dimensions already relieved (the authors' code relieves one at step 0).
    lam: lambda', per-unordered-pair penalty of the assignment.
    learning_rate: Adam learning rate.
    weight_decay: coefficient of sum ||W||^2 / 2 over conv and dense kernels (authors: 4e-5).
    compile_model: wrap the encoder and decoder in ``torch.compile``.
    seed: torch seed of the initialisation.

  Returns:
    (model, optimizer).
  """
  settings = dict(DATASETS[dataset])
  m = latent_dim or settings["latent_dim"]
  s = num_discrete or settings["num_discrete"]
  torch.manual_seed(seed)
  betas = torch.full((m,), beta_high)
  betas[:num_relieved] = beta_low
  model = CascadeVAE(settings["image_size"], m, s, betas, lam, weight_decay)
  optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
  if compile_model:
    model.encoder = torch.compile(model.encoder, dynamic=False)
    model.decoder = torch.compile(model.decoder, dynamic=False)
  return model, optimizer


def assign(unary: np.ndarray, lam: float) -> np.ndarray:
  """argmin over d of sum_i -unary[i, d_i] + lam * #(same-class pairs), exactly.

  Linear assignment of n rows to S * n slots; slot m of class k costs -unary[i, k] + lam * m.
  """
  n, s = unary.shape
  cost = (-unary.astype(np.float64)[:, :, None] + lam * np.arange(n)[None, None, :]).reshape(n, -1)
  rows, cols = scipy.optimize.linear_sum_assignment(cost)
  labels = np.empty(n, np.int64)
  labels[rows] = cols // n
  return labels


def _bernoulli_log_likelihood(logits: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
  """log p(x | logits) summed over pixels: [..., C, H, W] -> [...]."""
  return -F.binary_cross_entropy_with_logits(logits, x, reduction="none").flatten(-3).sum(-1)


def train_step(model: CascadeVAE, optimizer: torch.optim.Optimizer, x: torch.Tensor,
               timings: dict[str, list[float]] | None = None) -> dict[str, torch.Tensor]:
  """One CascadeVAE step with the discrete branch on; returns the loss terms (detached).

  Args:
    model: from `build`.
    optimizer: from `build`.
    x: images [n, 1, H, W] in [0, 1].
    timings: if given, the host assignment's seconds are appended to ``timings['assign']``.
  """
  n, s = x.shape[0], model.num_discrete
  mu, sigma = model.encoder(x)
  z = mu + sigma * torch.randn_like(mu)  # eps sampled once, used for the unary and the update
  with torch.no_grad():
    codes = torch.cat([z.detach().unsqueeze(1).expand(n, s, -1),
                       model.eye.unsqueeze(0).expand(n, s, s)], dim=-1).reshape(n * s, -1)
    logits = model.decoder(codes).view(n, s, *x.shape[1:])
    unary = _bernoulli_log_likelihood(logits, x.unsqueeze(1).expand_as(logits))  # [n, S]
  t0 = time.perf_counter()
  d = torch.from_numpy(assign(unary.numpy(), model.lam))
  if timings is not None:
    timings.setdefault("assign", []).append(time.perf_counter() - t0)
  logits = model.decoder(torch.cat([z, model.eye[d]], dim=-1))
  rec = -_bernoulli_log_likelihood(logits, x).mean()
  kl = 0.5 * (mu.square() + sigma.square() - 1.0 - 2.0 * torch.log(sigma)).mean(0)  # [m]
  loss = rec + (model.betas * kl).sum()
  if model.weight_decay:
    kernels = [p for name, p in model.named_parameters() if name.endswith("weight")]
    loss = loss + 0.5 * model.weight_decay * sum(p.square().sum() for p in kernels)
  optimizer.zero_grad(set_to_none=True)
  loss.backward()
  optimizer.step()
  return {"loss": loss.detach(), "rec": rec.detach(), "kl": kl.detach()}


# ---------------------------------------------------------------------------------------------
# PartedVAE (Hajimiri et al.; the authors' sinahmr/parted-vae architecture and loss), MNIST 32x32.
# ---------------------------------------------------------------------------------------------
PARTED_DATASETS = {"mnist": dict(image_size=32, latent_dim=6, sizes=(10,), u_dim=10)}
_PARTED_EPS = 1e-12


class PartedVAE(nn.Module):
  """The authors' model at 32x32 (Tables 3-4, ``partedvae/models.py``).

  Encoder: 4x4 stride-2 convs 32, 64, 64 (ReLU, ReLU, LeakyReLU(0.1)), dense 256 LeakyReLU(0.1);
  z head: two dense layers d_z; c head: dense sum L_i; attention a_i = sigmoid(s (W_i c~_i +
  b_i)) in (0, 1)^256 per variable; u_i head: two dense layers d_u on h * a_i (the authors' masked
  layers are these blocks). Decoder on concat(z, u): dense 256 ReLU, dense 1024 ReLU, 4x4x64,
  transposed convs 32, 32 (ReLU) and 1 (sigmoid). Prior psi: means and raw log-variances
  [sum L_i, d_u] ~ N(0, 1), log sigma^2 = 2 tanh(raw) - 1.
  """

  def __init__(self, image_size: int, latent_dim: int, sizes: tuple, u_dim: int,
               hidden: int = _HIDDEN):
    super().__init__()
    self.latent_dim, self.sizes, self.u_dim = latent_dim, tuple(sizes), u_dim
    convs, cin = [], 1
    for width, act in zip((32, 64, 64), (nn.ReLU(), nn.ReLU(), nn.LeakyReLU(0.1))):
      convs += [nn.Conv2d(cin, width, 4, stride=2, padding=1), act]
      cin = width
    self.convs = nn.Sequential(*convs)
    self.fc = nn.Linear(cin * (image_size // 8) ** 2, hidden)
    self.z_mean, self.z_logvar = nn.Linear(hidden, latent_dim), nn.Linear(hidden, latent_dim)
    self.c_head = nn.Linear(hidden, sum(self.sizes))
    self.attention = nn.ModuleList([nn.Linear(k, hidden) for k in self.sizes])
    self.u_mean = nn.ModuleList([nn.Linear(hidden, u_dim) for _ in self.sizes])
    self.u_logvar = nn.ModuleList([nn.Linear(hidden, u_dim) for _ in self.sizes])
    self.dec_fc = nn.Sequential(nn.Linear(latent_dim + len(self.sizes) * u_dim, hidden),
                                nn.ReLU(), nn.Linear(hidden, math.prod(_BOTTLENECK)), nn.ReLU())
    self.deconvs = nn.Sequential(
        nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1), nn.ReLU(),
        nn.ConvTranspose2d(32, 32, 4, stride=2, padding=1), nn.ReLU(),
        nn.ConvTranspose2d(32, 1, 4, stride=2, padding=1), nn.Sigmoid())
    self.prior_mean = nn.Parameter(torch.randn(sum(self.sizes), u_dim))
    self.prior_raw = nn.Parameter(torch.randn(sum(self.sizes), u_dim))

  def trunk_parameters(self):
    """What the supervised update trains: the convs, the dense layer and the c head."""
    return [*self.convs.parameters(), *self.fc.parameters(), *self.c_head.parameters()]

  def hidden(self, x: torch.Tensor) -> torch.Tensor:
    return F.leaky_relu(self.fc(self.convs(x).flatten(1)), 0.1)

  def log_q_c(self, h: torch.Tensor) -> list[torch.Tensor]:
    return [F.log_softmax(b, dim=-1) for b in self.c_head(h).split(self.sizes, dim=-1)]

  def prior_logvar(self) -> torch.Tensor:
    return 2.0 * torch.tanh(self.prior_raw) - 1.0

  def decode(self, latent: torch.Tensor) -> torch.Tensor:
    return self.deconvs(self.dec_fc(latent).view(-1, *_BOTTLENECK))


def build_parted(dataset: str = "mnist", *, latent_dim: int | None = None,
                 sizes: tuple | None = None, u_dim: int | None = None,
                 learning_rate: float = 1.5e-3, sup_learning_rate: float = 5e-4,
                 seed: int = 0, **loss_settings: Any) -> tuple[PartedVAE, dict]:
  """The model, its two Adams (``model``: every parameter; ``supervised``: trunk and c head) and
  the loss settings (gammas, delta, capacities, temperature, sharpness, p(c))."""
  settings = dict(PARTED_DATASETS[dataset])
  torch.manual_seed(seed)
  model = PartedVAE(settings["image_size"], latent_dim or settings["latent_dim"],
                    tuple(sizes or settings["sizes"]), u_dim or settings["u_dim"])
  loss = dict(gamma_z=15.0, gamma_u=15.0, gamma_h=30.0, gamma_c=15.0, gamma_bc=30.0,
              delta=0.15, z_capacity=(0.0, 7.0, 100_000), u_capacity=(0.0, 7.0, 100_000),
              temperature=0.67, sharpness=(1.0, 2e-4, 8.0), prior_c=None)
  loss.update(loss_settings)
  if loss["prior_c"] is None:
    loss["prior_c"] = [[1.0 / k] * k for k in model.sizes]
  model.prior_c = [torch.tensor(p) for p in loss.pop("prior_c")]
  model.loss_settings = loss
  model.t = 0
  optimizers = {"model": torch.optim.Adam(model.parameters(), lr=learning_rate),
                "supervised": torch.optim.Adam(model.trunk_parameters(), lr=sup_learning_rate)}
  return model, optimizers


def _capacity(t: int, spec) -> float:
  lo, hi, steps = spec
  return min(lo + (hi - lo) * t / float(steps), hi)


def _gaussian_kl(mu_q, logvar_q, mu_p, logvar_p) -> torch.Tensor:
  """KL(N(mu_q, e^logvar_q) || N(mu_p, e^logvar_p)) summed over the last axis."""
  return 0.5 * (logvar_p - logvar_q - 1.0 + (logvar_q.exp() + (mu_q - mu_p) ** 2)
                / logvar_p.exp()).sum(-1)


def _bhattacharyya(mu, logvar) -> torch.Tensor:
  """BC of every pair of diagonal Gaussians [L, d] -> [L, L] (App. A.1)."""
  var = logvar.exp()
  avg = 0.5 * (var[:, None] + var[None])
  diff = mu[:, None] - mu[None]
  db = 0.125 * (diff * diff / avg).sum(-1) + 0.5 * (
      avg.log().sum(-1) - 0.5 * (logvar.sum(-1)[:, None] + logvar.sum(-1)[None]))
  return torch.exp(-db)


def parted_step(model: PartedVAE, optimizers: dict, x: torch.Tensor,
                labelled_x: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
  """One PartedVAE iteration as the authors': the supervised update on the labelled batch
  (cross-entropy of q(c|x), trunk and c head), then Eq. 6 on the image batch (the u KL as their
  code: q(u_i|x) from the sampled c~_i against every component, weighted by q(c_i = k|x))."""
  s = model.loss_settings
  model.t += 1
  t = model.t
  out = {}
  if labelled_x is not None:
    logq = model.log_q_c(model.hidden(labelled_x))
    ce = -sum(lq.gather(1, labels[:, i:i + 1]).mean() for i, lq in enumerate(logq))
    optimizers["supervised"].zero_grad(set_to_none=True)
    ce.backward()
    optimizers["supervised"].step()
    out["cross_entropy"] = ce.detach()
  n = x.shape[0]
  h = model.hidden(x)
  logq = model.log_q_c(h)
  start, sharp = 0, min(s["sharpness"][0] + s["sharpness"][1] * t, s["sharpness"][2])
  z_mu, z_lv = model.z_mean(h), model.z_logvar(h)
  prior_mu, prior_lv = model.prior_mean, model.prior_logvar()
  us, kl_u, kl_c, ent, bc_pen = [], 0.0, 0.0, 0.0, 0.0
  for i, lq in enumerate(logq):
    size = model.sizes[i]
    gumbel = -torch.log(-torch.log(torch.rand_like(lq) + _PARTED_EPS) + _PARTED_EPS)
    c_tilde = F.softmax((lq + gumbel) / s["temperature"], dim=-1)
    a = torch.sigmoid(sharp * model.attention[i](c_tilde))
    u_mu, u_lv = model.u_mean[i](h * a), model.u_logvar[i](h * a)
    us.append(u_mu + torch.exp(0.5 * u_lv) * torch.randn_like(u_mu))
    mu_k, lv_k = prior_mu[start:start + size], prior_lv[start:start + size]
    kls = _gaussian_kl(u_mu[:, None], u_lv[:, None], mu_k[None], lv_k[None])  # [n, L]
    kl_u = kl_u + (lq.exp() * kls).sum(-1).mean()
    log_qhat = torch.logsumexp(lq, dim=0) - math.log(n)
    kl_c = kl_c + (log_qhat.exp() * (log_qhat - torch.log(model.prior_c[i]))).sum()
    ent = ent - (lq.exp() * lq).sum(-1).mean()
    bc = _bhattacharyya(mu_k, lv_k)
    pairs = torch.tril(torch.ones(size, size, dtype=torch.bool), diagonal=-1)
    bc_pen = bc_pen + torch.clamp_min(bc[pairs] - s["delta"], 0.0).sum()
    start += size
  z = z_mu + torch.exp(0.5 * z_lv) * torch.randn_like(z_mu)
  recon = model.decode(torch.cat([z] + us, dim=-1))
  rec = F.binary_cross_entropy(recon, x, reduction="none").flatten(1).sum(-1).mean()
  kl_z = (-0.5 * (1 + z_lv - z_mu ** 2 - z_lv.exp())).mean(0).sum()
  loss = (rec + s["gamma_z"] * torch.abs(_capacity(t, s["z_capacity"]) - kl_z)
          + s["gamma_u"] * torch.abs(_capacity(t, s["u_capacity"]) - kl_u)
          + s["gamma_c"] * kl_c + s["gamma_h"] * ent + s["gamma_bc"] * bc_pen)
  optimizers["model"].zero_grad(set_to_none=True)
  loss.backward()
  optimizers["model"].step()
  out.update(loss=loss.detach(), rec=rec.detach(), kl_z=kl_z.detach())
  return out


def num_cores() -> int:
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:
    return os.cpu_count() or 1


def benchmark(dataset: str, steps: int, warmup: int, compile_model: bool,
              batch_size: int = 64, threads: int | None = None,
              **settings: Any) -> dict[str, Any]:
  """Times `train_step`; returns the JSON fields."""
  threads = threads or num_cores()
  torch.set_num_threads(threads)
  model, optimizer = build(dataset, compile_model=compile_model, **settings)
  size = DATASETS[dataset]["image_size"]
  gen = torch.Generator().manual_seed(1)
  batches = [torch.rand(batch_size, 1, size, size, generator=gen) for _ in range(4)]
  t0 = time.perf_counter()
  for i in range(warmup):
    train_step(model, optimizer, batches[i % len(batches)])
  warmup_s = time.perf_counter() - t0
  times, timings = [], {}
  for i in range(steps):
    t0 = time.perf_counter()
    train_step(model, optimizer, batches[i % len(batches)], timings)
    times.append(time.perf_counter() - t0)
  ms = np.asarray(times) * 1e3
  return {
      "framework": f"torch {torch.__version__}", "mode": "compile" if compile_model else "eager",
      "dataset": dataset, "image_size": size, "latent_dim": model.betas.numel(),
      "num_discrete": model.num_discrete, "batch_size": batch_size, "threads": threads,
      "steps": steps, "warmup": warmup, "warmup_s": round(warmup_s, 2),
      "median_ms": round(float(np.median(ms)), 2),
      "p10_ms": round(float(np.percentile(ms, 10)), 2),
      "p90_ms": round(float(np.percentile(ms, 90)), 2),
      "assign_median_ms": round(float(np.median(timings["assign"])) * 1e3, 3),
      "load_average": [round(v, 2) for v in os.getloadavg()],
  }


def benchmark_parted(dataset: str, steps: int, warmup: int, batch_size: int = 64,
                     labelled_batch_size: int = 64, threads: int | None = None) -> dict[str, Any]:
  """Times `parted_step` (with the labelled update) on synthetic batches; the JSON fields."""
  threads = threads or num_cores()
  torch.set_num_threads(threads)
  model, optimizers = build_parted(dataset)
  size = PARTED_DATASETS[dataset]["image_size"]
  gen = torch.Generator().manual_seed(1)
  x = [torch.rand(batch_size, 1, size, size, generator=gen) for _ in range(4)]
  lx = [torch.rand(labelled_batch_size, 1, size, size, generator=gen) for _ in range(4)]
  ly = [torch.stack([torch.randint(0, k, (labelled_batch_size,), generator=gen)
                     for k in model.sizes], 1) for _ in range(4)]
  for i in range(warmup):
    parted_step(model, optimizers, x[i % 4], lx[i % 4], ly[i % 4])
  times = []
  for i in range(steps):
    t0 = time.perf_counter()
    parted_step(model, optimizers, x[i % 4], lx[i % 4], ly[i % 4])
    times.append(time.perf_counter() - t0)
  ms = np.asarray(times) * 1e3
  return {"framework": f"torch {torch.__version__}", "mode": "eager", "method": "partedvae",
          "dataset": dataset, "batch_size": batch_size,
          "labelled_batch_size": labelled_batch_size, "threads": threads, "steps": steps,
          "median_ms": round(float(np.median(ms)), 2),
          "p10_ms": round(float(np.percentile(ms, 10)), 2),
          "p90_ms": round(float(np.percentile(ms, 90)), 2),
          "load_average": [round(v, 2) for v in os.getloadavg()]}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--method", choices=("cascadevae", "partedvae"), default="cascadevae")
  parser.add_argument("--dataset", choices=sorted(DATASETS), default="dsprites")
  parser.add_argument("--steps", type=int, default=30, help="timed steps after the warm-up")
  parser.add_argument("--warmup", type=int, default=5, help="untimed steps (compilation)")
  parser.add_argument("--batch_size", type=int, default=64)
  parser.add_argument("--compile", action="store_true", help="torch.compile encoder and decoder")
  parser.add_argument("--lam", type=float, default=0.001)
  parser.add_argument("--weight_decay", type=float, default=0.0)
  parser.add_argument("--threads", type=int, default=None, help="default: the cores available")
  args = parser.parse_args()
  if args.method == "partedvae":
    print(json.dumps(benchmark_parted(args.dataset, args.steps, args.warmup, args.batch_size,
                                      threads=args.threads)), flush=True)
    return
  print(json.dumps(benchmark(args.dataset, args.steps, args.warmup, args.compile,
                             batch_size=args.batch_size, threads=args.threads, lam=args.lam,
                             weight_decay=args.weight_decay)), flush=True)


if __name__ == "__main__":
  main()
