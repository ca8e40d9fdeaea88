"""Benchmark: what calling the agent's code through t1check costs a check, against loading it in process.

A check that used to import the agent's module (``spec_from_file_location``) now starts a child
``python3 -I`` per check (:func:`t1check.agent_module`) and pays a pipe round trip per call, or one for a
whole ``map`` / driver. This prints, for a small module like ``py-fix-roman``'s: the in-process load and
call (the baseline, measured in the same run), the child's start + close, one call, and the per-input cost
of ``map`` over 3999 inputs: wall clock, and CPU time of both processes (a number that a loaded machine
does not inflate). Run on the host (the sandbox adds nothing to these two processes).

    python bench/t1check_calls.py [--rounds 20] [--python /usr/bin/python3]
"""

from __future__ import annotations

import argparse
import importlib.util
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from t1env.resources import data_dir

ROMAN = """
def to_roman(n):
    if type(n) is not int or not 1 <= n <= 3999:
        raise ValueError(n)
    out = []
    for v, s in [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"),
                 (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]:
        while n >= v:
            out.append(s)
            n -= v
    return "".join(out)
"""


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cpu() -> float:
    """CPU seconds of this process and of its children that have ended (the t1check child, once closed)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn, rounds: int, per: int = 1) -> tuple[list[float], float]:
    """Wall seconds of each round, and the mean CPU seconds of a round (each divided by ``per``)."""
    out, c0 = [], cpu()
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) / per)
    return out, (cpu() - c0) / rounds / per


def row(what: str, measured: tuple[list[float], float], unit: float, label: str) -> str:
    xs, c = [x / unit for x in measured[0]], measured[1] / unit
    return f"| {what} | {min(xs):.1f} | {statistics.median(xs):.1f} | {max(xs):.1f} | {c:.1f} | {label} |"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument(
        "--python",
        default="/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable,
        help="the child's interpreter (default: Debian's, the local backend's sandbox python3)",
    )
    args = ap.parse_args()
    print(f"child interpreter: {args.python}")
    t1check = load(data_dir("verifiers") / "t1check.py", "t1check")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "roman.py"
        path.write_text(ROMAN)
        ns = list(range(1, 4000))
        mod = load(path, "roman_in_process")
        rows = [row("in process: load the module", timed(lambda: load(path, "roman"), args.rounds), 1e-3, "ms")]
        rows.append(row("in process: one call", timed(lambda: mod.to_roman(1994), args.rounds), 1e-6, "µs"))

        def start_close():
            with t1check.agent_module(str(path), python=args.python) as m:
                m.to_roman(1)

        started = timed(start_close, args.rounds)
        rows.append(row("t1check: start, one call, close", started, 1e-3, "ms"))
        for what, fn, per in [
            ("t1check: one call", lambda m: m.to_roman(1994), 1),
            ("t1check: map over 3999 inputs, per input", lambda m: m.map("to_roman", ns), len(ns)),
        ]:
            c0 = cpu()
            with t1check.agent_module(str(path), python=args.python) as m:
                walls, _ = timed(lambda: fn(m), args.rounds * 10, per)
            # the child's CPU counts once it has ended: the block's CPU, less a start and close, per call
            rows.append(row(what, (walls, (cpu() - c0 - started[1]) / (args.rounds * 10 * per)), 1e-6, "µs"))
    print("\nwall clock min / median / max; CPU: mean of this process and the t1check child together")
    print("\n| what | min | median | max | CPU | unit |\n|---|---:|---:|---:|---:|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
