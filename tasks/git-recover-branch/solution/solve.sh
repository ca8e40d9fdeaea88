#!/bin/bash
set -euo pipefail
cd /app/repo
git status --short
git reflog --format='%H %gs %s' | head -20
lost=$(git log -g --format='%H %s' HEAD | awk '$2 == "Add" && $3 == "char_histogram" { print $1; exit }')
test -n "$lost"
git branch feature/parser "$lost"
git log --oneline feature/parser -3
git merge --no-ff feature/parser -m "Merge branch 'feature/parser'" || true
python3 - <<'PY'
import re
from pathlib import Path
p = Path("textstats.py")
src = p.read_text()
pat = re.compile(r"<<<<<<< [^\n]*\n(.*?)=======\n(.*?)>>>>>>> [^\n]*\n", re.S)
src = pat.sub(lambda m: m.group(1).rstrip("\n") + "\n\n\n" + m.group(2), src)
p.write_text(src)
PY
printf '# Changelog\n\n## Unreleased\n\n- char_histogram\n- line_count\n- sentence_count\n- word_count\n' > CHANGELOG.md
python3 -m unittest discover -s tests
git add textstats.py CHANGELOG.md
git commit --no-edit -q
git log --oneline --graph -6
git status --short
