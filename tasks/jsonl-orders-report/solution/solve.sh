#!/bin/bash
set -euo pipefail
cd /app
head -n 3 data/orders.jsonl
cat > report.py <<'PY'
"""python3 report.py INPUT.jsonl OUTDIR -> OUTDIR/orders.csv, OUTDIR/summary.json"""
import csv
import json
import os
import sys
from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")


def total(order):
    t = sum((Decimal(it["price"]) * it["qty"] for it in order["items"]), Decimal(0))
    if order.get("coupon") == "SAVE10":
        t *= Decimal("0.9")
    return t.quantize(CENT, rounding=ROUND_HALF_UP)


def main(src, outdir):
    os.makedirs(outdir, exist_ok=True)
    orders, invalid = [], 0
    with open(src, encoding="utf-8") as f:
        for line in f:
            try:
                o = json.loads(line)
                if not isinstance(o, dict):
                    raise ValueError
            except ValueError:
                invalid += 1
                continue
            orders.append(o)
    orders.sort(key=lambda o: o["id"])
    by_status, by_month, by_cust, names = {}, {}, {}, {}
    with open(os.path.join(outdir, "orders.csv"), "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["order_id", "customer_id", "customer_name", "items", "total", "status", "date"])
        for o in orders:
            t = total(o)
            c = o["customer"]
            names[c["id"]] = c["name"]
            w.writerow([o["id"], c["id"], c["name"], sum(it["qty"] for it in o["items"]), t, o["status"], o["created"][:10]])
            by_status[o["status"]] = by_status.get(o["status"], Decimal(0)) + t
            if o["status"] == "paid":
                by_month[o["created"][:7]] = by_month.get(o["created"][:7], Decimal(0)) + t
                by_cust[c["id"]] = by_cust.get(c["id"], Decimal(0)) + t
    top_id, top_total = min(by_cust.items(), key=lambda kv: (-kv[1], kv[0]))
    summary = {
        "valid_orders": len(orders),
        "invalid_lines": invalid,
        "revenue_by_status": {k: str(v) for k, v in sorted(by_status.items())},
        "paid_revenue_by_month": {k: str(v) for k, v in sorted(by_month.items())},
        "top_customer": {"id": top_id, "name": names[top_id], "paid_total": str(top_total)},
    }
    with open(os.path.join(outdir, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2, ensure_ascii=False)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
PY
python3 report.py data/orders.jsonl out
head -n 5 out/orders.csv
cat out/summary.json
