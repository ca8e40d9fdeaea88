#!/bin/bash
# Writes /app/docs with files in assorted encodings and line endings.
set -euo pipefail
python3 - <<'PY'
import os
texts = {
    "notes/meeting.txt": "Agenda:\n- Café budget: 1 200 €? No, in £.\n- Naïve plan\n",
    "notes/jp.txt": "東京の会議\n温度: 25°C\n",
    "legacy/kunden.txt": "Müller, Jürgen;Köln\nGroß, Ærø;Århus\n",
    "legacy/quotes.md": "# “Smart” quotes\n\nIt’s 5 € — “really”…\n",
    "readme.txt": "Plain ASCII readme\nsecond line\n",
}
raw = {
    "notes/meeting.txt": b"\xef\xbb\xbf" + texts["notes/meeting.txt"].replace("\n", "\r\n").encode("utf-8"),
    "notes/jp.txt": texts["notes/jp.txt"].encode("utf-16"),
    "legacy/kunden.txt": texts["legacy/kunden.txt"].encode("latin-1"),
    "legacy/quotes.md": texts["legacy/quotes.md"].replace("\n", "\r\n").encode("cp1252"),
    "readme.txt": texts["readme.txt"].rstrip("\n").encode(),
}
for rel, data in raw.items():
    p = os.path.join("/app/docs", rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(data)
with open("/app/docs/logo.png", "wb") as f:
    f.write(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) + b"\r\n\xef\xbb\xbf")
PY
