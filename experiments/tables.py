"""The papers' tables as data: rows, the config variant that reproduces each, metrics, protocol.

Read by ``python -m experiments.reproduce`` (`disentangle.reproduce`). The published numbers are
the configs' ``PUBLISHED`` (one home); a row no config reproduces carries its published cell here
and is printed as "no config". The papers: ``../shared/papers/`` (CascadeVAE, ICML 2019, Tables
1-4; PartedVAE, Sec. 5.1-5.3, Tables 1-2; FFVAE, App. E, Figs. 6-7). Locatello et al.'s study
(ICML 2019) is one table per data set, ``locatello2019_<data set>`` (`_locatello2019`): six
models times six hyper-parameter values, the settings of disentanglement_lib's
``config/unsupervised_study_v1`` (``sweep.py``, ``model_configs``, ``metric_configs``).
"""
from disentangle.reproduce.plan import Row
from disentangle.reproduce.plan import Table
from experiments.configs import common
from experiments.configs import dsprites_annealedvae
from experiments.configs import dsprites_betatcvae
from experiments.configs import dsprites_betavae
from experiments.configs import dsprites_dipvae
from experiments.configs import dsprites_factorvae

CASCADEVAE = "CascadeVAE (Jeong & Song, ICML 2019)"
PARTEDVAE = "PartedVAE (Hajimiri et al.)"
FFVAE = "FFVAE (Creager et al., ICML 2019), App. E"
FINAL = "the final checkpoint"
SELECTED = ("test set, the final checkpoint and the one selected on valid10k "
            "(eval.select = best_validation; trained on the first 50,000 training images)")
FIGURE = "plotted only (no table value)"


def _cascade_accuracy(name: str, title: str, prefix: str) -> Table:
  """CascadeVAE Tables 3-4: JointVAE and CascadeVAE accuracy on ``prefix`` (mnist / fashion)."""
  return Table(
      name=name, title=title, paper=f"{CASCADEVAE}, Table {name[-1]}", metrics=("accuracy",),
      protocol=f"accuracy of the discrete code, best one-to-one mapping to the labels; {SELECTED}",
      selected=True, rows=(
          Row("JointVAE", "10", f"{prefix}_jointvae", "m10,best_validation", "m10"),
          Row("JointVAE", "4", f"{prefix}_jointvae", "m4,best_validation", "m4"),
          Row("CascadeVAE", "10", f"{prefix}_cascade", "m10,best_validation", "m10"),
          Row("CascadeVAE", "4", f"{prefix}_cascade", "m4,best_validation", "m4")))


def _ffvae(name: str, title: str, variants: tuple) -> Table:
  return Table(
      name=name, title=title, paper=f"{FFVAE}, {title.split(':')[0]}", metrics=("mig",),
      protocol="MIG of the continuous means on balanced dSprites (histogram estimator; the "
               "sampled one in table.json), trained on DSpritesUnfair; one line per (alpha, "
               f"gamma); {FINAL}",
      rows=tuple(Row(f"FFVAE, {v}", "10", "dsprites_unfair_ffvae", v,
                     published=f"Fig. {v[3:]}: {FIGURE}") for v in variants))


STUDY = "Locatello et al., ICML 2019 (disentanglement_lib's unsupervised_study_v1)"
STUDY_PREFIX = "locatello2019_"
# The study's models in its figures' order (0 = beta-VAE ... 5 = AnnealedVAE): (label, config,
# variants before the grid row, hyper-parameter, {grid row variant: value}).
STUDY_MODELS = (
    ("beta-VAE", "dsprites_betavae", "study", "beta", dsprites_betavae.STUDY_ROWS),
    ("FactorVAE", "dsprites_factorvae", "study", "gamma", dsprites_factorvae.STUDY_ROWS),
    ("beta-TCVAE", "dsprites_betatcvae", "study", "beta", dsprites_betatcvae.STUDY_ROWS),
    ("DIP-VAE-I", "dsprites_dipvae", "i", "lambda_od", dsprites_dipvae.ROWS),
    ("DIP-VAE-II", "dsprites_dipvae", "ii", "lambda_od", dsprites_dipvae.ROWS),
    ("AnnealedVAE", "dsprites_annealedvae", "", "c_max", dsprites_annealedvae.ROWS),
)
# The metric configs of the study that the registry holds (metric_configs/*.gin; the unsupervised
# scores are in nats, not a fraction, and stay in results.json).
STUDY_METRICS = ("beta_vae", "factor_score_dlib", "mig", "dci", "modularity", "sap",
                 "downstream_logistic", "downstream_trees")
