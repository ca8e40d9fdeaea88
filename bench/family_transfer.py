"""Benchmark: oracle transfer between a family's instances, the answer-recall check of docs/families.md.

A family claims the agent must read its observations: an instance's answer should not solve another
instance. This measures it in real sandboxes: an episode of instance B is played in which the agent
types instance A's oracle (``solution/solve.sh``, as ``OracleAgent`` does) and submits. Three kinds of
ordered pairs (A, B), ``--pairs`` of each per family:

* *within train* and *within test*: the split's first instances s0, s1, ... paired s0 -> s1, s1 -> s2, ...;
* *recalled*: B is one of the first test instances and A the train instance (of the first 200) whose
  instruction shares the most words with B's: the answer a policy that memorised train prompts and
  answers would recall for B.

Reported per family: how many transfers earned full marks on B and the mean fraction of B's checks they
passed, beside the no-op agent's mean fraction on the first test instances (what a transfer earns
beyond doing nothing).

The byte-level overlap of answers and instructions needs no sandbox: ``python -m t1env.families.overlap``.

    python bench/family_transfer.py [--pairs 3] [--families logs,git] [--backend local] [--no-nop]

With ``--pairs 5`` (the table in docs/families.md: 20 episodes per family) it took 13 minutes on a loaded 2-core
machine, most of it ``sql``; the default of 3 pairs plays three fifths of those episodes.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time

import t1env
from t1env.agent.reference import oracle_command
from t1env.env import TerminalEnv
from t1env.families import FAMILIES, get_family, split_seed
from t1env.registry import get_task

RECALL_POOL = 200  # train instances a memorising policy is assumed to have seen


def episode(target: str, command: str | None, backend: str) -> tuple[int, int]:
    """Checks passed and total on ``target`` after typing ``command`` (None: submit at once)."""
    env = TerminalEnv(task=target, backend=backend, prestart=False)
    try:
        env.reset()
        if command is not None:
            env.step({"command": command, "timeout": get_task(target).spec.limits.agent_timeout})
        *_, info = env.step({"submit": True})
        return int(info["passed"]), int(info["total"])
    finally:
        env.close()


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9_]+", text.lower()))


def recalled(name: str, test_seed: int) -> int:
    """The train seed (of the first RECALL_POOL) whose instruction shares the most words with the test instance's."""
    fam = get_family(name)
    target = words(fam.build(fam.rng(test_seed), test_seed).instruction)
    best, best_seed = -1.0, 0
    for k in range(RECALL_POOL):
        seed = split_seed("train", k)
        w = words(fam.build(fam.rng(seed), seed).instruction)
        score = len(w & target) / len(w | target)
        if score > best:
            best, best_seed = score, seed
    return best_seed


def transfers(name: str, pairs: list[tuple[int, int]], backend: str) -> str:
    full, frac = 0, []
    for a, b in pairs:
        passed, total = episode(f"{name}@{b}", oracle_command(get_task(f"{name}@{a}")), backend)
        full += passed == total
        frac.append(passed / total)
    return f"{full}/{len(frac)}, {statistics.mean(frac):.0%}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=3, help="ordered pairs of each kind per family (default 3)")
    ap.add_argument("--families", default=",".join(sorted(FAMILIES)), help="comma-separated (default: all)")
    ap.add_argument("--backend", default="local", choices=["local", "docker"])
    ap.add_argument("--no-nop", action="store_true", help="skip the no-op baseline")
    args = ap.parse_args()
    print(f"t1env from {t1env.__file__}; backend {args.backend}; {args.pairs} ordered pairs of each kind per family")
    print("\ncells: transfers with full marks, mean fraction of checks passed\n")
    print("| family | within train | within test | recalled train answer on test | no-op on test |")
    print("|---|---:|---:|---:|---:|")
    t0 = time.perf_counter()
    for name in args.families.split(","):
        cells = []
        for split in ("train", "test"):
            seeds = [split_seed(split, k) for k in range(args.pairs + 1)]
            cells.append(transfers(name, list(zip(seeds, seeds[1:])), args.backend))
        tests = [split_seed("test", k) for k in range(args.pairs)]
        cells.append(transfers(name, [(recalled(name, b), b) for b in tests], args.backend))
        if args.no_nop:
            cells.append("-")
        else:
            nop = [episode(f"{name}@{b}", None, args.backend) for b in tests]
            cells.append(f"{sum(p == t for p, t in nop)}/{len(nop)}, {statistics.mean(p / t for p, t in nop):.0%}")
        print(f"| `{name}` | " + " | ".join(cells) + " |", flush=True)
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
