"""PartedVAE on CelebA: eight class-related variables, 0.5% labels (Figs. 6-8, 10; Table 6).

z of 10 dimensions; eight categorical variables in the authors' order, each with a 1-dimensional
u (``disentangle.data.datasets.celeba.PARTED_VARIABLES``): hair colour 4, skin tone 3, bangs 2, beard 3,
receding hairline 2, smiling 2, eyeglasses 2, gender 2. Table 6 prints "[4, 3, 3, 2, 2, 2, 2]",
seven sizes for eight variables; these are the sizes of the authors' ``main.py`` (their Table 5's
"FC. 20 (c)" = 4 + 3 + 2 + 3 + 2 + 2 + 2 + 2). p(c) is the authors' (``main.py``):

| variable          | authors' p(c)          | labels here (derived from the 40 attributes)         |
|-------------------|------------------------|------------------------------------------------------|
| hair_colour       | .42 .33 .18 .06 (0.99) | Black/Brown/Blond/Gray_Hair, exactly one set, else -1 |
| skin_tone         | .90 .07 .03            | -1 unless ``celeba/parted_labels.csv`` exists         |
| bangs             | .85 .15                | Bangs                                                |
| beard             | .74 .15 .11            | none / stubble (5_o_Clock_Shadow) / beard (ours)     |
| receding_hairline | .93 .07                | Receding_Hairline                                    |
| smiling           | .47 .53                | Smiling                                              |
| eyeglasses        | .95 .05                | Eyeglasses                                           |
| gender            | .57 .43                | Male                                                 |

The authors' hair-colour prior sums to 0.99; it is divided by its sum here (p(c) must sum to 1).
The derived labels' class frequencies on the training split need the CelebA files (none offline
here): compare them with the column above before a run. The authors' 800 hand labels
(``warm_up_labels.csv``) are not public; their rows (one-hot blocks, 20 columns, first training
images first) are read from ``<data_dir>/celeba/parted_labels.csv`` when present
(``parted.require_labels_file=True`` makes its absence a ``MissingDataError``).

Table 6: Adam 5e-4, gamma_c = 2000, gamma_h = 10, gamma_z = gamma_u = 1000, gamma_bc = 500,
delta = 0.2, C_z from 0 to 30 and C_u from 0 to 15 nats over 1.25e5 iterations, L1 (MAE)
reconstruction, 80 epochs of the official training split (162,770 images: 2,544 batches of 64,
203,520 iterations); 0.5% of it labelled, the first 814 images (the authors' code: the first 800).
ReduceLROnPlateau as MNIST. Test split: the official one. Departure: the authors use 218x178
images (Table 5, five convs, a 5x5x64 bottleneck); here the 64x64 networks of ``networks`` on the
148-pixel centre crop.

Published: figures only (traversals, attribute transfer, prior components), no number.
``smoke``: 300 steps on the generated stand-ins, whose drawn attributes are Male, Smiling,
Eyeglasses, Pale_Skin, Black_Hair and Blond_Hair: the variables hair colour, smiling, eyeglasses
and gender, 16 labels, 8 per step.

Run: python -m experiments.celeba_parted --config=experiments/configs/celeba_parted.py:labels0p5
"""
from experiments.configs import common
from experiments.configs import mnist_parted

PUBLISHED = {}
VARIANTS = ("labels0p5", "smoke")
VARIABLES = ("hair_colour", "skin_tone", "bangs", "beard", "receding_hairline", "smiling",
             "eyeglasses", "gender")
SIZES = (4, 3, 2, 3, 2, 2, 2, 2)
AUTHORS_PRIOR_C = ((0.42, 0.33, 0.18, 0.06), (0.9, 0.07, 0.03), (0.85, 0.15), (0.74, 0.15, 0.11),
                   (0.93, 0.07), (0.47, 0.53), (0.95, 0.05), (0.57, 0.43))
PRIOR_C = tuple(tuple(v / sum(vec) for v in vec) for vec in AUTHORS_PRIOR_C)
SMOKE_VARIABLES = ("hair_colour", "smiling", "eyeglasses", "gender")
TRAIN_SIZE = 162_770
EPOCH_STEPS = -(-TRAIN_SIZE // 64)  # 2,544
NUM_STEPS = 80 * EPOCH_STEPS
NUM_LABELLED = round(0.005 * TRAIN_SIZE)  # 814


def get_config(arg=None):
  names, overrides = common.select_variants(__name__, arg, VARIANTS)
  smoke = "smoke" in names
  chosen = SMOKE_VARIABLES if smoke else VARIABLES
  index = [VARIABLES.index(v) for v in chosen]
  c = mnist_parted.parted_config(
      "celeba", latent_dim=10, learning_rate=5e-4, num_steps=NUM_STEPS, epoch_steps=EPOCH_STEPS,
      sizes=tuple(SIZES[i] for i in index), u_dim=1,
      gammas=(2000.0, 10.0, 1000.0, 1000.0, 500.0), bc_threshold=0.2,
      z_capacity=(0.0, 30.0, 125_000), u_capacity=(0.0, 15.0, 125_000), targets=chosen,
      num_labelled=NUM_LABELLED, labelled_subset="first", patience=2, sup_cooldown=3,
      prior_c=tuple(PRIOR_C[i] for i in index))
  c.model.likelihood = "l1"
  c.dataset.train_split = "official_train"
  c.dataset.eval_split = "official_test"
  c.eval.cluster_accuracy = True
  c.eval_every = 10 * EPOCH_STEPS
  c.checkpoint_every = EPOCH_STEPS
  if smoke:
    c.parted.num_labelled, c.parted.labelled_batch_size = 16, 8
  return common.finish(c, names, overrides)
