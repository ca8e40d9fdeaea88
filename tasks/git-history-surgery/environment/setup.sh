#!/bin/bash
# Builds /app/project: a history with a leaked secret, a wrong email, a WIP commit, a tag and a release branch.
set -euo pipefail
git config --global user.name "Ana Ops"
git config --global user.email "ana@example.com"
git config --global init.defaultBranch main
t=1710000000
as() { export GIT_AUTHOR_NAME="$1" GIT_AUTHOR_EMAIL="$2" GIT_COMMITTER_NAME="$1" GIT_COMMITTER_EMAIL="$2"; }
commit() {
  export GIT_AUTHOR_DATE="@$t +0100" GIT_COMMITTER_DATE="@$t +0100"
  t=$((t + 86400))
  git add -A
  git commit -q -m "$1"
}
SAM() { as "Sam Dev" "sam@localhost"; }
ANA() { as "Ana Ops" "ana@example.com"; }

mkdir -p /app/project && cd /app/project
git init -q -b main
SAM
printf '# Project\n\nParses key=value files.\n' > README.md
printf 'from parser import parse\n\n\ndef main(path):\n    with open(path) as f:\n        return parse(f.read())\n' > app.py
commit "Initial commit"
ANA
printf 'import os\n\nAPI_KEY = os.environ.get("API_KEY", "")\n' > config.py
printf 'API_KEY=sk_live_7f3a9c2e11d04b8a\nREGION=eu-west\n' > secrets.env
commit "Add config"
SAM
printf 'def parse(text):\n    out = {}\n    for line in text.splitlines():\n        k, v = line.split("=")\n        out[k] = v\n    return out\n' > parser.py
commit "Add parser"
printf 'def parse(text):\n    """Parse key=value lines; blank lines and # comments are skipped."""\n    out = {}\n    for line in text.splitlines():\n        line = line.strip()\n        if not line or line.startswith("#"):\n            continue\n        k, v = line.split("=", 1)\n        out[k.strip()] = v.strip()\n    return out\n' > parser.py
commit "WIP"
ANA
printf 'from parser import parse\n\n\ndef test_parse():\n    assert parse("a=1\\n# c\\nb = x=y\\n") == {"a": "1", "b": "x=y"}\n' > test_parser.py
commit "Add tests"
GIT_COMMITTER_DATE="@$t +0100" git tag -a v1.0 -m "Version 1.0"
git checkout -q -b release
printf '# Release notes\n\n## 1.0\n\n- first release\n' > NOTES.md
commit "Release notes"
git checkout -q main
SAM
printf 'API_KEY=sk_live_b2e8d41c9a6f0375\nREGION=eu-west\n' > secrets.env
commit "Rotate key"
ANA
printf 'import sys\n\nfrom app import main\n\nif __name__ == "__main__":\n    print(main(sys.argv[1]))\n' > cli.py
commit "Add CLI"
git gc -q
