"""Evaluation: run an agent over a task set into a job folder, then compute metrics and a report.

``t1env eval`` and ``t1env report`` are the commands; docs/evaluation.md shows them. Modules, in the order data flows:
:mod:`~t1env.eval.agents` (the agents and the protocol for your own), :mod:`~t1env.eval.openai_agent` (a model
behind an OpenAI-compatible server), :mod:`~t1env.eval.hf_agent` (a local checkpoint), :mod:`~t1env.eval.harness` (trials, concurrency, resume, stopping),
:mod:`~t1env.eval.recording` (ATIF trajectories, asciinema casts), :mod:`~t1env.eval.results` (the job folder,
metrics), :mod:`~t1env.eval.report` (markdown/HTML report with plots, job comparison).
"""

from t1env.eval.agents import EvalOptions
from t1env.eval.harness import EvalConfig, run_job
from t1env.eval.results import job_metrics, pass_at_k, wilson_interval

__all__ = ["EvalConfig", "EvalOptions", "job_metrics", "pass_at_k", "run_job", "wilson_interval"]
