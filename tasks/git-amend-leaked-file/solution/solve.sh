#!/bin/bash
set -euo pipefail
cd /app/tool
git log --stat --format='%H %an %ad %s'
git rm -q --cached .env debug.dump
printf '.env\n*.dump\n' > .gitignore
git add .gitignore
git commit -q --amend -m "Return v2 and add test"
git log --stat --format='%H %an %ad %s'
git status --short --ignored
