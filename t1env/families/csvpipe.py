"""csv: filter, group and aggregate a delimited file with a random schema into a JSON report.

The schema (column names and order), the delimiter, quoting, the filter, the grouping column,
the aggregate (sum, mean, max, min) and the sort order vary by seed; some rows have an empty value
and must be skipped. The tests compare the report with the answer computed at generation time.

The splits draw from disjoint pools (``docs/families.md``): test files hold other kinds of records
(shipments, sensor readings, courses: other column names and values, other people's names) and filter
with held-out operators (a number below a bound, a category equal to a value; train: at least a bound,
not equal to a value), under the instruction's own wording.
"""

from __future__ import annotations

import csv
import hashlib
import io
import random

from t1env.families.base import Family, Instance, split_of_seed

DOMAINS = {
    "sales": {
        "cat": {
            "region": ["north", "south", "east", "west", "central"],
            "channel": ["web", "store", "phone", "partner"],
        },
        "num": ["amount", "discount", "units"],
        "name": "customer",
    },
    "inventory": {
        "cat": {
            "warehouse": ["berlin", "lyon", "porto", "oslo", "turin", "graz"],
            "kind": ["tool", "part", "kit", "spare"],
        },
        "num": ["weight", "price", "stock"],
        "name": "item",
    },
    "staff": {
        "cat": {"team": ["infra", "data", "web", "mobile", "security"], "level": ["junior", "mid", "senior", "lead"]},
        "num": ["salary", "bonus", "hours"],
        "name": "employee",
    },
}
HELD_OUT = {  # the test split's domains
    "shipments": {
        "cat": {
            "carrier": ["dhl", "ups", "fedex", "postnl", "gls"],
            "origin": ["hamburg", "rotterdam", "antwerp", "genoa", "gdansk"],
        },
        "num": ["weight_kg", "cost", "distance"],
        "name": "consignee",
    },
    "sensors": {
        "cat": {
            "site": ["roof", "basement", "lab", "yard", "garage", "attic"],
            "model": ["tx100", "tx200", "aq5", "mk2"],
        },
        "num": ["reading", "battery", "uptime"],
        "name": "installer",
    },
    "courses": {
        "cat": {
            "faculty": ["arts", "law", "science", "medicine", "economics"],
            "term": ["spring", "summer", "autumn", "winter"],
        },
        "num": ["fee", "credits", "enrolled"],
        "name": "lecturer",
    },
}
FIRST_TEST = ["Nakamura", "Okafor", "Petrov", "Quispe", "Rossi", "Santos", "Tanaka", "Ueda", "Varga", "Weber"]
LAST_TEST = ["Ama", "Bea", "Cato", "Dov", "Eun", "Fen", "Gil", "Hiro"]
FIRST = ["Smith", "Jones", "Garcia", "Miller", "Davis", "Lopez", "Wilson", "Moore", "Clark", "Young", "King", "Hill"]
LAST = ["Ann", "Bo", "Cy", "Di", "Ed", "Flo", "Gus", "Hal", "Ivy", "Jo"]
DELIMS = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}

ORACLE = r"""
import csv, json, sys
delim, group, value, fcol, fval, agg, order = sys.argv[1:8]
delim = "\t" if delim == "tab" else delim
rows = list(csv.DictReader(open("/app/data/input.csv", newline=""), delimiter=delim))
used = []
for r in rows:
    if r[value] == "":
        continue
    if not (KEEP):
        continue
    used.append(r)
groups = {}
for r in used:
    groups.setdefault(r[group], []).append(float(r[value]))
def f(vs):
    return {"sum": sum, "max": max, "min": min, "mean": lambda v: sum(v) / len(v)}[agg](vs)
out = [{group: k, "count": len(v), agg: round(f(v), 2)} for k, v in groups.items()]
out.sort(key=(lambda g: g[group]) if order == "key" else (lambda g: (-g[agg], g[group])))
json.dump({"rows_used": len(used), "groups": out}, open("/app/report.json", "w"), indent=2)
"""
KEEP = {
    "ge": "float(r[fcol]) >= float(fval)",
    "ne": "r[fcol] != fval",  # train
    "lt": "float(r[fcol]) < float(fval)",
    "eq": "r[fcol] == fval",
}  # test


TESTS = r"""
import hashlib
import json
from pathlib import Path

INPUT = Path("/app/data/input.csv")
REPORT = Path("/app/report.json")


def report():
    assert hashlib.sha256(INPUT.read_bytes()).hexdigest() == INPUT_SHA256, "data/input.csv was modified"
    assert REPORT.is_file(), "/app/report.json is missing"
    return json.loads(REPORT.read_text())


def test_report_structure():
    r = report()
    assert set(r) == {"rows_used", "groups"}
    assert all(set(g) == {GROUP, "count", AGG} for g in r["groups"])


def test_rows_used():
    assert report()["rows_used"] == ROWS_USED


def test_groups_and_order():
    assert [g[GROUP] for g in report()["groups"]] == [g[GROUP] for g in EXPECTED]


def test_counts():
    got = {g[GROUP]: g["count"] for g in report()["groups"]}
    assert got == {g[GROUP]: g["count"] for g in EXPECTED}


def test_aggregates():
    got = {g[GROUP]: g[AGG] for g in report()["groups"]}
    want = {g[GROUP]: g[AGG] for g in EXPECTED}
    assert set(got) == set(want)
    for k in want:
        assert abs(float(got[k]) - want[k]) <= 0.011, (k, got[k], want[k])
"""


