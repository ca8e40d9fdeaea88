"""regex: extract every valid item of one kind from noisy text, with near-miss distractors.

Kinds: order ids, ISO dates, IPv4 addresses, hex colours, semantic versions. Each instance mixes
valid items (some repeated) with near misses (wrong length, out-of-range fields, leading zeros,
glued to other characters). The agent lists the distinct items in order of first appearance and
counts all occurrences.

The splits draw from disjoint pools (``docs/families.md``): train items are order ids, ISO dates, IPv4
addresses, hex colours or versions; test items are held-out kinds (MAC addresses, 24-hour times, issue
keys), with their own file names and instruction wording.
"""

from __future__ import annotations

import hashlib
import random
import re

from t1env.families.base import Family, Instance, split_of_seed

B0, B1 = r"(?<![A-Za-z0-9._-])", r"(?![A-Za-z0-9._-])"
OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
NUM = r"(?:0|[1-9][0-9]*)"
KINDS = {
    "order-id": (
        r"ORD-[0-9]{6}-[A-Z]",
        "an order id: `ORD-`, exactly 6 digits, `-`, one uppercase letter (e.g. `ORD-004211-K`)",
    ),
    "iso-date": (
        r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])",
        "a date `YYYY-MM-DD`: 4-digit year, month `01`-`12`, day `01`-`31` (days are not checked against the month)",
    ),
    "ipv4": (
        rf"{OCTET}\.{OCTET}\.{OCTET}\.{OCTET}",
        "an IPv4 address: four decimal numbers 0-255 joined by dots, no leading zeros (`0` itself is fine)",
    ),
    "hex-colour": (r"#[0-9a-fA-F]{6}", "a hex colour: `#` then exactly 6 hex digits (either case)"),
    "semver": (
        rf"v{NUM}\.{NUM}\.{NUM}",
        "a version `vMAJOR.MINOR.PATCH`: lowercase `v`, three non-negative integers without leading zeros",
    ),
}
HELD_OUT = {  # the test split's kinds
    "mac": (
        r"[0-9a-f]{2}(?::[0-9a-f]{2}){5}",
        "a MAC address: six pairs of lowercase hex digits joined by `:` (e.g. `3c:22:fb:0a:91:7e`)",
    ),
    "time": (
        r"(?:[01][0-9]|2[0-3]):[0-5][0-9]",
        "a 24-hour time `HH:MM`: hour `00`-`23` and minute `00`-`59`, each exactly two digits (e.g. `07:45`)",
    ),
    "issue-key": (
        r"[A-Z]{2,5}-[1-9][0-9]{0,4}",
        "an issue key: 2 to 5 uppercase letters, `-`, then a number from 1 to 99999 without leading zeros "
        "(e.g. `OPS-1742`)",
    ),
}
POOLS = {  # per split: kinds, source files, output files, count files
    "train": (
        KINDS,
        ["notes.txt", "mail.log", "dump.txt", "chat.log", "tickets.txt"],
        ["matches.txt", "found.txt", "items.txt", "{kind}s.txt"],
        ["count.txt", "total.txt", "occurrences.txt"],
    ),
    "test": (
        HELD_OUT,
        ["journal.txt", "syslog.txt", "export.log", "thread.txt", "report.txt"],
        ["hits.txt", "extracted.txt", "valid.txt", "{kind}-list.txt"],
        ["n.txt", "how-many.txt", "tally.txt"],
    ),
}
FILLER = (
    "the a service reported value during nightly run for customer ticket batch at with note see item "
    "retry queue owner shipped pending closed opened review status ok failed later node"
).split()
SEPS = [(" ", " "), ("(", ")"), ("[", "]"), ('"', '"'), (" ", ","), (" ", ";"), ("<", ">")]

ORACLE = r"""
import re, sys
pat = re.compile(r"(?<![A-Za-z0-9._-])(?:" + sys.argv[1] + r")(?![A-Za-z0-9._-])")
found = pat.findall(open("/app/data/" + sys.argv[2], encoding="utf-8").read())
uniq = list(dict.fromkeys(found))
open("/app/" + sys.argv[3], "w").write("".join(m + "\n" for m in uniq))
open("/app/" + sys.argv[4], "w").write(f"{len(found)}\n")
"""

