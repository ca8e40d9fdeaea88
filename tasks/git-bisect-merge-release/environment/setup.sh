#!/bin/bash
# Builds /app/calc: main (with a regression), feature/units (conflicts with main), hotfix (one fix + one WIP).
set -euo pipefail
git config --global user.name "Kai Release"
git config --global user.email "kai@example.com"
git config --global init.defaultBranch main
t=1712000000
commit() {
  export GIT_AUTHOR_DATE="@$t +0000" GIT_COMMITTER_DATE="@$t +0000"
  t=$((t + 3600))
  git add -A
  git commit -q -m "$1"
}
export GIT_AUTHOR_NAME="Dana Dev" GIT_AUTHOR_EMAIL="dana@example.com" GIT_COMMITTER_NAME="Dana Dev" GIT_COMMITTER_EMAIL="dana@example.com"
mkdir -p /app/calc/calc && cd /app/calc
git init -q -b main
cat > calc/ops.py <<'PY'
def mul(a, b):
    return a * b


def add(a, b):
    return a + b


def sub(a, b):
    return a - b
PY
touch calc/__init__.py
cat > check.py <<'PY'
"""Regression check: exit 0 when multiplication works."""
import sys

from calc.ops import mul

ok = mul(3, 4) == 12 and mul(-2, 3) == -6 and mul(2.5, 4) == 10 and mul(3, -2) == -6
sys.exit(0 if ok else 1)
PY
printf '# Changelog\n\n## 2.0.0\n- first public version\n' > CHANGELOG.md
printf 'NAME = "calc"\n' > config.py
commit "Initial commit"
cat >> calc/ops.py <<'PY'


def div(a, b):
    return round(a / b, 2)
PY
commit "Add div"
printf '# calc\n\nTiny calculator library.\n' > README.md
commit "Add README"
git branch feature/units
git branch hotfix HEAD~1
printf 'VERSION = "2.0.1"\n' > calc/version.py
commit "Add version module"
sed -i 's/    return a \* b/    result = 0\n    for _ in range(int(b)):\n        result += a\n    return result/' calc/ops.py
commit "Simplify mul"
printf 'def pct(part, whole):\n    return 100 * part / whole\n' > calc/pct.py
commit "Add pct"
printf 'Usage: from calc.ops import add\n' >> README.md
commit "Document usage"
printf '# Changelog\n\n## 2.1.0\n- add pct\n- precision setting\n\n## 2.0.0\n- first public version\n' > CHANGELOG.md
commit "Update changelog"
printf 'NAME = "calc"\nPRECISION = 2\n' > config.py
commit "Add precision setting"
printf 'VERSION = "2.1.0"\n' > calc/version.py
commit "Bump version to 2.1.0"

git checkout -q feature/units
printf 'FACTORS = {"m": 1.0, "km": 1000.0, "cm": 0.01}\n\n\ndef convert(value, src, dst):\n    return value * FACTORS[src] / FACTORS[dst]\n' > calc/units.py
commit "Add units module"
printf '# Changelog\n\n## 2.1.0\n- unit conversion\n\n## 2.0.0\n- first public version\n' > CHANGELOG.md
commit "Changelog for units"
printf 'NAME = "calc"\nDEFAULT_UNIT = "m"\n' > config.py
commit "Default unit setting"

git checkout -q hotfix
sed -i 's/    return round(a \/ b, 2)/    if b == 0:\n        raise ZeroDivisionError("division by zero")\n    return round(a \/ b + 0.0, 2)/' calc/ops.py
commit "Fix rounding in divide"
printf 'experimental\n' > WIP.txt
commit "WIP experiment"
git checkout -q main
git gc -q
