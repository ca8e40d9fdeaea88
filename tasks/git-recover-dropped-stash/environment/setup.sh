#!/bin/bash
# /app/web: a stash with unfinished work was dropped; a later reset --hard also lost a commit.
set -euo pipefail
git config --global user.name "Lee Maint"
git config --global user.email "lee@example.com"
export GIT_AUTHOR_NAME="Lee Maint" GIT_AUTHOR_EMAIL="lee@example.com" GIT_COMMITTER_NAME="Lee Maint" GIT_COMMITTER_EMAIL="lee@example.com"
t=1716000000
at() { export GIT_AUTHOR_DATE="@$t +0000" GIT_COMMITTER_DATE="@$t +0000"; t=$((t + 600)); }
mkdir -p /app/web && cd /app/web
git init -q -b main
printf 'def render(title):\n    return f"<h1>{title}</h1>"\n' > views.py
printf 'ROUTES = ["/"]\n' > routes.py
at; git add -A; git commit -q -m "Base app"
printf 'ROUTES = ["/", "/about"]\n' > routes.py
at; git commit -qam "Add about route"
# unfinished work, stashed with a message, then dropped
printf 'def render(title, lang="en"):\n    return f"<h1 lang={lang}>{title}</h1>"\n' > views.py
printf 'LANGS = ["en", "de", "fr"]\n' > i18n.py
git add i18n.py
at; git stash push -q -m "i18n work in progress"
at; git stash drop -q
# a commit made and then thrown away with reset --hard
printf 'ROUTES = ["/", "/about", "/contact"]\n' > routes.py
at; git commit -qam "Add contact route"
at; git reset -q --hard HEAD~1
