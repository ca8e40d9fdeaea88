#!/bin/bash
# /app/import: file names written by an old system in Latin-1 (not valid UTF-8), plus some fine ones.
set -euo pipefail
mkdir -p /app/import
cd /app/import
python3 - <<'PY'
import os
names = ["Résumé.txt", "Café Menü.pdf", "Ångström.csv", "naïve notes.md", "plain.txt", "déjà vu/über.txt"]
for n in names:
    raw = n.encode("latin-1") if n != "plain.txt" else n.encode()
    d, _, f = raw.rpartition(b"/")
    if d:
        os.makedirs(d, exist_ok=True)
    with open(raw, "wb") as fh:
        fh.write(n.encode("utf-8") + b"\n")
os.makedirs("Ok-ünïcode", exist_ok=True)
with open("Ok-ünïcode/straße.txt".encode("utf-8"), "wb") as fh:
    fh.write(b"already utf-8\n")
PY
