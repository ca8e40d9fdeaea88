#!/bin/bash
set -euo pipefail
cd /app/import
find . | cat -v
python3 - <<'PY'
import os
root = b"/app/import"
renamed = []
for dirpath, dirs, files in os.walk(root, topdown=False):
    for name in dirs + files:
        try:
            name.decode("utf-8")
            continue
        except UnicodeDecodeError:
            pass
        new = name.decode("latin-1").encode("utf-8")
        os.rename(os.path.join(dirpath, name), os.path.join(dirpath, new))
        renamed.append(os.path.relpath(os.path.join(dirpath, new), root))
# directories were renamed after their contents: rebuild the final paths of renamed files
final = []
for dirpath, dirs, files in os.walk(root):
    for name in dirs + files:
        rel = os.path.relpath(os.path.join(dirpath, name), root)
        if any(os.path.basename(r) == name for r in renamed):
            final.append(rel)
with open("/app/renamed.txt", "wb") as f:
    f.write(b"".join(p + b"\n" for p in sorted(final)))
PY
cat /app/renamed.txt
find . -type f -exec sh -c 'printf "%s: " "$1"; cat "$1"' _ {} \;
