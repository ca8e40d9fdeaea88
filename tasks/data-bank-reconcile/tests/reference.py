import csv
import json
import re
from datetime import date

REF = re.compile(r"REF:([A-Z0-9]+)")


def cents_eu(s):
    neg = s.startswith("-")
    whole, frac = s.lstrip("-").replace(".", "").split(",")
    c = int(whole) * 100 + int(frac)
    return -c if neg else c


def cents_dot(s):
    neg = s.startswith("-")
    whole, frac = s.lstrip("-").split(".")
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
        bank.append({"line": n, "date": date(int(yy), int(mm), int(dd)), "desc": desc, "cents": cents_eu(amt),
                     "ref": m.group(1) if m else None})
    ledger = json.load(open("/app/books/ledger.json"))
    for e in ledger:
        e["cents"] = cents_dot(e["amount"])
        e["d"] = date.fromisoformat(e["date"])
    return bank, ledger


def reconcile():
    bank, ledger = load()
    by_ref = {e["ref"]: e for e in ledger if e["ref"]}
    used, matches, mismatches, rest = set(), [], [], []
    for b in bank:
        e = by_ref.get(b["ref"]) if b["ref"] else None
        if e is None or e["id"] in used:
            rest.append(b)
            continue
        used.add(e["id"])
        if e["cents"] == b["cents"]:
            matches.append((b["line"], e["id"], "ref"))
        else:
            mismatches.append((b["line"], e["id"], fmt(b["cents"]), fmt(e["cents"])))
    unmatched_bank = []
    for b in rest:
        cands = [e for e in ledger if e["id"] not in used and e["cents"] == b["cents"] and abs((e["d"] - b["date"]).days) <= 3]
        if not cands:
            unmatched_bank.append(b)
            continue
        e = min(cands, key=lambda e: (abs((e["d"] - b["date"]).days), e["id"]))
        used.add(e["id"])
        matches.append((b["line"], e["id"], "amount_date"))
    unmatched_ledger = [e for e in ledger if e["id"] not in used]
    out = {
        "matches.csv": "bank_line,ledger_id,method\n" + "".join(f"{a},{b},{c}\n" for a, b, c in sorted(matches)),
        "mismatches.csv": "bank_line,ledger_id,bank_amount,ledger_amount\n" + "".join(",".join(map(str, m)) + "\n" for m in sorted(mismatches)),
        "unmatched_bank.csv": "bank_line,date,amount,description\n",
        "unmatched_ledger.csv": "ledger_id,date,amount\n" + "".join(f"{e['id']},{e['date']},{fmt(e['cents'])}\n" for e in sorted(unmatched_ledger, key=lambda e: e["id"])),
    }
    import io
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for b in unmatched_bank:
        w.writerow([b["line"], b["date"].isoformat(), fmt(b["cents"]), b["desc"]])
    out["unmatched_bank.csv"] += buf.getvalue()
    summary = {"bank_total": fmt(sum(b["cents"] for b in bank)), "ledger_total": fmt(sum(e["cents"] for e in ledger)),
               "matched": len(matches), "mismatched": len(mismatches), "unmatched_bank": len(unmatched_bank),
               "unmatched_ledger": len(unmatched_ledger)}
    return out, summary


def normalized_bank():
    bank, _ = load()
    return "line,date,amount,ref\n" + "".join(
        f"{b['line']},{b['date'].isoformat()},{fmt(b['cents'])},{b['ref'] or ''}\n" for b in bank)
