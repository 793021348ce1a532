"""Evaluation: the in-training evaluator, `evaluate_run` (results.json, report.md), the encodings
shared by every metric, aggregation over seeds and the fair-classification audit."""
