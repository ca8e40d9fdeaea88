"""Benchmark: a task's oracle typed one command per turn, the way SFT's ``lines`` turns type it.

``t1env validate`` runs ``solution/solve.sh`` as one command; a long-horizon task (the ``project`` family, issue 28)
claims more: that its oracle is a chain of whole commands, each one turn, and that it earns full marks played that
way. This plays each task's typed oracle (:func:`t1env.agent.reference.oracle_command` with ``typed=True``: one
line, one ``command`` action), then submits, and prints the number of command turns, the reward and the per-command
wall time (mean and slowest): what one such turn costs in the environment.

    python bench/oracle_turns.py project@0 project@1 [--backend local|docker]

On the loaded 2-core development machine (load about 12): ``project@0`` and ``project@1`` took 31 command turns
each and scored 14/14; a command took 0.039 s and 0.050 s on average, at most 0.26 s and 0.39 s (a ``python3
build.py``), on the local backend, and 0.143 s and 0.107 s on average, at most 1.18 s and 0.74 s, on Docker.
"""

from __future__ import annotations

import argparse
import time

from t1env.agent.reference import oracle_command
from t1env.env import TerminalEnv
from t1env.registry import get_task


def play(ref: str, backend: str) -> dict:
    task = get_task(ref)
    lines = oracle_command(task, typed=True).splitlines()
    env = TerminalEnv(task=str(task.path), backend=backend)
    try:
        env.reset(seed=0)
        times = []
        for line in lines:
            t0 = time.monotonic()
            _, _, terminated, truncated, _ = env.step({"command": line})
            times.append((time.monotonic() - t0, line))
            if terminated or truncated:
                raise RuntimeError(f"{ref}: the episode ended at {line!r} (max_turns {task.spec.limits.max_turns})")
        _, reward, _, _, info = env.step({"submit": True})
    finally:
        env.close()
    slowest = max(times)
    return {
        "task": ref,
        "turns": len(lines),
        "reward": reward,
        "passed": f"{info['passed']}/{info['total']}",
        "mean_s": sum(t for t, _ in times) / len(times),
        "slowest_s": slowest[0],
        "slowest": slowest[1],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tasks", nargs="+", help="task ids or FAMILY@SEED instances")
    ap.add_argument("--backend", default="local", choices=("local", "docker"))
    args = ap.parse_args(argv)
    for ref in args.tasks:
        r = play(ref, args.backend)
        print(
            f"{r['task']} ({args.backend}): {r['turns']} command turns, {r['passed']} checks; per command "
            f"mean {r['mean_s']:.3f} s, slowest {r['slowest_s']:.3f} s ({r['slowest'][:50]})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