STUDY_FIGURES = "Figs. 2-3 (plotted, no table value)"


def _locatello2019(dataset: str) -> Table:
  """The study on ``dataset``: a row per (model, hyper-parameter value), 50 seeds each."""
  rows = []
  for label, config, base, hparam, grid in STUDY_MODELS:
    for variant, value in grid.items():
      words = ",".join(v for v in (base, dataset if dataset != "dsprites" else "", variant) if v)
      rows.append(Row(f"{label} ({hparam} = {value:g})", "10", config, words,
                      published=STUDY_FIGURES, model=label, hparam=(hparam, value)))
  return Table(
      name=STUDY_PREFIX + dataset, title=f"six models x six hyper-parameters on {dataset}",
      paper=f"{STUDY}, Figs. 2-3 and the appendix's per-data-set figures",
      metrics=STUDY_METRICS,
      protocol="disentanglement_lib's metric configs on the mean and on the sampled "
               "representation (mean.gin / sampled.gin; each cell names its one: [mean] / "
               "[sampled]; 10,000 train / 5,000 test points, 20 bins), scikit-learn 0.20's "
               "classifiers and boosted trees; the downstream tasks on 10, 100, 1,000 and "
               f"10,000 points; {FINAL}; 50 seeds",
      seeds=50, estimators="study2019", representation="both",
      eval_fields=(("downstream", True),), recorded=("unsupervised",),
      rows=tuple(rows))


