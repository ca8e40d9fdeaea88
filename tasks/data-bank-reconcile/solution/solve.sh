#!/bin/bash
set -euo pipefail
cd /app
head -n 5 bank/statement.csv
head -c 300 books/ledger.json
mkdir -p out
cat > /tmp/common.py <<'PY'
import csv, json, re
from datetime import date
REF = re.compile(r"REF:([A-Z0-9]+)")
def cents(s, dec):
    neg = s.startswith("-")
    s = s.lstrip("-")
    if dec == ",":
        s = s.replace(".", "")
    whole, frac = s.split(dec)
    c = int(whole) * 100 + int(frac)
    return -c if neg else c
def fmt(c):
    return f"{'-' if c < 0 else ''}{abs(c) // 100}.{abs(c) % 100:02d}"
def load():
    with open("/app/bank/statement.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter=";"))[1:]
    bank = []
    for n, (d, desc, amt) in enumerate(rows, 1):
        dd, mm, yy = d.split(".")
        m = REF.search(desc)
        bank.append({"line": n, "date": date(int(yy), int(mm), int(dd)), "desc": desc, "cents": cents(amt, ","), "ref": m.group(1) if m else None})
    ledger = json.load(open("/app/books/ledger.json"))
    for e in ledger:
        e["cents"], e["d"] = cents(e["amount"], "."), date.fromisoformat(e["date"])
    return bank, ledger
def write(name, header, rows):
    with open("/app/out/" + name, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
PY
# step 1: normalized statement
PYTHONPATH=/tmp python3 -c '
from common import *
bank, _ = load()
write("bank.csv", ["line", "date", "amount", "ref"], [[b["line"], b["date"].isoformat(), fmt(b["cents"]), b["ref"] or ""] for b in bank])'
head -n 5 out/bank.csv
# steps 2-7: matching and reports
PYTHONPATH=/tmp python3 - <<'PY'
from common import *
bank, ledger = load()
by_ref = {e["ref"]: e for e in ledger if e["ref"]}
used, matches, mism, rest = set(), [], [], []
for b in bank:
    e = by_ref.get(b["ref"]) if b["ref"] else None
    if e is None or e["id"] in used:
        rest.append(b); continue
    used.add(e["id"])
    if e["cents"] == b["cents"]:
        matches.append((b["line"], e["id"], "ref"))
    else:
        mism.append((b["line"], e["id"], fmt(b["cents"]), fmt(e["cents"])))
ub = []
for b in rest:
    c = [e for e in ledger if e["id"] not in used and e["cents"] == b["cents"] and abs((e["d"] - b["date"]).days) <= 3]
    if not c:
        ub.append(b); continue
    e = min(c, key=lambda e: (abs((e["d"] - b["date"]).days), e["id"]))
    used.add(e["id"])
    matches.append((b["line"], e["id"], "amount_date"))
ul = sorted((e for e in ledger if e["id"] not in used), key=lambda e: e["id"])
write("matches.csv", ["bank_line", "ledger_id", "method"], sorted(matches))
write("mismatches.csv", ["bank_line", "ledger_id", "bank_amount", "ledger_amount"], sorted(mism))
write("unmatched_bank.csv", ["bank_line", "date", "amount", "description"], [[b["line"], b["date"].isoformat(), fmt(b["cents"]), b["desc"]] for b in ub])
write("unmatched_ledger.csv", ["ledger_id", "date", "amount"], [[e["id"], e["date"], fmt(e["cents"])] for e in ul])
json.dump({"bank_total": fmt(sum(b["cents"] for b in bank)), "ledger_total": fmt(sum(e["cents"] for e in ledger)),
           "matched": len(matches), "mismatched": len(mism), "unmatched_bank": len(ub), "unmatched_ledger": len(ul)},
          open("/app/out/summary.json", "w"), indent=2)
PY
cat out/summary.json out/mismatches.csv out/unmatched_bank.csv out/unmatched_ledger.csv
