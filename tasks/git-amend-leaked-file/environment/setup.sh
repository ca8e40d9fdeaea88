#!/bin/bash
set -euo pipefail
git config --global user.name "Pat Coder"
git config --global user.email "pat@example.com"
export GIT_AUTHOR_NAME="Pat Coder" GIT_AUTHOR_EMAIL="pat@example.com" GIT_COMMITTER_NAME="Pat Coder" GIT_COMMITTER_EMAIL="pat@example.com"
mkdir -p /app/tool && cd /app/tool
git init -q -b main
printf 'def run():\n    return "v1"\n' > tool.py
printf '# tool\n' > README.md
GIT_AUTHOR_DATE="@1715000000 +0200" GIT_COMMITTER_DATE="@1715000000 +0200" git add -A
GIT_AUTHOR_DATE="@1715000000 +0200" GIT_COMMITTER_DATE="@1715000000 +0200" git commit -q -m "Initial version"
printf 'def run():\n    return "v2"\n' > tool.py
printf 'TOKEN=ghp_9f8e7d6c5b4a39281706\n' > .env
head -c 200000 /dev/zero | tr '\0' 'x' > debug.dump
printf 'def test_run():\n    from tool import run\n    assert run() == "v2"\n' > test_tool.py
git add -A
GIT_AUTHOR_DATE="@1715003600 +0200" GIT_COMMITTER_DATE="@1715003600 +0200" git commit -q -m "wip"
