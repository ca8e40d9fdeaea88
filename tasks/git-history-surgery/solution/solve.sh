#!/bin/bash
set -euo pipefail
cd /app/project
git log --all --graph --format='%h %an <%ae> %s %d'
git show --stat HEAD~1
git tag -n
# 1. squash WIP into "Add parser" (rebase keeps author names/emails/dates)
base=$(git log --format=%H --grep='^Add config$' main)
GIT_SEQUENCE_EDITOR="sed -i -e 's/^pick \([0-9a-f]*\) WIP$/fixup \1 WIP/'" git rebase -i "$base"
git log --oneline main
# 2. move release and the annotated tag onto the rewritten "Add tests"
new_tests=$(git log --format=%H --grep='^Add tests$' main)
git rebase --onto "$new_tests" v1.0 release
git checkout -q main
git tag -f -a v1.0 -m "Version 1.0" "$new_tests"
# 3. purge secrets.env from every commit, fix Sam's email, drop commits left empty
cp secrets.env /tmp/secrets.env.keep
FILTER_BRANCH_SQUELCH_WARNING=1 git filter-branch -f \
  --env-filter '
    if [ "$GIT_AUTHOR_EMAIL" = "sam@localhost" ]; then export GIT_AUTHOR_EMAIL="sam@example.com"; fi
    if [ "$GIT_COMMITTER_EMAIL" = "sam@localhost" ]; then export GIT_COMMITTER_EMAIL="sam@example.com"; fi' \
  --index-filter 'git rm -q --cached --ignore-unmatch secrets.env' \
  --prune-empty --tag-name-filter cat -- --all
cp /tmp/secrets.env.keep secrets.env
rm -f /tmp/secrets.env.keep
# 4. ignore it from now on
echo "secrets.env" > .gitignore
git add .gitignore
git commit -q -m "Ignore secrets.env"
# 5. drop every leftover copy of the old objects
git for-each-ref --format='%(refname)' refs/original | xargs -r -n 1 git update-ref -d
rm -f .git/ORIG_HEAD
git reflog expire --expire=now --all
git gc -q --prune=now
git count-objects -v
git log --all --graph --format='%h %an <%ae> %cn <%ce> %s %d'
git status --short --ignored
