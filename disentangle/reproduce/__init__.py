"""One command per paper table: plan the programs, train and evaluate them, print the table.

``python -m experiments.reproduce --table=NAME --workdir=DIR`` (the thin entry point; the tables
themselves, as data, are ``experiments/tables.py``). The library never imports the experiments:
the caller passes the table, a ``config_of(module, variant)`` that builds a row's config and a
``scale(config, fraction)`` that shortens its schedule.

- `plan`: tables and rows (`Table`, `Row`), the budget fraction, seeds and evaluation points
  (``--eval_points``), the grouping of rows into as few programs as the shapes allow
  (`group_rows`), the estimated run-steps, the dry run.
- `run`: the workdir's record (``reproduce.json``), training through `trainer.train` with the
  evaluator of the entry points, `evaluate_run`, and resumption of what is unfinished.
- `render`: the table (``table.json``, ``table.md``) from the evaluated runs, per cell mean
  (std, ddof 0) and best over seeds beside the published cell (`aggregate.summarize`).
- `slurm`: ``--submit=slurm``, a Slurm array of the programs not done (`run.run_program` by
  number), requeued on preemption, and the table after it.
- `study_figures`: Locatello et al. 2019's pictures from a study table's runs (the metrics' rank
  correlations, each metric against each model's hyper-parameter), PNGs beside ``table.md``.
- `slot`: ``python -m experiments.slot``, a short GPU slot spent on throughput figures, then on a
  queue of tables up to its end; `utilisation`: the device's busy share sampled from nvidia-smi.
"""
