import csv
import hashlib
import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

SRC = Path("/app/sales.csv")
SHA = "5f7789659f7c7d1070b0c6ce9b579f80571ed80c35f5263fcfbdbbe4e8cdd9ff"


def rows():
    assert hashlib.sha256(SRC.read_bytes()).hexdigest() == SHA, "sales.csv was modified"
    with open(SRC, newline="") as f:
        return list(csv.DictReader(f))


def test_region_counts_and_units():
    want = defaultdict(lambda: [0, 0])
    for r in rows():
        want[r["region"]][0] += 1
        want[r["region"]][1] += int(r["units"])
    got = json.loads(Path("/app/totals.json").read_text())
    assert set(got) == set(want)
    for k, (n, u) in want.items():
        assert (got[k]["sales"], got[k]["units"]) == (n, u), k


def test_region_revenue_exact():
    want = defaultdict(Decimal)
    for r in rows():
        want[r["region"]] += int(r["units"]) * Decimal(r["unit_price"])
    got = json.loads(Path("/app/totals.json").read_text())
    assert {k: v["revenue"] for k, v in got.items()} == {k: f"{v:.2f}" for k, v in want.items()}


def test_best_product():
    prod = defaultdict(Decimal)
    for r in rows():
        prod[r["product"]] += int(r["units"]) * Decimal(r["unit_price"])
    assert Path("/app/best_product.txt").read_text() == max(prod, key=prod.get) + "\n"


def test_monthly_units():
    month = defaultdict(int)
    for r in rows():
        month[r["date"][:7]] += int(r["units"])
    want = "month,units\n" + "".join(f"{m},{month[m]}\n" for m in sorted(month))
    assert Path("/app/monthly_units.csv").read_text() == want
