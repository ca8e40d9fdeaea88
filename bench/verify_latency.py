"""Benchmark: verification latency of one task (default ``hello-file``) on the local and the Docker backend.

Each run: reset, the oracle solves the task, then ``env.step({"submit": True})`` is timed (the checks run
in the verifier: separate mode ends the agent first). Prints min / median / max of the submit step and
of ``info["verify_duration"]`` (t1env.verify's own clock), and the number of checks, so that the cost
per check of the verifier's per-check processes can be read from two tasks' numbers.

    python bench/verify_latency.py [--runs 10] [--task hello-file] [--backends local,docker]

To compare with another checkout, run it from there (``PYTHONPATH=CHECKOUT python CHECKOUT/bench/...``
or this file with ``PYTHONPATH`` pointing at the other checkout: it imports whatever ``t1env`` is first
on the path, and says which).
"""

from __future__ import annotations

import argparse
import statistics
import time

import t1env
from t1env.agents import oracle_command
from t1env.env import TerminalEnv
from t1env.registry import get_task


def stats(xs: list[float]) -> str:
    xs = [x * 1e3 for x in xs]
    return f"{min(xs):.0f} | {statistics.median(xs):.0f} | {max(xs):.0f}"


def runs(backend: str, task: str, n: int) -> tuple[list[float], list[float], int]:
    solve = oracle_command(get_task(task))
    env = TerminalEnv(task=task, backend=backend, prestart=False)
    step, inner, total = [], [], 0
    try:
        for i in range(n + 1):
            env.reset(seed=i)
            env.step({"command": solve, "timeout": 120})
            t0 = time.perf_counter()
            *_, info = env.step({"submit": True})
            dt = time.perf_counter() - t0
            assert info["resolved"], info
            total = info["total"]
            if i:  # the first run warms caches (runtime bundle, imports, page cache)
                step.append(dt)
                inner.append(info["verify_duration"])
    finally:
        env.close()
    return step, inner, total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--task", default="hello-file")
    ap.add_argument("--backends", default="local,docker")
    args = ap.parse_args()
    print(f"t1env from {t1env.__file__}")
    print("\n| backend | task | checks | submit ms (min / median / max) | verify_duration ms (min / median / max) | runs |")
    print("|---|---|---:|---|---|---:|")
    for backend in args.backends.split(","):
        step, inner, total = runs(backend, args.task, args.runs)
        print(f"| {backend} | {args.task} | {total} | {stats(step)} | {stats(inner)} | {len(step)} |", flush=True)


if __name__ == "__main__":
    main()
