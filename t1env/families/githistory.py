"""git: find the commit in a generated history that introduced a regression, and revert it.

The repository (built by ``setup.sh`` with fixed dates and identities, so commit hashes are
stable) has 8-16 commits over a few files; one of them changes a setting to a bad value, later
commits touch other lines. The agent writes the culprit's hash and reverts it with a new commit,
keeping history and the later work.

The splits draw from disjoint pools (``docs/families.md``): test repositories keep YAML-style
``key: value`` files under ``settings/`` (train: ``key = value`` under ``conf/``), with their own file
names, setting names, bad values, authors, commit subjects and instruction wording.
"""

from __future__ import annotations

import random

from t1env.families.base import Family, Instance, split_of_seed

WORDS = [
    "alpha",
    "bravo",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "gale",
    "harbor",
    "iris",
    "juniper",
    "kestrel",
    "lumen",
    "maple",
    "nova",
    "onyx",
    "pine",
    "quartz",
    "raven",
    "sierra",
    "tundra",
]
KEYS = ["timeout", "retries", "workers", "port", "max_conn", "buffer_kb", "cache_ttl", "batch_size", "log_level"]
AUTHORS = [
    ("Ada Lovelace", "ada@example.com"),
    ("Linus Dev", "linus@example.com"),
    ("Grace Hopper", "grace@example.com"),
    ("Ken Thompson", "ken@example.com"),
    ("Barbara Liskov", "barbara@example.com"),
]

POOLS = {  # per split: folder, file extension, key/value separator, file names, setting names, bad values, authors,
    # verbs of ordinary commit subjects, the culprit's subject
    "train": (
        "conf",
        "conf",
        " = ",
        WORDS,
        KEYS,
        ["0", "-1", "99999999"],
        AUTHORS,
        ["Adjust", "Raise", "Lower", "Update", "Set"],
        "Tune {name} settings",
    ),
    "test": (
        "settings",
        "yaml",
        ": ",
        [
            "aspen",
            "birch",
            "canyon",
            "dune",
            "elm",
            "falcon",
            "glacier",
            "heron",
            "ivy",
            "jasper",
            "kelp",
            "lagoon",
            "mesa",
            "nimbus",
            "orchid",
            "prairie",
        ],
        ["threads", "queue_len", "poll_ms", "heap_mb", "shards", "read_timeout", "max_body_kb", "idle_s", "backlog"],
        ["-5", "1000000", "65536000"],
        [
            ("Margaret Hamilton", "margaret@example.org"),
            ("Dennis Ritchie", "dennis@example.org"),
            ("Frances Allen", "frances@example.org"),
            ("John Backus", "john@example.org"),
        ],
        ["Bump", "Tweak", "Change", "Reduce", "Increase"],
        "Rework {name} defaults",
    ),
}

SETUP_HEAD = r"""#!/bin/bash
set -euo pipefail
cd /app
git init -q -b main
git config user.name "setup"
git config user.email "setup@example.com"
commit() {  # commit N "AUTHOR" EMAIL MESSAGE
  export GIT_AUTHOR_NAME="$2" GIT_AUTHOR_EMAIL="$3" GIT_COMMITTER_NAME="$2" GIT_COMMITTER_EMAIL="$3"
  export GIT_AUTHOR_DATE="@$((1700000000 + $1 * 3600)) +0000" GIT_COMMITTER_DATE="@$((1700000000 + $1 * 3600)) +0000"
  git add -A
  git commit -q -m "$4"
}
"""

TESTS = r"""
import subprocess
from pathlib import Path

APP = Path("/app")


def git(*args):
    res = subprocess.run(["git", "-C", str(APP), *args], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def culprit_hash():
    rows = [line.split(" ", 1) for line in git("log", "--format=%H %s", "main").splitlines()]
    return [h for h, s in rows if s == CULPRIT_SUBJECT][-1]


def test_culprit_hash_written():
    text = (APP / "culprit.txt").read_text().strip()
    assert len(text) >= 7 and culprit_hash().startswith(text.lower())


def test_history_kept_and_extended():
    log = git("log", "--format=%s", "main").splitlines()
    assert log[-len(SUBJECTS):] == SUBJECTS[::-1], "the original commits must stay in main's history"
    assert len(log) > len(SUBJECTS), "the fix must be a new commit on main"


def test_bad_setting_reverted_in_head():
    text = git("show", f"HEAD:{BAD_FILE}")
    assert BAD_LINE not in text.splitlines()
    assert GOOD_LINE in text.splitlines()


def test_later_work_preserved_in_head():
    for path, lines in LATER.items():
        content = git("show", f"HEAD:{path}").splitlines()
        for line in lines:
            assert line in content, f"{path}: lost {line!r} from a later commit"


def test_worktree_clean_and_on_main():
    assert git("rev-parse", "--abbrev-ref", "HEAD") == "main"
    dirty = [line for line in git("status", "--porcelain").splitlines() if not line.endswith("culprit.txt")]
    assert dirty == []
"""


