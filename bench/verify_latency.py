"""Benchmark: verification latency of one task (default ``hello-file``) on the local and the Docker backend.

Each run: reset, the oracle solves the task, then ``env.step({"submit": True})`` is timed (the checks run
in the verifier: separate mode ends the agent first). Prints min / median / max of the submit step and
of ``info["verify_duration"]`` (t1env.episode.verify's own clock), and the number of checks, so that the cost
per check of the verifier's per-check processes can be read from two tasks' numbers.

    python bench/verify_latency.py [--runs 10] [--task hello-file] [--backends local,docker]

To compare with another checkout, run this file with ``PYTHONPATH`` pointing at the other checkout: it
imports whatever ``t1env`` is first on the path, and says which. On a shared machine the load moves between
runs; ``--runtime OLD_RUN_CHECKS_PY`` compares the verifier runtime alone instead, in one loop that alternates
the two: ``verifiers/run_checks.py`` and OLD (e.g. ``git show REV:verifiers/run_checks.py > /tmp/old.py``) each
run by ``python3 -I`` on the host over a tests folder of 1, 5 and 20 trivial checks, with their wall and CPU
time (the process and its children) per run; the CPU time per extra check is the cost of a check's process.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import t1env
from t1env.agent.reference import oracle_command
from t1env.env import TerminalEnv
from t1env.episode.verify import runtime_bundle
from t1env.registry import get_task


def stats(xs: list[float]) -> str:
    xs = [x * 1e3 for x in xs]
    return f"{min(xs):.0f} / {statistics.median(xs):.0f} / {max(xs):.0f}"


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


def runtime_runs(old: Path, n: int) -> None:
    """The verifier runtime alone, old and new alternating: wall and CPU ms for 1, 5 and 20 trivial checks."""
    bundle = runtime_bundle()
    py = shutil.which("python3", path="/usr/bin:/bin") or sys.executable  # the local backend's python3
    print(f"runtime: {py} -I, new = {bundle / 'run_checks.py'}, old = {old}")
    print("\n| runtime | checks | wall ms (median) | CPU ms (median) | runs |\n|---|---:|---:|---:|---:|")
    cpu_at: dict[tuple[str, int], float] = {}
    for count in (1, 5, 20):
        d = Path(tempfile.mkdtemp(prefix="t1-bench-"))
        for name in ("pytest.zip", "pytest.ini", "t1check.py"):
            if (bundle / name).is_file():
                shutil.copy(bundle / name, d / name)
        (d / "tests").mkdir()
        (d / "tests" / "test_x.py").write_text("".join(f"def test_{i}():\n    assert True\n" for i in range(count)))
        shutil.copy(old, d / "old.py")
        shutil.copy(bundle / "run_checks.py", d / "run_checks.py")
        checks = json.dumps([f"test_x.py::test_{i}" for i in range(count)])
        got: dict[str, tuple[list[float], list[float]]] = {"old": ([], []), "new": ([], [])}
        for _ in range(n):
            for which, script, extra in (("old", "old.py", []), ("new", "run_checks.py", ["--checks", checks])):
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                r = subprocess.run(
                    [py, "-I", "-B", str(d / script), "--pytest-zip", str(d / "pytest.zip"), *extra, str(d / "tests")],
                    capture_output=True,
                )
                wall = time.perf_counter() - t0
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                passed = r.stdout.count(b'"when": "call", "outcome": "passed"')
                assert passed == count, (which, r.stdout[-500:], r.stderr[-2000:])
                got[which][0].append(wall)
                got[which][1].append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
        shutil.rmtree(d, ignore_errors=True)
        for which in ("old", "new"):
            wall, cpu = (statistics.median(x) * 1e3 for x in got[which])
            cpu_at[(which, count)] = cpu
            print(f"| {which} | {count} | {wall:.0f} | {cpu:.0f} | {n} |", flush=True)
    for which in ("old", "new"):
        per = (cpu_at[(which, 20)] - cpu_at[(which, 1)]) / 19
        print(f"{which}: {per:.1f} ms CPU per extra check")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--task", default="hello-file")
    ap.add_argument("--backends", default="local,docker")
    ap.add_argument("--runtime", type=Path, help="compare the verifier runtime alone with this older run_checks.py")
    args = ap.parse_args()
    if args.runtime:
        return runtime_runs(args.runtime, args.runs)
    print(f"t1env from {t1env.__file__}")
    print(
        "\n| backend | task | checks | submit ms (min / median / max) | verify_duration ms (min / median / max) "
        "| runs |"
    )
    print("|---|---|---:|---|---|---:|")
    for backend in args.backends.split(","):
        step, inner, total = runs(backend, args.task, args.runs)
        print(f"| {backend} | {args.task} | {total} | {stats(step)} | {stats(inner)} | {len(step)} |", flush=True)


if __name__ == "__main__":
    main()
