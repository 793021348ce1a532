"""The flexibly-fair classification audit (FFVAE, Creager et al. 2019, App. D; main paper Sec. 5).

A representation [n, m] of examples (posterior means of FFVAE's [z, b], one b_j per sensitive
attribute a_j) is split into seeded train / validation / test draws; a classifier predicts a
binary target (a binarised factor not in the audited subgroup) from it twice:

- nothing removed: the unfair baseline, which may read a from b;
- the subgroup's b removed: ``remove="drop"`` deletes the b_j columns of the subgroup's
  attributes, ``remove="noise"`` replaces them by N(0, 1) draws (the prior of b_j; keeps the input
  width). The main paper's claim: removing b_a lowers ΔDP w.r.t. a at a small cost in accuracy.

Each row holds the test accuracy and ΔDP / ΔEO of the predictions w.r.t. each attribute of the
subgroup and, for a subgroup of two or more, each pairwise conjunction
(``metrics.fairness.subgroup_gaps``), with every setting of the audit.

Classifier (App. D): an MLP with two hidden layers of 128 units ("Our MLP classifier has two hidden
layers with 128 units each"), Adam with learning rate 1e-3 (App. D: "All network parameters were
optimized using Adam ... with learning rate 0.001"), early stopping with patience 5 epochs on the
validation loss ("trained with patience of 5 epochs on validation loss"), the parameters of the
best validation epoch restored. Our reading where App. D is silent (arguments with these
defaults; the authors' audit code is not public, and it would settle them):

- ReLU, two logits, softmax cross-entropy; the inputs are used as they are (no standardisation);
- minibatches of 64 (the encoders' batch size in App. D), reshuffled every epoch, the last
  partial minibatch of an epoch dropped; at most 100 epochs;
- "improved" means strictly below the best validation loss so far;
- split sizes 50,000 / 10,000 / 10,000 (``DEFAULT_SIZES``), drawn without replacement.

Seeds (the audit's own ``seed``, independent of the encoder's training seed):
``np.random.default_rng([seed, 0])`` permutes the example indices for the splits; jax key
``PRNGKey(seed)`` split into (noise, classifier): the noise key draws the replacement b, the
classifier key initialises and shuffles both classifiers (baseline and removed share it, so the
removal is the only difference between the two rows).
"""
from __future__ import annotations

import functools
from typing import Callable, Mapping, Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from disentangle.metrics import fairness

REMOVE_MODES = ("drop", "noise")
# Our choice (the appendix gives no sizes): train, validation, test examples.
DEFAULT_SIZES = (50_000, 10_000, 10_000)
SPLIT_NAMES = ("train", "validation", "test")
# App. D.
HIDDEN_UNITS = (128, 128)
LEARNING_RATE = 1e-3
PATIENCE = 5
# Our choice (App. D is silent).
BATCH_SIZE = 64
MAX_EPOCHS = 100


# ---------------------------------------------------------------------------------------------
# Splits and removal.

def split_indices(num_examples: int, sizes: Sequence[int] = DEFAULT_SIZES,
                  seed: int = 0) -> dict[str, np.ndarray]:
  """Disjoint seeded train / validation / test draws of indices into ``range(num_examples)``.

  One permutation by ``np.random.default_rng([seed, 0])``; its first ``sizes[0]`` entries are the
  training indices, the next ``sizes[1]`` the validation ones, then ``sizes[2]`` test ones.
  """
  sizes = tuple(int(s) for s in sizes)
  if len(sizes) != 3 or min(sizes) < 1:
    raise ValueError(f"sizes must be three positive (train, validation, test) counts, got {sizes}")
  if sum(sizes) > num_examples:
    raise ValueError(f"sizes {sizes} need {sum(sizes)} examples, only {num_examples} available")
  perm = np.random.default_rng([seed, 0]).permutation(num_examples)
  bounds = np.cumsum((0,) + sizes)
  return {name: perm[bounds[i]:bounds[i + 1]] for i, name in enumerate(SPLIT_NAMES)}


def remove_sensitive(representation, sensitive_dims: Mapping[str, int], names: Sequence[str],
                     remove: str, key: Optional[jax.Array] = None) -> np.ndarray:
  """The representation [n, m] with the b_j of the attributes ``names`` removed (pure).

  ``remove="drop"``: the columns ``sensitive_dims[name]`` deleted -> [n, m - len(names)], the
  other columns in their order. ``remove="noise"``: those columns replaced by
  ``jax.random.normal(key, (n, len(names)))`` (column k of the draw -> the k-th name's column;
  N(0, 1) is the prior of b_j), every other entry unchanged -> [n, m]. The input is not modified.
  """
  representation = np.asarray(representation)
  cols = _columns(representation, sensitive_dims, names)
  if remove == "drop":
    return np.delete(representation, cols, axis=1)
  if remove == "noise":
    if key is None:
      raise ValueError('remove="noise" needs a key')
    out = np.array(representation, copy=True)
    draws = jax.random.normal(key, (representation.shape[0], len(cols)), jnp.float32)
    out[:, cols] = np.asarray(draws, out.dtype)
    return out
  raise ValueError(f"remove must be one of {list(REMOVE_MODES)}, got {remove!r}")