class GitCulprit(Family):
    name = "git"
    category = "git"
    difficulty = "medium"
    description = "Find the commit in a generated 8-16 commit history that introduced a bad setting; revert it."

    def build(self, rng: random.Random, seed: int) -> Instance:
        split = split_of_seed(seed)
        folder, ext, sep, words, keys, bad_values, authors, verbs, culprit_subject = POOLS[split]
        files = {f"{folder}/{w}.{ext}": {} for w in rng.sample(words, rng.randint(2, 4))}
        for path in files:
            for k in rng.sample(keys, rng.randint(4, 6)):
                files[path][k] = str(rng.randint(1, 500))
        n = rng.randint(8, 16)
        culprit_at = rng.randint(2, n - 3)  # 1-based commit number; later commits exist
        bad_file = rng.choice(sorted(files))
        script, subjects = [SETUP_HEAD], []
        later: dict[str, list[str]] = {}
        bad_key = good_line = bad_line = ""

        def dump(path: str) -> str:
            return "".join(f"{k}{sep}{v}\n" for k, v in files[path].items())

        def stem(path: str) -> str:
            return path.rsplit("/", 1)[1].rsplit(".", 1)[0]

        for i in range(1, n + 1):
            author = rng.choice(authors)
            if i == 1:
                subject = "Initial configuration"
                touched = sorted(files)
            elif i == culprit_at:
                bad_key = rng.choice(sorted(files[bad_file]))
                good_line = f"{bad_key}{sep}{files[bad_file][bad_key]}"
                files[bad_file][bad_key] = rng.choice(bad_values)
                bad_line = f"{bad_key}{sep}{files[bad_file][bad_key]}"
                subject = culprit_subject.format(name=stem(bad_file))
                touched = [bad_file]
            else:
                path = rng.choice(sorted(files))
                key = rng.choice([k for k in files[path] if not (path == bad_file and k == bad_key)])
                files[path][key] = str(rng.randint(1, 500))
                subject = f"{rng.choice(verbs)} {key} in {stem(path)} (#{rng.randint(100, 999)})"
                touched = [path]
                if i > culprit_at:
                    later.setdefault(path, [])
                    line = f"{key}{sep}{files[path][key]}"
                    later[path] = [x for x in later[path] if not x.startswith(f"{key}{sep}")] + [line]
            subjects.append(subject)
            for path in touched:
                script.append(f"mkdir -p {folder}\ncat > {path} <<'EOF'\n{dump(path)}EOF\n")
            script.append(f"commit {i} {author[0]!r} {author[1]} {subject!r}\n")
        script.append("git config --unset user.name\ngit config --unset user.email\n")
        setup = "".join(script)

        bad_value = bad_line.split(sep)[1]
        instruction = (
            (
                f"`/app` is a git repository of service configuration (branch `main`). Since one of its commits, `{bad_file}`\n"
                f"sets `{bad_key}` to the bad value `{bad_value}`, which breaks the service.\n\n"
                "1. Find the commit that introduced that value and write its full hash to `/app/culprit.txt`.\n"
                "2. Undo that change with a **new commit** on `main` (keep the existing history: no reset or rebase), so\n"
                f"   that `{bad_key}` is back to its previous value while every change made by later commits is kept.\n"
                "3. Leave no uncommitted changes (`culprit.txt` itself may stay untracked).\n"
            )
            if split == "train"
            else (
                f"The service configured by the git repository `/app` (branch `main`) stopped working: somewhere in the\n"
                f"history, a commit changed `{bad_key}` in `{bad_file}` to `{bad_value}`, and that value is wrong.\n\n"
                "* Identify that commit and put its full hash in `/app/culprit.txt`.\n"
                f"* Restore the value `{bad_key}` had before it, as an **additional commit** on `main`; do not rewrite\n"
                "  history (no reset, no rebase), and keep everything that commits after the culprit changed.\n"
                "* Finish with a clean worktree (an untracked `culprit.txt` is fine).\n"
            )
        )
        solve = (
            "git config user.name oracle; git config user.email oracle@example.com\n"
            f"c=$(git log --format=%H -S {bad_line!r} -- {bad_file} | tail -n 1)\n"
            'echo "$c" > culprit.txt\n'
            f"sed -i 's/^{bad_line}$/{good_line}/' {bad_file}\n"
            f'git commit -q -am "Revert \\"$(git log -1 --format=%s "$c")\\""\n'
            "git log --oneline | head -n 3\n"
        )
        tests = (
            f"SUBJECTS = {subjects!r}\nCULPRIT_SUBJECT = {subjects[culprit_at - 1]!r}\nBAD_FILE = {bad_file!r}\n"
            f"BAD_LINE = {bad_line!r}\nGOOD_LINE = {good_line!r}\nLATER = {later!r}\n" + TESTS
        )
        return Instance(
            title=f"Find and revert the commit that set {bad_key} to a bad value",
            instruction=instruction,
            solve=solve,
            tests={"test_repo.py": tests},
            files={"setup.sh": setup},
            tags=("git", "bisect", "revert"),
            tools=("git",),
            max_turns=40,
        )
