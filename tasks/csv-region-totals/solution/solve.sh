#!/bin/bash
set -euo pipefail
cd /app
head -n 3 sales.csv
python3 - <<'PY'
import csv, json
from collections import defaultdict
from decimal import Decimal
tot = defaultdict(lambda: {"sales": 0, "units": 0, "revenue": Decimal(0)})
prod = defaultdict(Decimal)
month = defaultdict(int)
with open("sales.csv", newline="") as f:
    for row in csv.DictReader(f):
        u, rev = int(row["units"]), int(row["units"]) * Decimal(row["unit_price"])
        t = tot[row["region"]]
        t["sales"] += 1; t["units"] += u; t["revenue"] += rev
        prod[row["product"]] += rev
        month[row["date"][:7]] += u
json.dump({k: {**v, "revenue": f"{v['revenue']:.2f}"} for k, v in sorted(tot.items())}, open("totals.json", "w"), indent=2)
open("best_product.txt", "w").write(max(prod, key=prod.get) + "\n")
with open("monthly_units.csv", "w") as f:
    f.write("month,units\n")
    for m in sorted(month):
        f.write(f"{m},{month[m]}\n")
PY
cat totals.json best_product.txt monthly_units.csv
