"""Shell under load: a 1 GB command, 10,000 commands in one episode, and latency late in long episodes.

Three measurements through the Gymnasium env (``env.step``), per backend:

* **1 GB of output** (``yes | head -c 1G``): the driver's RSS before, its peak while the command runs,
  after; the observation's size (bounded: head and tail kept, the middle dropped) and whether the next
  command works.
* **10,000 tiny commands in one episode**: driver RSS after the first 1,000 and after all of them, and
  the round-trip latency.
* **300-turn episodes**: round-trip latency p50/p99 of turns 1-10 against turns 290-300, side by side
  (pooled over ``--episodes`` episodes): a session that slows down as it ages shows here.

    python bench/shell_load.py [--backends local,docker] [--gb 1] [--commands 10000] [--turns 300]
                               [--episodes 5] [--markdown /tmp/shell-load.md]

Prints markdown tables. Memory bounds (not timings) are asserted by ``tests/t1env/test_shell_load.py``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from t1env.env import TerminalEnv  # noqa: E402
from t1env.tools import leaks  # noqa: E402


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1e3


def make_env(backend: str, max_turns: int) -> TerminalEnv:
    return TerminalEnv(task="hello-file", backend=backend, max_turns=max_turns, agent_timeout=24 * 3600.0)


def huge_output(backend: str, gb: float) -> dict:
    env = make_env(backend, 10)
    try:
        env.reset(seed=0)
        env.step("true")
        before = leaks.rss_mb()
        leaks.reset_peak_rss()
        t0 = time.perf_counter()
        obs, _, _, _, info = env.step({"command": f"yes | head -c {int(gb * 1024)}M", "timeout": 3600})
        took = time.perf_counter() - t0
        peak, after = leaks.peak_rss_mb(), leaks.rss_mb()
        nxt, *_ = env.step("echo next-ok")
        return {
            "backend": backend,
            "gb": gb,
            "seconds": took,
            "rss_before": before,
            "rss_peak": peak,
            "rss_after": after,
            "obs_chars": len(obs),
            "obs_cap": env.observation_space.max_length,
            "truncated": info["output_truncated"],
            "exit_code": info["exit_code"],
            "next_ok": nxt.strip() == "next-ok",
        }
    finally:
        env.close()


def many_commands(backend: str, n: int) -> dict:
    env = make_env(backend, n + 10)
    try:
        env.reset(seed=0)
        lat = []
        rss_1k = None
        rss_start = leaks.rss_mb()
        for i in range(n):
            t0 = time.perf_counter()
            obs, _, _, trunc, _ = env.step(f"echo {i}")
            lat.append(time.perf_counter() - t0)
            assert obs.strip() == str(i) and not trunc, (i, obs[:200])
            if i + 1 == min(1000, n):
                rss_1k = leaks.rss_mb()
        env.step("X=still-here")
        final, *_ = env.step("echo $X")
        return {
            "backend": backend,
            "commands": n,
            "rss_start": rss_start,
            "rss_1k": rss_1k,
            "rss_end": leaks.rss_mb(),
            "p50": pct(lat, 0.5),
            "p99": pct(lat, 0.99),
            "total_s": sum(lat),
            "works_after": final.strip() == "still-here",
        }
    finally:
        env.close()


def long_episodes(backend: str, turns: int, episodes: int) -> dict:
    env = make_env(backend, turns + 10)
    early: list[float] = []
    late: list[float] = []
    try:
        for ep in range(episodes):
            env.reset(seed=ep)
            for t in range(1, turns + 1):
                t0 = time.perf_counter()
                env.step(f"echo turn-{t}")
                dt = time.perf_counter() - t0
                if t <= 10:
                    early.append(dt)
                elif t >= turns - 10:
                    late.append(dt)
    finally:
        env.close()
    return {
        "backend": backend,
        "turns": turns,
        "episodes": episodes,
        "early_p50": pct(early, 0.5),
        "early_p99": pct(early, 0.99),
        "late_p50": pct(late, 0.5),
        "late_p99": pct(late, 0.99),
        "early_n": len(early),
        "late_n": len(late),
    }


def tables(huge: list[dict], many: list[dict], long: list[dict]) -> str:
    out = []
    if huge:
        out += [
            "### 1 GB of output in one command",
            "",
            "| backend | output | seconds | RSS before MiB | RSS peak MiB | RSS after MiB | observation chars (cap) | truncated | next command works |",
            "|---|---:|---:|---:|---:|---:|---:|---|---|",
        ]
        for r in huge:
            out.append(
                f"| {r['backend']} | {r['gb']:g} GiB | {r['seconds']:.1f} | {r['rss_before']:.1f} | {r['rss_peak']:.1f} | "
                f"{r['rss_after']:.1f} | {r['obs_chars']} ({r['obs_cap']}) | {r['truncated']} | {r['next_ok']} |"
            )
        out.append("")
    if many:
        out += [
            "### Tiny commands in one episode",
            "",
            "| backend | commands | RSS at start MiB | after 1,000 | after all | growth after 1,000 | p50 ms | p99 ms | total s | works after |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for r in many:
            out.append(
                f"| {r['backend']} | {r['commands']} | {r['rss_start']:.1f} | {r['rss_1k']:.1f} | {r['rss_end']:.1f} | "
                f"{r['rss_end'] - r['rss_1k']:+.1f} | {r['p50']:.2f} | {r['p99']:.2f} | {r['total_s']:.1f} | {r['works_after']} |"
            )
        out.append("")
    if long:
        out += [
            "### Round trip early and late in long episodes (env.step('echo ...'), ms)",
            "",
            "| backend | turns x episodes | turns 1-10 p50 | turns 1-10 p99 | last 10 turns p50 | last 10 turns p99 | samples |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for r in long:
            out.append(
                f"| {r['backend']} | {r['turns']} x {r['episodes']} | {r['early_p50']:.2f} | {r['early_p99']:.2f} | "
                f"{r['late_p50']:.2f} | {r['late_p99']:.2f} | {r['early_n']} / {r['late_n']} |"
            )
        out.append("")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backends", default="local,docker", help="comma-separated: local, docker")
    ap.add_argument("--gb", type=float, default=1.0, help="GiB printed by the huge command (0: skip)")
    ap.add_argument("--commands", type=int, default=10_000, help="tiny commands in one episode (0: skip)")
    ap.add_argument("--turns", type=int, default=300, help="turns per long episode (0: skip)")
    ap.add_argument("--episodes", type=int, default=5, help="long episodes per backend")
    ap.add_argument("--markdown", help="also write the tables here")
    args = ap.parse_args()
    huge, many, long = [], [], []
    for backend in [b for b in args.backends.split(",") if b]:
        if args.gb:
            huge.append(huge_output(backend, args.gb))
            print(huge[-1], file=sys.stderr, flush=True)
        if args.commands:
            many.append(many_commands(backend, args.commands))
            print(many[-1], file=sys.stderr, flush=True)
        if args.turns:
            long.append(long_episodes(backend, args.turns, args.episodes))
            print(long[-1], file=sys.stderr, flush=True)
    text = tables(huge, many, long)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)


if __name__ == "__main__":
    main()
