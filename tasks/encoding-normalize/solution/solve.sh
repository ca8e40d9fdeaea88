#!/bin/bash
set -euo pipefail
cd /app/docs
find . -type f -exec file {} + || true
python3 - <<'PY'
import pathlib

def decode(data):
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    text = data.decode("latin-1")
    if any(0x80 <= ord(c) <= 0x9f for c in text):  # C1 controls: it was really Windows-1252
        text = data.decode("cp1252")
    return text

for p in sorted(pathlib.Path(".").rglob("*")):
    if p.is_file() and p.suffix in (".txt", ".md"):
        text = decode(p.read_bytes()).replace("\r\n", "\n").replace("\r", "\n")
        p.write_bytes((text.rstrip("\n") + "\n").encode("utf-8"))
        print(p, repr(text[:30]))
PY
find . -type f -exec file {} + || true