TESTS = r"""
import hashlib
from pathlib import Path

NOTES = Path("/app/data") / SOURCE


def matches():
    assert hashlib.sha256(NOTES.read_bytes()).hexdigest() == NOTES_SHA256, f"data/{SOURCE} was modified"
    return [line.strip() for line in (Path("/app") / OUT).read_text().splitlines() if line.strip()]


def test_no_false_positives():
    got = matches()
    assert got, f"{OUT} is empty"
    wrong = [m for m in got if m not in EXPECTED]
    assert not wrong, f"not valid items: {wrong[:5]}"


def test_all_items_found():
    missing = [m for m in EXPECTED if m not in matches()]
    assert not missing, f"missed {len(missing)}: {missing[:5]}"


def test_distinct_in_order_of_first_appearance():
    assert matches() == EXPECTED


def test_total_occurrences():
    assert hashlib.sha256(NOTES.read_bytes()).hexdigest() == NOTES_SHA256
    assert (Path("/app") / COUNT).read_text().strip() == str(TOTAL)
"""


def _valid(kind: str, rng: random.Random) -> str:
    if kind == "order-id":
        return f"ORD-{rng.randint(0, 999999):06d}-{rng.choice('ABCDEFGHJKLMNPQRSTUVWXYZ')}"
    if kind == "iso-date":
        return f"{rng.randint(1990, 2030)}-{rng.randint(1, 12):02d}-{rng.randint(1, 31):02d}"
    if kind == "ipv4":
        return ".".join(
            str(rng.choice([rng.randint(0, 255), rng.randint(0, 9), rng.randint(200, 255)])) for _ in range(4)
        )
    if kind == "hex-colour":
        return "#" + "".join(rng.choice("0123456789abcdefABCDEF") for _ in range(6))
    if kind == "mac":
        return ":".join(f"{rng.randint(0, 255):02x}" for _ in range(6))
    if kind == "time":
        return f"{rng.randint(0, 23):02d}:{rng.choice([rng.randint(0, 59), 0, 30, 15, 45]):02d}"
    if kind == "issue-key":
        project = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(rng.randint(2, 5)))
        return f"{project}-{rng.choice([rng.randint(1, 99), rng.randint(100, 99999)])}"
    return f"v{rng.choice([0, 1, 2, rng.randint(3, 40)])}.{rng.randint(0, 30)}.{rng.randint(0, 120)}"


def _near_miss(kind: str, rng: random.Random) -> str:
    v = _valid(kind, rng)
    glue = rng.choice(["x", "7", "-", "_", "."])
    options = [glue + v, v + glue]
    if kind == "order-id":
        options += [
            f"ORD-{rng.randint(0, 99999):05d}-Q",
            v.lower(),
            v[:-1] + "q",
            f"ORD-{rng.randint(10**6, 10**7 - 1)}-Z",
        ]
    elif kind == "iso-date":
        y = rng.randint(1990, 2030)
        options += [
            f"{y}-{rng.randint(13, 19)}-0{rng.randint(1, 9)}",
            f"{y}-0{rng.randint(1, 9)}-{rng.randint(32, 39)}",
            f"{y}-{rng.randint(1, 9)}-1{rng.randint(0, 9)}",
            f"{y}-00-1{rng.randint(0, 9)}",
        ]
    elif kind == "ipv4":
        a = [str(rng.randint(0, 255)) for _ in range(4)]
        options += [
            ".".join(a[:3]),
            ".".join([str(rng.randint(256, 999))] + a[1:]),
            ".".join(a[:3] + ["0" + str(rng.randint(1, 99))]),
            ".".join(a) + "." + str(rng.randint(0, 9)),
        ]
    elif kind == "hex-colour":
        options += [v[:-1], v + rng.choice("0a"), "#" + "".join(rng.choice("ghxyz0123") for _ in range(6)), v[1:]]
    elif kind == "mac":
        options += [v.upper(), v[:-3], v.replace(":", "-"), v[:-1] + rng.choice("ghz")]
    elif kind == "time":
        h, m = v.split(":")
        options += [
            f"{rng.randint(24, 29)}:{m}",
            f"{h}:{rng.randint(60, 99)}",
            f"{rng.randint(1, 9)}:{m}",
            f"{h}:{m[0]}",
        ]
    elif kind == "issue-key":
        project, num = v.split("-")
        options += [
            v.lower(),
            f"{project}-0{num}",
            f"{rng.choice('ABCXYZ')}-{num}",
            f"{project}-{num}{rng.randint(100000, 999999)}",
        ]
    else:
        options += [
            v.upper(),
            v[1:] if rng.random() < 0.5 else "v0" + v[1:].replace(".", ".0", 1),
            f"v{rng.randint(0, 9)}.{rng.randint(0, 9)}",
            "v" + str(rng.randint(1, 9)) + ".0" + str(rng.randint(1, 9)) + ".1",
        ]
    return rng.choice(options)