def _columns(representation: np.ndarray, sensitive_dims: Mapping[str, int],
             names: Sequence[str]) -> list[int]:
  if representation.ndim != 2:
    raise ValueError(f"representation must be [n, m], got shape {representation.shape}")
  m = representation.shape[1]
  missing = [n for n in names if n not in sensitive_dims]
  if missing:
    raise ValueError(f"the representation has no sensitive dimension b for {missing}; "
                     f"sensitive_dims covers {sorted(sensitive_dims)}")
  cols = [int(sensitive_dims[n]) for n in names]
  bad = [(n, c) for n, c in zip(names, cols) if not 0 <= c < m]
  if bad:
    raise ValueError(f"sensitive dimensions {bad} lie outside the representation's {m} columns")
  if len(set(cols)) != len(cols):
    raise ValueError(f"attributes {list(names)} share sensitive dimensions {cols}")
  return cols


# ---------------------------------------------------------------------------------------------
# Classifier.

class Classifier(nn.Module):
  """MLP of App. D: dense hidden layers (128, 128) with ReLU, then ``num_classes`` logits."""
  hidden_units: Sequence[int] = HIDDEN_UNITS
  num_classes: int = 2

  @nn.compact
  def __call__(self, x):
    for units in self.hidden_units:
      x = nn.relu(nn.Dense(units)(x))
    return nn.Dense(self.num_classes)(x)


class EarlyStopping:
  """Patience on the validation loss: stop after ``patience`` epochs without a new best.

  ``update(loss)`` returns True when training should stop. An epoch improves when its loss is
  strictly below the best so far; ``best_epoch`` is the first epoch with the lowest loss.
  """

  def __init__(self, patience: int = PATIENCE):
    if patience < 1:
      raise ValueError(f"patience must be >= 1, got {patience}")
    self.patience = patience
    self.best_loss = float("inf")
    self.best_epoch = -1
    self.epoch = -1

  def update(self, loss: float) -> bool:
    self.epoch += 1
    if loss < self.best_loss:
      self.best_loss, self.best_epoch = float(loss), self.epoch
    return self.epoch - self.best_epoch >= self.patience

  @property
  def improved(self) -> bool:
    return self.best_epoch == self.epoch


@functools.lru_cache(maxsize=None)
def _functions(hidden_units: tuple[int, ...], learning_rate: float, batch_size: int):
  """(init, train_epoch, evaluate) jitted for one classifier setting (cached across audits)."""
  model = Classifier(hidden_units)
  tx = optax.adam(learning_rate)

  def loss_fn(params, x, y):
    logits = model.apply({"params": params}, x)
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), logits

  @jax.jit
  def init(key, x):
    params = model.init(key, x[:1])["params"]
    return params, tx.init(params)

  @jax.jit
  def train_epoch(params, opt_state, x, y, key):
    num_batches = x.shape[0] // batch_size
    order = jax.random.permutation(key, x.shape[0])[:num_batches * batch_size]

    def step(carry, idx):
      params, opt_state = carry
      (loss, _), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, x[idx], y[idx])
      updates, opt_state = tx.update(grads, opt_state, params)
      return (optax.apply_updates(params, updates), opt_state), loss

    (params, opt_state), losses = jax.lax.scan(
        step, (params, opt_state), order.reshape(num_batches, batch_size))
    return params, opt_state, losses.mean()

  @jax.jit
  def evaluate(params, x, y):
    loss, logits = loss_fn(params, x, y)
    pred = jnp.argmax(logits, axis=-1)
    return loss, jnp.mean(pred == y), pred

  return init, train_epoch, evaluate


