"""Benchmark: the evaluation harness's own overhead per trial, next to the bare env loop.

The oracle on ``hello-file``, N trials (default 50), measured in one process on the same machine:

* ``bare env, reused`` — one ``TerminalEnv`` (background sandbox pre-start on, its default), ``run_episode`` N times;
* ``bare env, fresh`` — a new ``TerminalEnv(prestart=False)`` per episode: the env work each harness trial does;
* ``t1env eval, concurrency C`` — ``run_job`` with N attempts: env + agent + ATIF trajectory + asciinema cast +
  atomic per-trial and job result files after every trial.

Per-trial time is wall time / N. Overhead is against ``bare env, fresh`` at concurrency 1. On a shared machine the
load drifts between those runs, so a second table interleaves the two: N pairs of one bare fresh episode and one
harness trial (``run_trial``: env, agent, trajectory, cast, result file), medians of each.

Usage: python bench/eval_overhead.py [--trials N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from t1env.agent.reference import OracleAgent, run_episode
from t1env.env import TerminalEnv
from t1env.eval import EvalConfig, run_job
from t1env.eval.harness import Trial, run_trial
from t1env.registry import get_task

TASK = "hello-file"


def bare(n: int, reuse: bool) -> float:
    task = get_task(TASK)
    t0 = time.perf_counter()
    env = TerminalEnv(task=TASK) if reuse else None
    for i in range(n):
        e = env or TerminalEnv(task=TASK, prestart=False)
        ep = run_episode(e, OracleAgent(task), seed=i)
        assert ep.info["resolved"], ep.info
        if env is None:
            e.close()
    if env is not None:
        env.close()
    return time.perf_counter() - t0


def harness(n: int, concurrency: int) -> float:
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        m = run_job(EvalConfig(tasks=[TASK], agent="oracle", attempts=n, concurrency=concurrency), d)
        wall = time.perf_counter() - t0
    assert m["resolved_rate"] == 1.0 and m["n_trials"] == n, m
    return wall


def interleaved(n: int) -> tuple[float, float]:
    task, config = get_task(TASK), EvalConfig(tasks=[TASK])
    bare_s, trial_s = [], []
    with tempfile.TemporaryDirectory() as d:
        for i in range(n):
            t0 = time.perf_counter()
            env = TerminalEnv(task=str(task.path), prestart=False)
            run_episode(env, OracleAgent(task), seed=i)
            env.close()
            bare_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            assert run_trial(Trial(task, i), config, d)["resolved"]
            trial_s.append(time.perf_counter() - t0)
    return statistics.median(bare_s), statistics.median(trial_s)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=50)
    n = ap.parse_args().trials
    rows = [
        ("bare env, reused", 1, bare(n, reuse=True)),
        ("bare env, fresh", 1, bare(n, reuse=False)),
        ("t1env eval", 1, harness(n, 1)),
        ("t1env eval", 2, harness(n, 2)),
    ]
    base = rows[1][2] / n
    print(f"oracle on {TASK}, {n} trials each\n")
    print("| loop | concurrency | wall (s) | per trial (ms) | vs bare env, fresh |")
    print("|---|---|---|---|---|")
    for name, c, wall in rows:
        per = wall / n
        print(f"| {name} | {c} | {wall:.1f} | {per * 1000:.0f} | {per / base:.2f}x |")
    b, t = interleaved(n)
    print(f"\ninterleaved, {n} pairs\n")
    print("| loop | median per trial (ms) |")
    print("|---|---|")
    print(f"| bare env, fresh | {b * 1000:.0f} |")
    print(f"| harness trial (run_trial) | {t * 1000:.0f} (+{(t - b) * 1000:.0f}) |")


if __name__ == "__main__":
    main()