class RegexExtract(Family):
    name = "regex"
    category = "text-processing"
    difficulty = "easy"
    description = (
        "Extract distinct valid items (5 kinds: ids, dates, IPs, colours, versions) from text with near misses."
    )

    def build(self, rng: random.Random, seed: int) -> Instance:
        split = split_of_seed(seed)
        kinds, sources, outs, counts = POOLS[split]
        kind = rng.choice(sorted(kinds))
        source = rng.choice(sources)
        out = rng.choice(outs).format(kind=kind)
        count = rng.choice(counts)
        body, desc = kinds[kind]
        pat = re.compile(B0 + "(?:" + body + ")" + B1)
        pool = [_valid(kind, rng) for _ in range(rng.randint(12, 30))]
        lines = []
        for _ in range(rng.randint(60, 140)):
            words = [rng.choice(FILLER) for _ in range(rng.randint(4, 12))]
            for _ in range(rng.choice([0, 0, 1, 1, 2])):
                tok = rng.choice(pool) if rng.random() < 0.6 else _near_miss(kind, rng)
                left, right = rng.choice(SEPS)
                words.insert(rng.randint(0, len(words)), f"{left.strip()}{tok}{right.strip()}")
            lines.append(" ".join(words))
        text = "\n".join(lines) + "\n"
        found = pat.findall(text)
        if not found:  # never an empty answer
            text += f"final entry {pool[0]} end\n"
            found = pat.findall(text)
        expected = list(dict.fromkeys(found))

        instruction = (
            (
                f"`/app/data/{source}` is free text that mentions items of one kind: {desc}.\n"
                "An item counts only when it is not directly preceded or followed by a letter, a digit, `.`, `-` or `_`;\n"
                "the text also holds near misses that are not valid items.\n\n"
                f"1. Write every distinct valid item to `/app/{out}`, one per line, in order of first appearance.\n"
                f"2. Write the total number of valid occurrences (repeats included) to `/app/{count}`.\n\n"
                f"Do not modify `{source}`.\n"
            )
            if split == "train"
            else (
                f"Somewhere in the free text of `/app/data/{source}` there are mentions of {desc}. Only mentions that no\n"
                "letter, digit, `.`, `-` or `_` touches on either side count as valid; the text also contains look-alikes\n"
                "that are not valid.\n\n"
                f"* `/app/{out}`: each distinct valid item once, one per line, ordered by where it first occurs;\n"
                f"* `/app/{count}`: how many valid occurrences there are in total, counting repeats.\n\n"
                f"Leave `{source}` as it is.\n"
            )
        )
        solve = (
            f"cat > /tmp/extract.py <<'PY'\n{ORACLE.strip()}\nPY\n"
            f"python3 /tmp/extract.py '{body}' {source} {out} {count}\nwc -l {out}; cat {count}\n"
        )
        tests = (
            f"SOURCE = {source!r}\nOUT = {out!r}\nCOUNT = {count!r}\nNOTES_SHA256 = {hashlib.sha256(text.encode()).hexdigest()!r}\nEXPECTED = {expected!r}\n"
            f"TOTAL = {len(found)}\n" + TESTS
        )
        return Instance(
            title=f"Extract every valid {kind} from noisy notes",
            instruction=instruction,
            solve=solve,
            tests={"test_extract.py": tests},
            files={f"data/{source}": text},
            tags=("regex", "grep", kind),
            tools=("python3",),
            max_turns=30,
        )
