#!/bin/bash
set -euo pipefail
cd /app/release
find . -type f -exec ls -l {} +
python3 - <<'PY'
import os, stat, zipfile
root = "/app/release"
paths = []
for d, _, files in os.walk(root):
    for f in files:
        rel = os.path.relpath(os.path.join(d, f), root)
        if rel != "build.log":
            paths.append(rel)
with zipfile.ZipFile("/app/tool-3.0.zip", "w") as z:
    for rel in sorted(paths):
        full = os.path.join(root, rel)
        info = zipfile.ZipInfo.from_file(full, "tool-3.0/" + rel)
        mode = 0o755 if os.access(full, os.X_OK) else 0o644
        info.external_attr = (stat.S_IFREG | mode) << 16
        info.compress_type = zipfile.ZIP_STORED if rel == "data.bin" else zipfile.ZIP_DEFLATED
        with open(full, "rb") as f:
            z.writestr(info, f.read())
    z.comment = b"tool 3.0"
PY
python3 -m zipfile -l /app/tool-3.0.zip
