"""Benchmark: local-sandbox reset, command round trip and verification latency.

Prints a markdown table (min / median / max over repeated runs). Baselines run side by side in
the same process on the same sandbox:

* ``pexpect default`` — the same shell driven with pexpect's default ``delaybeforesend`` (50 ms),
  as most pexpect-based harnesses do;
* ``exec per command`` — a fresh process per command (``nsenter`` + ``bash -c``), the stateless
  alternative to a persistent shell.

Usage: python bench/env_latency.py [--runs N]
Goals (issue 2): local reset <= 25 ms median; command round-trip overhead <= 1 ms median.
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym

import t1env  # noqa: F401
from t1env.agent.reference import oracle_command
from t1env.episode.shell import ShellSession
from t1env.registry import get_task
from t1env.sandbox.local import LocalSandbox


def stats(xs: list[float]) -> tuple[float, float, float]:
    return min(xs) * 1e3, statistics.median(xs) * 1e3, max(xs) * 1e3


def timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    args = ap.parse_args()
    n = args.runs
    rows: list[tuple[str, list[float]]] = []

    cold = gym.make("T1Terminal-v0", task="hello-file", max_turns=100_000, prestart=False)
    cold.reset(seed=0)  # warm imports
    rows.append(("reset, cold: start sandbox + shell, copy files", timed(lambda: cold.reset(seed=0), n)))
    cold.close()

    env = gym.make("T1Terminal-v0", task="hello-file", max_turns=100_000)
    warm = []
    for _ in range(n):
        env.reset(seed=0)
        time.sleep(0.3)  # an episode's worth of agent time: the next sandbox starts meanwhile
        t0 = time.perf_counter()
        env.reset(seed=0)
        warm.append(time.perf_counter() - t0)
        time.sleep(0.3)
    rows.append(("reset, prestarted (default): copy files into a ready sandbox", warm))
    rows.append(("env.step('true') through gymnasium", timed(lambda: env.step("true"), n * 10)))

    solve = oracle_command(get_task("hello-file"))
    verify_times = []
    for _ in range(max(5, n // 5)):
        env.reset(seed=0)
        env.step(solve)
        t0 = time.perf_counter()
        *_, info = env.step({"submit": True})
        verify_times.append(time.perf_counter() - t0)
        assert info["resolved"]
    rows.append(("verify (5 checks, tests copied in, pytest run)", verify_times))
    env.close()

    with LocalSandbox() as box:
        rows.append(("sandbox start + stop (bwrap)", timed(lambda: LocalSandbox().__enter__().stop(), n)))
        sh = ShellSession(box)
        sh.start()
        sh.run("true")
        rows.append(("t1 ShellSession.run('true') round trip", timed(lambda: sh.run("true"), n * 10)))
        sh.close()

        # baseline 1: same shell, pexpect's default 50 ms delaybeforesend, prompt matching
        slow = ShellSession(box)
        slow.start()
        assert slow.child is not None
        slow.child.delaybeforesend = 0.05
        rows.append(("baseline: pexpect default delaybeforesend", timed(lambda: slow.run("true"), max(10, n // 2))))
        slow.close()

        # baseline 2: a fresh process per command (no persistent state)
        rows.append(
            (
                "baseline: exec per command (nsenter + bash -c)",
                timed(lambda: box.exec(["bash", "-c", "true"], timeout=10), n),
            )
        )

    print("\n| operation | min ms | median ms | max ms | runs |\n|---|---:|---:|---:|---:|")
    for name, xs in rows:
        lo, med, hi = stats(xs)
        print(f"| {name} | {lo:.2f} | {med:.2f} | {hi:.2f} | {len(xs)} |")
    rt = statistics.median(dict(rows)["t1 ShellSession.run('true') round trip"]) * 1e3
    base = statistics.median(dict(rows)["baseline: pexpect default delaybeforesend"]) * 1e3
    reset = statistics.median(warm) * 1e3
    print(f"\nround trip: {rt:.2f} ms median ({base / rt:.0f}x faster than the pexpect-default baseline); goal <= 1 ms")
    print(f"reset: {reset:.1f} ms median; goal <= 25 ms")


if __name__ == "__main__":
    main()
