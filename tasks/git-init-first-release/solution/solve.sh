#!/bin/bash
set -euo pipefail
cd /app/site
find . -type f
git init -q -b main
printf '*.log\ntmp/\n' > .gitignore
git add -A
git status --short
git -c user.name="Robin Web" -c user.email=robin@example.org commit -q -m "Initial site"
git -c user.name="Robin Web" -c user.email=robin@example.org tag -a v0.1 -m "First release"
git log --format='%an <%ae> %cn <%ce> %s' && git ls-files
