#!/bin/bash
set -euo pipefail
cd /app
head -c 64 export.csv | od -c | head -n 4
python3 - <<'PY'
raw = open("/app/export.csv", "rb").read()
text = raw.decode("utf-16")  # the BOM selects the byte order and is dropped
text = text.replace("\r\n", "\n")
open("/app/export.utf8.csv", "w", encoding="utf-8", newline="").write(text)
rows = [l.split(";") for l in text.splitlines()]
out = ["id,name,city,amount"] + [",".join(r[:3] + [r[3].replace(",", ".")]) for r in rows[1:]]
open("/app/export.std.csv", "w", encoding="utf-8", newline="").write("\n".join(out) + "\n")
names = sorted({r[1] for r in rows[1:] if not r[1].isascii()})
open("/app/non_ascii_names.txt", "w", encoding="utf-8").write("".join(n + "\n" for n in names))
PY
head -n 3 export.utf8.csv export.std.csv non_ascii_names.txt
