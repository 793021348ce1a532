"""Pieces shared by the experiment configs (the settings of CascadeVAE supplement B)."""
from disentangle import config as config_lib
from disentangle import methods

NEVER = 2**31 - 1  # a t_d no run reaches: the CascadeVAE-C ablation (no discrete code)


def select_variants(module_name: str, arg, known) -> tuple[list[str], dict]:
  names, overrides = config_lib.parse_arg(arg)
  unknown = [n for n in names if n not in known]
  if unknown:
    raise config_lib.variant_error(module_name, unknown, known)
  return names, overrides


def select_row(module_name: str, names: list[str], rows: dict, default: str):
  """The one table row named among the variants (``default`` when none is named)."""
  chosen = [n for n in names if n in rows]
  if len(chosen) > 1:
    raise config_lib.ConfigError(f"{module_name}: choose one table row, got {chosen}")
  return rows[chosen[0] if chosen else default]


def method_config(method: str, dataset: str, *, num_steps: int, learning_rate: float,
                  latent_dim: int, batch_size: int = 64):
  """``method``'s config schema on ``dataset`` with the papers' shared settings filled in."""
  c = methods.schema(method)
  c.dataset.name = dataset
  c.num_steps = num_steps
  c.batch_size = batch_size
  c.optimizer.learning_rate = learning_rate
  c.model.latent_dim = latent_dim
  return c


def dsprites_config(method: str, *, latent_dim: int, learning_rate: float):
  """A dSprites run of the CascadeVAE Table 1 protocol: batch 64, 3e5 iterations, the score."""
  c = method_config(method, "dsprites", num_steps=300_000, learning_rate=learning_rate,
                    latent_dim=latent_dim)
  c.eval.factor_score = True
  c.eval_every = 50_000
  c.checkpoint_every = 10_000
  return c


def finish(c, names: list[str], overrides: dict, **smoke_kwargs):
  """Apply the ``smoke`` variant (rendered dSprites when the set is dSprites), then overrides."""
  if "smoke" in names:
    if c.dataset.name == "dsprites":
      c.dataset.source = "render"
    smoke(c, **smoke_kwargs)
  config_lib.apply_overrides(c, overrides)
  return c


def cascade_config(dataset: str, *, num_discrete: int, penalty: float, relieve_every: int,
                   discrete_start: int, num_steps: int, learning_rate: float, latent_dim: int,
                   beta_low: float):
  """CascadeVAE with supplement B's settings: batch 64, beta_h = 10, Adam."""
  c = method_config("cascadevae", dataset, num_steps=num_steps, learning_rate=learning_rate,
                    latent_dim=latent_dim)
  c.model.posterior_head = "softplus_sigma"  # the authors' code
  c.cascade.num_discrete = num_discrete
  c.cascade.penalty = penalty
  c.cascade.beta_high = 10.0
  c.cascade.beta_low = beta_low
  c.cascade.relieve_every = relieve_every
  c.cascade.discrete_start = discrete_start
  c.checkpoint_every = 10_000
  c.eval_every = 10_000
  c.log_every = 200
  return c


def smoke(c, *, steps: int = 300, relieve_every: int = 50, discrete_start: int | None = None,
          synthetic: bool = False) -> None:
  """Shrink a config to minutes on a CPU: same code path, tiny schedule (not comparable)."""
  c.num_steps = steps
  c.log_every = 25
  c.eval_every = steps
  c.checkpoint_every = 100
  c.eval.num_points = 2000
  c.eval.factor_score_votes = 100
  if c.method == "cascadevae":
    c.cascade.relieve_every = relieve_every
    if discrete_start is not None and c.cascade.discrete_start != NEVER:
      c.cascade.discrete_start = discrete_start
  if synthetic:
    c.dataset.synthetic_if_missing = True
