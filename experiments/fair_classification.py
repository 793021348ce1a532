"""The flexibly-fair classification audit of a trained FFVAE run (App. D; main paper Sec. 5).

python -m experiments.fair_classification --workdir=RUN [--target=pos_x] [--sensitive=shape]
    [--baseline=RUN_ALPHA0] [--step=N]

Audits RUN with `disentangle.evaluation.fair_audit` (restored read-only): the App. D classifier
on the whole representation and with the b_j of the subgroup (``--sensitive`` /
``ffvae.fair.subgroup``) removed, predicting ``--target`` / ``ffvae.fair.target``; test accuracy,
ΔDP and ΔEO per group. ``--baseline`` (e.g.
the alpha = 0 run, FactorVAE on [z, b] with FFVAE's grouping: its b carry no attribute by
construction, but it is an ffvae-method run and has the same ``sensitive_dims``) adds that run's
two rows. Writes ``RUN/fairness.json`` and ``RUN/fairness.md`` atomically, on process 0 only.
Bad input (not a run, not an FFVAE run, an unknown attribute, a failed write) is one line and
exit status 2 (`disentangle.command_line.exits`).
"""
import shlex
import sys


def main(argv=None):
  from absl import flags  # pylint: disable=g-import-not-at-top

  from disentangle import command_line  # pylint: disable=g-import-not-at-top
  flags.DEFINE_string("workdir", None, "The FFVAE run (or multi-seed workdir).", required=True)
  flags.DEFINE_string("target", None, "Attribute predicted (default ffvae.fair.target).")
  flags.DEFINE_string("sensitive", None, "Comma-separated subgroup whose b is removed "
                      "(default ffvae.fair.subgroup).")
  flags.DEFINE_string("baseline", None, "A second run audited beside it (e.g. alpha = 0).")
  flags.DEFINE_integer("step", None, "Checkpoint step (default: the latest).")
  flags_ = flags.FLAGS

  def run(_):
    import jax  # pylint: disable=g-import-not-at-top

    from disentangle import storage  # pylint: disable=g-import-not-at-top
    from disentangle.evaluation import fair_audit  # pylint: disable=g-import-not-at-top
    if jax.process_index() != 0:
      return
    subgroup = (tuple(s.strip() for s in flags_.sensitive.split(",") if s.strip())
                if flags_.sensitive else None)
    with command_line.exits(shlex.join(getattr(sys, "orig_argv", sys.argv))):
      for flag in ("workdir", "baseline"):
        storage.check(flags_[flag].value, f"--{flag}")
      rows = fair_audit.audit_run(flags_.workdir, target=flags_.target, subgroup=subgroup,
                                  step=flags_.step)
      if flags_.baseline:
        rows += fair_audit.audit_run(flags_.baseline, target=flags_.target, subgroup=subgroup)
      json_path, md_path = fair_audit.write(flags_.workdir, rows)
    print(md_path.read_text())
    print(f"wrote {json_path} and {md_path}")

  command_line.run(run, argv)


if __name__ == "__main__":
  main()
