#!/bin/bash
set -euo pipefail
cd /app
head -n 20 customers.txt | cat -v
python3 - <<'PY'
counts = {"ok": 0, "double_encoded": 0, "latin1": 0}
out = []
for raw in open("/app/customers.txt", "rb").read().split(b"\n")[:-1]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        out.append(raw.decode("latin-1"))
        counts["latin1"] += 1
        continue
    try:
        fixed = text.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        fixed = None
    if fixed is not None and fixed != text:
        out.append(fixed)
        counts["double_encoded"] += 1
    else:
        out.append(text)
        counts["ok"] += 1
open("/app/customers.fixed.txt", "w", encoding="utf-8", newline="\n").write("\n".join(out) + "\n")
open("/app/repair-report.txt", "w").write("".join(f"{k} {v}\n" for k, v in counts.items()))
PY
cat repair-report.txt
head -n 5 customers.fixed.txt
