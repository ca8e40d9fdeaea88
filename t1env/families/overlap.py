"""How held-out a family's test split is: train/test overlap of oracle answers and instructions.

A family's test split is meant to measure what a policy learned, not what it recalled. If a test
instance's oracle ``solve.sh`` is byte-identical to a train instance's, a policy that memorised that
train answer resolves the "held-out" instance without reading anything; if its instruction appears
verbatim in train, the policy has seen the exact prompt. :func:`split_overlap` measures both, over the
first ``n_train`` train and ``n_test`` test seeds, from :meth:`Family.build` alone (no sandbox, no files):

* ``answers``: the fraction of test instances whose oracle script equals some train instance's;
* ``instructions``: the same for the instruction text;
* ``answers_near`` / ``instructions_near``: the same after every run of digits is replaced by ``0``, a
  cheap near-duplicate measure (two scripts that differ only in numbers count as one).

``docs/families.md`` states the measured numbers per family, and
``tests/t1env/families/test_split_overlap.py`` fails when a generator's overlap rises above them.
Whether an oracle answer *works* on another instance (it may differ in bytes and still solve it) is
the oracle-transfer rate, which needs a sandbox: ``bench/family_transfer.py``.

Example:
    >>> o = split_overlap("chain", n_train=20, n_test=5)
    >>> o.answers, o.instructions          # chain: no shared pair, one instruction for all
    (0.0, 1.0)

Run ``python -m t1env.families.overlap`` for the table over every family.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import asdict, dataclass

from t1env.families import FAMILIES, Family, get_family, split_seed

N_TRAIN, N_TEST = 200, 50  # the sample docs/families.md reports and the test checks
_DIGITS = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class SplitOverlap:
    """Fractions (0..1) of the ``n_test`` test instances that share something with one of ``n_train`` train ones."""

    family: str
    n_train: int
    n_test: int
    answers: float  # oracle solve.sh byte-identical to a train instance's
    instructions: float  # instruction byte-identical to a train instance's
    answers_near: float  # the same with every run of digits replaced by 0
    instructions_near: float


def _texts(fam: Family, split: str, n: int) -> tuple[list[str], list[str]]:
    answers, instructions = [], []
    for k in range(n):
        seed = split_seed(split, k)
        inst = fam.build(fam.rng(seed), seed)
        answers.append(inst.preamble + inst.solve.strip())
        instructions.append(inst.instruction.strip())
    return answers, instructions


def _shared(test: list[str], train: list[str], norm=lambda s: s) -> float:
    seen = {norm(t) for t in train}
    return round(sum(norm(t) in seen for t in test) / len(test), 4)


def _no_digits(text: str) -> str:
    return _DIGITS.sub("0", text)


def split_overlap(family: str | Family, n_train: int = N_TRAIN, n_test: int = N_TEST) -> SplitOverlap:
    """Overlap of the first ``n_test`` test instances of ``family`` (a name or a Family) with its first ``n_train``
    train instances."""
    if n_train < 1 or n_test < 1:
        raise ValueError(f"n_train and n_test must be >= 1, got {n_train} and {n_test}")
    fam = family if isinstance(family, Family) else get_family(family)
    train_a, train_i = _texts(fam, "train", n_train)
    test_a, test_i = _texts(fam, "test", n_test)
    return SplitOverlap(
        family=fam.name,
        n_train=n_train,
        n_test=n_test,
        answers=_shared(test_a, train_a),
        instructions=_shared(test_i, train_i),
        answers_near=_shared(test_a, train_a, _no_digits),
        instructions_near=_shared(test_i, train_i, _no_digits),
    )


def table(rows: list[SplitOverlap]) -> str:
    """A markdown table of the overlaps, in percent."""
    out = [
        "| family | answers | instructions | answers, digits ignored | instructions, digits ignored |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| `{r.family}` | {r.answers:.0%} | {r.instructions:.0%} | {r.answers_near:.0%} "
            f"| {r.instructions_near:.0%} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m t1env.families.overlap", description=__doc__.split("\n\n")[0])
    ap.add_argument("families", nargs="*", help="families to measure (default: all)")
    ap.add_argument("--train", type=int, default=N_TRAIN, help=f"train instances (default {N_TRAIN})")
    ap.add_argument("--test", type=int, default=N_TEST, help=f"test instances (default {N_TEST})")
    ap.add_argument("--json", action="store_true", help="one JSON object per family instead of the table")
    args = ap.parse_args(argv)
    rows = [split_overlap(f, args.train, args.test) for f in (args.families or sorted(FAMILIES))]
    if args.json:
        print("\n".join(json.dumps(asdict(r)) for r in rows))
    else:
        print(f"train/test overlap over the first {args.train} train and {args.test} test instances\n")
        print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