TABLES = {t.name: t for t in (
    Table(
        name="cascadevae_table1", title="disentanglement score on dSprites",
        paper=f"{CASCADEVAE}, Table 1 (with the ablations CascadeVAE-C and -D)",
        metrics=("factor_score",),
        protocol=f"the disentanglement score of supplement C (800 votes x 100); {FINAL}",
        rows=(
            Row("beta-VAE (beta = 10.0)", "5", "dsprites_betavae", "beta10_m5"),
            Row("beta-VAE (beta = 4.0)", "10", "dsprites_betavae", "beta4_m10"),
            Row("AnchorVAE (beta_l = 10.0)", "5 (5)", "dsprites_anchorvae", "anchor5_m5"),
            Row("AnchorVAE (beta_l = 7.0)", "5 (20)", "dsprites_anchorvae", "anchor5_m20"),
            Row("FactorVAE", "5", "dsprites_factorvae", "m5"),
            Row("FactorVAE", "10", "dsprites_factorvae", "m10"),
            Row("CascadeVAE-C (beta_l = 0.7)", "5", "dsprites_cascade", "cascade_c"),
            Row("CascadeVAE-C (beta_l = 1.0)", "10", "dsprites_cascade", "cascade_c_m10"),
            Row("JointVAE", "6", "dsprites_jointvae", "m6"),
            Row("JointVAE", "4", "dsprites_jointvae", "m4"),
            Row("CascadeVAE-D (beta = 7.0)", "6", "dsprites_cascade", "cascade_d"),
            Row("CascadeVAE-D (beta = 1.0)", "4", "dsprites_cascade", "cascade_d_m4"),
            Row("CascadeVAE (beta_l = 1.0)", "6", "dsprites_cascade", "m6"),
            Row("CascadeVAE (beta_l = 2.0)", "4", "dsprites_cascade", "m4"))),
    Table(
        name="cascadevae_table2", title="unsupervised classification on dSprites, S = 3",
        paper=f"{CASCADEVAE}, Table 2", metrics=("shape_accuracy",),
        protocol="accuracy of the discrete code against the shape factor over the whole data "
                 f"set, best one-to-one mapping; {FINAL}",
        rows=(Row("JointVAE", "6", "dsprites_jointvae", "m6"),
              Row("JointVAE", "4", "dsprites_jointvae", "m4"),
              Row("CascadeVAE", "6", "dsprites_cascade", "m6"),
              Row("CascadeVAE", "4", "dsprites_cascade", "m4"))),
    _cascade_accuracy("cascadevae_table3", "unsupervised classification on MNIST, S = 10",
                      "mnist"),
    _cascade_accuracy("cascadevae_table4",
                      "unsupervised classification on Fashion-MNIST, S = 10", "fashion_mnist"),
    Table(
        name="partedvae_table1", title="unsupervised factor score on dSprites",
        paper=f"{PARTEDVAE}, Table 1 and Sec. 5.1", metrics=("factor_score_partedvae",),
        protocol="the authors' factor score (std-normalised means, groups of 100, dims with "
                 f"std < 0.1 pruned); {FINAL}; five runs",
        seeds=5, rows=(
            Row("VAE", "6", published={"factor_score_partedvae": {"mean": 41.0}}),
            Row("beta-VAE (beta = 2)", "6",
                published={"factor_score_partedvae": {"mean": 58.0}}),
            Row("FactorVAE (gamma = 35)", "6",
                published={"factor_score_partedvae": {"mean": 71.0}}),
            Row("beta-TCVAE (alpha = 1, beta = 5, gamma = 1)", "6",
                published={"factor_score_partedvae": {"mean": 70.0}}),
            Row("HFVAE", "6", published={"factor_score_partedvae": {"mean": 63.0}}),
            Row("Guided-VAE", "6", published={"factor_score_partedvae": {"mean": 67.0}}),
            Row("Guided-beta-TCVAE", "6", published={"factor_score_partedvae": {"mean": 73.0}}),
            Row("PartedVAE", "5 + 1", "dsprites_parted", "unsup"))),
    Table(
        name="partedvae_table2", title="semi-supervised factor score on dSprites (shape labels)",
        paper=f"{PARTEDVAE}, Table 2 and Sec. 5.3 (no BC)", metrics=("factor_score_partedvae",),
        protocol="the authors' factor score, labels on the stratified subset; "
                 f"{FINAL}; five runs",
        seeds=5, rows=(
            Row("PartedVAE, 100 labels (0.013%)", "5 + 1", "dsprites_parted", "labels100"),
            Row("PartedVAE, 737 labels (0.1%)", "5 + 1", "dsprites_parted", "labels737"),
            Row("PartedVAE, 1000 labels (0.13%)", "5 + 1", "dsprites_parted", "labels1000"),
            Row("PartedVAE, 3686 labels (0.5%)", "5 + 1", "dsprites_parted", "labels3686"),
            Row("PartedVAE, 10000 labels (1.35%)", "5 + 1", "dsprites_parted", "labels10000"),
            Row("PartedVAE, 3686 labels, no BC (Sec. 5.3)", "5 + 1", "dsprites_parted",
                "labels3686_no_bc"))),
    Table(
        name="partedvae_mnist256", title="MNIST classification with 256 labels",
        paper=f"{PARTEDVAE}, Sec. 5.1", metrics=("accuracy_direct",),
        protocol="test accuracy of argmax q(c|x), identity mapping; the model at Adam 5e-4 "
                 f"(the authors' code; Table 6's 1.5e-3 collapses q(c|x)); {FINAL}",
        rows=(Row("PartedVAE, 256 labels", "6 + 10", "mnist_parted", "labels256,authors_lr",
                  "labels256"),
              Row("the encoder trained on the 256 labels alone", "", "mnist_parted",
                  "classifier256"))),
    _ffvae("ffvae_fig6a", "Fig. 6a: MIG against alpha, a line per gamma", ("fig6a",)),
    _ffvae("ffvae_fig6b", "Fig. 6b: MIG against gamma for alpha >= 300", ("fig6b",)),
    _ffvae("ffvae_fig7", "Fig. 7: MIG against gamma for alpha <= 200 (7a) and against "
           "log(gamma / alpha) (7b)", ("fig7a", "fig7b")),

    *(_locatello2019(d) for d in common.STUDY_DATASETS),
)}
# Table names of the form <family>_<what>: an unknown one lists the family's known values.
FAMILIES = {STUDY_PREFIX: "data sets"}