class CsvPipeline(Family):
    name = "csv"
    category = "data-wrangling"
    difficulty = "medium"
    description = "Filter/group/aggregate a delimited file with a random schema, delimiter and quoting into JSON."

    def build(self, rng: random.Random, seed: int) -> Instance:
        split = split_of_seed(seed)
        domains = DOMAINS if split == "train" else HELD_OUT
        first, last = (FIRST, LAST) if split == "train" else (FIRST_TEST, LAST_TEST)
        domain = rng.choice(sorted(domains))
        d = domains[domain]
        cats = d["cat"]
        group, other = rng.sample(sorted(cats), 2)
        value, fnum = rng.sample(d["num"], 2)
        cols = ["id", d["name"], group, other, value, fnum]
        rng.shuffle(cols)
        delim = rng.choice(sorted(DELIMS))
        rows = []
        for i in range(rng.randint(80, 260)):
            name = f"{rng.choice(first)}{delim if rng.random() < 0.2 else ' '}{rng.choice(last)}"
            rows.append(
                {
                    "id": str(1000 + i),
                    d["name"]: name,
                    group: rng.choice(cats[group]),
                    other: rng.choice(cats[other]),
                    value: "" if rng.random() < 0.08 else f"{rng.randint(1, 99999) / 100:.2f}",
                    fnum: f"{rng.randint(0, 5000) / 10:.1f}",
                }
            )
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=cols, delimiter=delim, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
        data = buf.getvalue()

        numeric = rng.random() < 0.5
        fop = ("ge" if split == "train" else "lt") if numeric else ("ne" if split == "train" else "eq")
        fcol = fnum if numeric else other
        fval = f"{rng.randint(50, 300)}" if numeric else rng.choice(cats[other])
        ftext = {
            "ge": f"`{fnum}` is at least {fval}",
            "ne": f"`{other}` is not `{fval}`",
            "lt": f"`{fnum}` is below {fval}",
            "eq": f"`{other}` is `{fval}`",
        }[fop]
        keep = {
            "ge": lambda r: float(r[fnum]) >= float(fval),
            "ne": lambda r: r[other] != fval,
            "lt": lambda r: float(r[fnum]) < float(fval),
            "eq": lambda r: r[other] == fval,
        }[fop]
        agg = rng.choice(["sum", "mean", "max", "min"])
        order = rng.choice(["key", "value"])
        used = [r for r in rows if r[value] != "" and keep(r)]
        groups: dict[str, list[float]] = {}
        for r in used:
            groups.setdefault(r[group], []).append(float(r[value]))
        fn = {"sum": sum, "max": max, "min": min, "mean": lambda v: sum(v) / len(v)}[agg]
        expected = [{group: k, "count": len(v), agg: round(fn(v), 2)} for k, v in groups.items()]
        expected.sort(key=(lambda g: g[group]) if order == "key" else (lambda g: (-g[agg], g[group])))
        order_text = (
            f"sorted by `{group}` ascending"
            if order == "key"
            else f"sorted by `{agg}` descending (ties: by `{group}` ascending)"
        )

        instruction = (
            (
                f"`/app/data/input.csv` is a {DELIMS[delim]}-delimited file of {domain} records with a header row; fields\n"
                "that contain the delimiter are double-quoted.\n\n"
                "Write `/app/report.json` summarizing it:\n\n"
                f"* use only the rows whose `{value}` is not empty and where {ftext} (compare numbers as numbers);\n"
                f"* group those rows by `{group}`; for each group give `count` (rows) and `{agg}` (the {agg} of `{value}`,\n"
                "  rounded to 2 decimals);\n"
                f'* the file is one JSON object: `{{"rows_used": N, "groups": [{{"{group}": ..., "count": ..., "{agg}": ...}}, ...]}}`\n'
                f"  with the groups {order_text}.\n\n"
                "Do not modify the input file.\n"
            )
            if split == "train"
            else (
                f"The {domain} records in `/app/data/input.csv` are {DELIMS[delim]}-separated, with a header row; a field\n"
                "that contains the separator is wrapped in double quotes.\n\n"
                "Produce `/app/report.json`, a summary of some of the records:\n\n"
                f"1. keep a record only if its `{value}` field is filled in and {ftext} (numbers compare as numbers);\n"
                f"2. group the kept records by `{group}` and give each group its `count` of records and `{agg}`, the\n"
                f"   {agg} of their `{value}` values rounded to 2 decimals;\n"
                f'3. write one JSON object `{{"rows_used": N, "groups": [{{"{group}": ..., "count": ..., "{agg}": ...}}, ...]}}`,\n'
                f"   N being the number of kept records, with the groups {order_text}.\n\n"
                "Leave the input file unchanged.\n"
            )
        )
        delim_arg = "tab" if delim == "\t" else delim
        solve = (
            f"cat > /tmp/report.py <<'PY'\n{ORACLE.strip().replace('KEEP', KEEP[fop])}\nPY\n"
            f"python3 /tmp/report.py '{delim_arg}' {group} {value} {fcol} {fval} {agg} {order}\n"
            "head -c 400 report.json\n"
        )
        tests = (
            f"INPUT_SHA256 = {hashlib.sha256(data.encode()).hexdigest()!r}\nGROUP = {group!r}\nAGG = {agg!r}\n"
            f"ROWS_USED = {len(used)}\nEXPECTED = {expected!r}\n" + TESTS
        )
        return Instance(
            title=f"Aggregate {domain} records by {group} into a JSON report",
            instruction=instruction,
            solve=solve,
            tests={"test_report.py": tests},
            files={"data/input.csv": data},
            tags=("csv", "json", agg),
            tools=("python3",),
            max_turns=30,
        )
