#!/bin/bash
# Builds /app/repo: a feature branch that was merged nowhere and then deleted by mistake.
set -euo pipefail
git config --global user.name "Dev One"
git config --global user.email "dev1@example.com"
git config --global init.defaultBranch main
export GIT_AUTHOR_NAME="Dev One" GIT_AUTHOR_EMAIL="dev1@example.com"
export GIT_COMMITTER_NAME="Dev One" GIT_COMMITTER_EMAIL="dev1@example.com"
t=1700000000
commit() { export GIT_AUTHOR_DATE="@$t +0000" GIT_COMMITTER_DATE="@$t +0000"; t=$((t + 3600)); git commit -q -m "$1"; }

mkdir -p /app/repo && cd /app/repo
git init -q -b main
cat > textstats.py <<'PY'
"""Small text statistics helpers."""


def word_count(text):
    """Number of whitespace-separated words."""
    return len(text.split())
PY
mkdir tests
cat > tests/test_words.py <<'PY'
import unittest

import textstats


class WordTests(unittest.TestCase):
    def test_words(self):
        self.assertEqual(textstats.word_count("a b  c\n d"), 4)


if __name__ == "__main__":
    unittest.main()
PY
printf '# Changelog\n\n## Unreleased\n\n- word_count\n' > CHANGELOG.md
printf '__pycache__/\n' > .gitignore
git add -A && commit "Initial commit"

git checkout -q -b feature/parser
cat >> textstats.py <<'PY'


def line_count(text):
    """Number of lines; a trailing newline does not start a new line."""
    return len(text.splitlines())
PY
cat > tests/test_lines.py <<'PY'
import unittest

import textstats


class LineTests(unittest.TestCase):
    def test_lines(self):
        self.assertEqual(textstats.line_count("a\nb\n"), 2)
        self.assertEqual(textstats.line_count(""), 0)


if __name__ == "__main__":
    unittest.main()
PY
printf -- '- line_count\n' >> CHANGELOG.md
git add -A && commit "Add line_count"
cat >> textstats.py <<'PY'


def char_histogram(text):
    """Map each non-whitespace character to how often it occurs."""
    hist = {}
    for ch in text:
        if not ch.isspace():
            hist[ch] = hist.get(ch, 0) + 1
    return hist
PY
cat >> tests/test_lines.py <<'PY'


class HistogramTests(unittest.TestCase):
    def test_histogram(self):
        self.assertEqual(textstats.char_histogram("aba c"), {"a": 2, "b": 1, "c": 1})
PY
printf -- '- char_histogram\n' >> CHANGELOG.md
git add -A && commit "Add char_histogram"

git checkout -q main
cat >> textstats.py <<'PY'


def sentence_count(text):
    """Number of sentences ending in '.', '!' or '?'."""
    return sum(text.count(p) for p in ".!?")
PY
printf -- '- sentence_count\n' >> CHANGELOG.md
git add -A && commit "Add sentence_count"
sed -i 's/helpers\./helpers for t1./' textstats.py
git add -A && commit "Polish module docstring"

# the accident
git branch -D feature/parser >/dev/null
