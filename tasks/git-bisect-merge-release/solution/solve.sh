#!/bin/bash
set -euo pipefail
cd /app/calc
git log --oneline --graph --all
python3 check.py && echo good || echo bad
root=$(git rev-list --max-parents=0 main)
orig_main=$(git rev-parse main)
# 1. bisect
git bisect start main "$root"
git bisect run python3 check.py > /tmp/bisect.log
bad=$(git rev-parse refs/bisect/bad)
git bisect reset
cat /tmp/bisect.log | tail -n 20
echo "$bad" > /app/first_bad.txt
git show --stat "$bad"
# 2. revert
git revert --no-edit "$bad"
python3 check.py
# 3. merge with conflicts
git merge --no-ff -m "Merge feature/units" feature/units || true
git status --short
git diff --name-only --diff-filter=U
printf '# Changelog\n\n## 2.1.0\n- add pct\n- precision setting\n- unit conversion\n\n## 2.0.0\n- first public version\n' > CHANGELOG.md
printf 'NAME = "calc"\nPRECISION = 2\nDEFAULT_UNIT = "m"\n' > config.py
git add CHANGELOG.md config.py
git -c core.editor=true commit --no-edit -q
git log -1 --format=%s
# 4. cherry-pick the fix only
fix=$(git log --format=%H --grep='^Fix rounding in divide$' hotfix)
git cherry-pick "$fix"
python3 -c 'from calc.ops import div; print(div(1, 3))'
# 5. tag, 6. delete merged branch
git tag -a v2.1.0 -m "Release 2.1.0"
git branch -d feature/units
git merge-base --is-ancestor "$orig_main" main && echo "history kept"
git log --oneline --graph --all
git status --short