def train_classifier(x_train, y_train, x_val, y_val, key: jax.Array, *,
                     hidden_units: Sequence[int] = HIDDEN_UNITS,
                     learning_rate: float = LEARNING_RATE, batch_size: int = BATCH_SIZE,
                     patience: int = PATIENCE, max_epochs: int = MAX_EPOCHS,
                     on_epoch: Optional[Callable[[int, dict], None]] = None) -> dict:
  """Train the App. D classifier with early stopping; return the best-validation parameters.

  Each epoch is one jitted call (a scan over the shuffled minibatches), then the validation loss
  feeds ``EarlyStopping``. ``on_epoch(epoch, params)`` (optional) sees the parameters after every
  epoch (0-based), e.g. to record snapshots.

  Returns a dict: ``params`` (those of ``best_epoch``), ``best_epoch`` (0-based),
  ``epochs_run``, ``stopped_early`` (False when ``max_epochs`` ran out first), ``history`` (per
  epoch: ``epoch``, ``train_loss``, ``val_loss``, ``val_accuracy``) and the settings.
  """
  x_train, x_val = (jnp.asarray(x, jnp.float32) for x in (x_train, x_val))
  y_train, y_val = (jnp.asarray(_labels(y, what), jnp.int32)
                    for y, what in ((y_train, "y_train"), (y_val, "y_val")))
  if x_train.shape[0] < batch_size:
    raise ValueError(f"{x_train.shape[0]} training examples, fewer than one minibatch of "
                     f"{batch_size}")
  if max_epochs < 1:
    raise ValueError(f"max_epochs must be >= 1, got {max_epochs}")
  init, train_epoch, evaluate = _functions(tuple(int(u) for u in hidden_units),
                                           float(learning_rate), int(batch_size))
  init_key, shuffle_key = jax.random.split(key)
  params, opt_state = init(init_key, x_train)
  stopper = EarlyStopping(patience)
  best_params, history, stopped = params, [], False
  for epoch in range(max_epochs):
    params, opt_state, train_loss = train_epoch(params, opt_state, x_train, y_train,
                                                jax.random.fold_in(shuffle_key, epoch))
    val_loss, val_accuracy, _ = evaluate(params, x_val, y_val)
    history.append({"epoch": epoch, "train_loss": float(train_loss),
                    "val_loss": float(val_loss), "val_accuracy": float(val_accuracy)})
    if on_epoch is not None:
      on_epoch(epoch, params)
    stopped = stopper.update(float(val_loss))
    if stopper.improved:
      best_params = params
    if stopped:
      break
  return {"params": best_params, "best_epoch": stopper.best_epoch,
          "best_val_loss": stopper.best_loss, "epochs_run": len(history),
          "stopped_early": stopped, "history": history,
          "hidden_units": list(hidden_units), "learning_rate": learning_rate,
          "optimizer": "adam", "batch_size": batch_size, "patience": patience,
          "max_epochs": max_epochs}


def predict(params, x, hidden_units: Sequence[int] = HIDDEN_UNITS) -> np.ndarray:
  """Predicted classes (argmax of the logits) of the classifier ``params`` on ``x`` [n, d]."""
  logits = Classifier(tuple(hidden_units)).apply({"params": params},
                                                 jnp.asarray(x, jnp.float32))
  return np.asarray(jnp.argmax(logits, axis=-1))


def _labels(y, what: str) -> np.ndarray:
  y = np.asarray(y)
  if y.ndim != 1 or (y.size and not np.isin(y, (0, 1)).all()):
    raise ValueError(f"{what} must be 1-d 0/1 labels, got shape {y.shape}")
  return y


# ---------------------------------------------------------------------------------------------
# The audit.

