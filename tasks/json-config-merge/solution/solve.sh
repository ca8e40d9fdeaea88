#!/bin/bash
set -euo pipefail
cat > /app/merge.py <<'PY'
"""python3 merge.py BASE.json OVERRIDE.json > OUT.json (deep merge; null deletes)."""
import json
import sys


def merge(base, over):
    out = dict(base)
    for k, v in over.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        base = json.load(f)
    with open(sys.argv[2]) as f:
        over = json.load(f)
    sys.stdout.write(json.dumps(merge(base, over), indent=2) + "\n")
PY
python3 /app/merge.py /app/config/base.json /app/config/production.json > /app/config/merged.json
cat /app/config/merged.json