def audit(representation, attributes, attribute_names: Sequence[str],
          sensitive_dims: Mapping[str, int], subgroup: str | Sequence[str], target_name: str,
          remove: str = "drop", seed: int = 0, *, sizes: Sequence[int] = DEFAULT_SIZES,
          hidden_units: Sequence[int] = HIDDEN_UNITS, learning_rate: float = LEARNING_RATE,
          batch_size: int = BATCH_SIZE, patience: int = PATIENCE,
          max_epochs: int = MAX_EPOCHS) -> list[dict]:
  """Two rows: the classifier on the whole representation, and with the subgroup's b removed.

  Args:
    representation: [n, m] per example (e.g. posterior means of [z, b]).
    attributes: [n, A] 0/1, column j named ``attribute_names[j]``.
    attribute_names: the A names; the target and every subgroup attribute must be among them.
    sensitive_dims: attribute name -> column of its b_j in ``representation``.
    subgroup: the audited attribute name(s) (e.g. ``"shape"`` or ``("shape", "scale")``).
    target_name: the attribute predicted; not in ``subgroup``.
    remove: ``"drop"`` or ``"noise"`` (see ``remove_sensitive``).
    seed: the audit's seed (splits, noise, classifier; see the module docstring).

  Returns:
    ``[baseline, removed]``: each row has ``removed`` (names; [] for the baseline),
    ``removed_dims``, ``test_accuracy``, ``demographic_parity`` / ``equalized_odds`` (group name
    -> gap, None for an empty group), ``gaps`` (the full ``subgroup_gaps`` rows on the test
    split), ``best_epoch``, ``epochs_run``, ``stopped_early``, ``best_val_loss``, ``history`` and
    ``settings`` (target, subgroup, remove, seed, sizes, split_seed, classifier settings).
  """
  representation = np.asarray(representation)
  subgroup = (subgroup,) if isinstance(subgroup, str) else tuple(subgroup)
  attribute_names = tuple(attribute_names)
  attributes = np.asarray(attributes)
  if remove not in REMOVE_MODES:
    raise ValueError(f"remove must be one of {list(REMOVE_MODES)}, got {remove!r}")
  if not subgroup or len(set(subgroup)) != len(subgroup):
    raise ValueError(f"subgroup must name distinct attributes, got {list(subgroup)}")
  unknown = [a for a in subgroup if a not in attribute_names]
  if unknown:
    raise ValueError(f"subgroup attributes {unknown} are not known attributes; known: "
                     f"{list(attribute_names)}")
  if target_name not in attribute_names:
    raise ValueError(f"target {target_name!r} is not a known attribute; known: "
                     f"{list(attribute_names)}")
  if target_name in subgroup:
    raise ValueError(f"target {target_name!r} is in the audited subgroup {list(subgroup)}; "
                     f"pick a target outside it")
  if attributes.ndim != 2 or attributes.shape[1] != len(attribute_names):
    raise ValueError(f"attributes must be [n, {len(attribute_names)}] for "
                     f"{list(attribute_names)}, got shape {attributes.shape}")
  if representation.ndim != 2 or representation.shape[0] != attributes.shape[0]:
    raise ValueError(f"representation must be [n, m] with n = {attributes.shape[0]} rows, got "
                     f"shape {representation.shape}")
  if not np.isfinite(representation).all():
    raise ValueError("representation holds non-finite values")
  targets = _labels(attributes[:, attribute_names.index(target_name)], target_name)
  removed_dims = _columns(representation, sensitive_dims, subgroup)

  split = split_indices(representation.shape[0], sizes, seed)
  noise_key, classifier_key = jax.random.split(jax.random.PRNGKey(seed))
  group_attrs = attributes[:, [attribute_names.index(a) for a in subgroup]]
  settings = {"target": target_name, "subgroup": list(subgroup), "remove": remove, "seed": seed,
              "split_seed": [seed, 0], "sizes": dict(zip(SPLIT_NAMES, map(int, sizes))),
              "num_examples": int(representation.shape[0]),
              "representation_dim": int(representation.shape[1]),
              "sensitive_dims": {k: int(v) for k, v in sensitive_dims.items()},
              "hidden_units": list(hidden_units), "learning_rate": learning_rate,
              "optimizer": "adam", "batch_size": batch_size, "patience": patience,
              "max_epochs": max_epochs}
  rows = []
  for names in ((), subgroup):
    x = (representation if not names else
         remove_sensitive(representation, sensitive_dims, names, remove, noise_key))
    fit = train_classifier(x[split["train"]], targets[split["train"]],
                           x[split["validation"]], targets[split["validation"]], classifier_key,
                           hidden_units=hidden_units, learning_rate=learning_rate,
                           batch_size=batch_size, patience=patience, max_epochs=max_epochs)
    test = split["test"]
    pred = predict(fit["params"], x[test], hidden_units)
    gaps = fairness.subgroup_gaps(pred, targets[test], group_attrs[test], subgroup)
    rows.append({
        "removed": list(names), "removed_dims": removed_dims if names else [],
        "test_accuracy": float(np.mean(pred == targets[test])),
        "demographic_parity": {g["name"]: g["demographic_parity"]["gap"] for g in gaps},
        "equalized_odds": {g["name"]: g["equalized_odds"]["gap"] for g in gaps},
        "gaps": gaps,
        **{k: fit[k] for k in ("best_epoch", "epochs_run", "stopped_early", "best_val_loss",
                               "history")},
        "settings": settings})
  return rows


def to_markdown(rows: Sequence[dict]) -> str:
  """A markdown table: one line per row (an optional ``run`` label first), accuracy, ΔDP, ΔEO.

  Gaps are listed per group name in order of first appearance; a None gap reads ``n/a``.
  """
  groups = list(dict.fromkeys(g for row in rows for g in row["demographic_parity"]))
  with_run = any("run" in row for row in rows)
  header = (["run"] if with_run else []) + ["target", "removed", "remove", "test accuracy"]
  header += [f"ΔDP({g})" for g in groups] + [f"ΔEO({g})" for g in groups]
  header += ["best epoch", "epochs run"]
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]

  def fmt(x):
    return "n/a" if x is None else f"{x:.3f}"

  for row in rows:
    cells = [str(row.get("run", ""))] if with_run else []
    cells += [row["settings"]["target"], ", ".join(row["removed"]) or "nothing",
              row["settings"]["remove"] if row["removed"] else "-", fmt(row["test_accuracy"])]
    cells += [fmt(row["demographic_parity"][g]) if g in row["demographic_parity"] else ""
              for g in groups]
    cells += [fmt(row["equalized_odds"][g]) if g in row["equalized_odds"] else ""
              for g in groups]
    cells += [str(row["best_epoch"]), str(row["epochs_run"])]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"
