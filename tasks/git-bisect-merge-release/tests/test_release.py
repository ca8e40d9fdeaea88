import os
import subprocess
from pathlib import Path

REPO = Path("/app/calc")
ORIG_MAIN_SUBJECTS = ["Initial commit", "Add div", "Add README", "Add version module", "Simplify mul", "Add pct",
                      "Document usage", "Update changelog", "Add precision setting", "Bump version to 2.1.0"]
CHANGELOG = ("# Changelog\n\n## 2.1.0\n- add pct\n- precision setting\n- unit conversion\n\n"
             "## 2.0.0\n- first public version\n")


def git(*args, check=True):
    res = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=30)
    if check:
        assert res.returncode == 0, f"git {args}: {res.stderr}"
    return res.stdout.strip()


def commit_by_subject(subject, ref="main"):
    shas = git("log", "--format=%H", "--fixed-strings", f"--grep={subject}", ref).splitlines()
    return [s for s in shas if git("log", "-1", "--format=%s", s) == subject]


ORIGINAL = {  # setup.sh fixes names and dates, so the original commits have stable hashes
    "Simplify mul": "555beb1f241d88f88399c0c5e6390e186ee724c6",
    "Bump version to 2.1.0": "81eb6e4ee3fd84eb6591426a6376e364d25c7728",
    "Default unit setting": "98b05b54db7d9e005634aad09713190f8ab30cad",
    "Fix rounding in divide": "449b3c80e277efdb512eb97ee2270bacbfbd8a40",
}


def original_commit(subject):
    sha = ORIGINAL[subject]
    assert git("log", "-1", "--format=%s", sha) == subject
    return sha


def head_python(code):
    return subprocess.run(["python3", "-c", code], cwd=REPO, capture_output=True, text=True, timeout=30)


def test_first_bad_commit():
    want = original_commit("Simplify mul")
    assert Path("/app/first_bad.txt").read_text().strip() == want


def test_history_not_rewritten():
    tip = original_commit("Bump version to 2.1.0")
    res = subprocess.run(["git", "-C", str(REPO), "merge-base", "--is-ancestor", tip, "main"])
    assert res.returncode == 0, "the original main is no longer part of main"
    # and the release was built on top of it: the feature branch's original tip was merged in, not recreated
    feature_tip = original_commit("Default unit setting")
    res = subprocess.run(["git", "-C", str(REPO), "merge-base", "--is-ancestor", feature_tip, "main"])
    assert res.returncode == 0, "feature/units (its original commits) is not part of main"


def test_regression_reverted():
    bad = original_commit("Simplify mul")
    reverts = [s for s in git("log", "--format=%H", "main").splitlines()
               if git("log", "-1", "--format=%s", s) == 'Revert "Simplify mul"']
    assert len(reverts) == 1
    assert f"This reverts commit {bad}" in git("log", "-1", "--format=%b", reverts[0])
    res = subprocess.run(["python3", "check.py"], cwd=REPO, capture_output=True, timeout=30)
    assert res.returncode == 0
    assert (REPO / "calc" / "pct.py").is_file(), "later commits were undone"


def test_merge_commit():
    merges = git("log", "--merges", "--format=%H %P|%s", "main").splitlines()
    assert len(merges) == 1, merges
    shas, subject = merges[0].split("|", 1)
    assert subject == "Merge feature/units"
    parents = shas.split()[1:]
    assert len(parents) == 2
    assert parents[1] == original_commit("Default unit setting")


def test_changelog_resolved():
    assert git("show", "main:CHANGELOG.md") + "\n" == CHANGELOG
    assert (REPO / "CHANGELOG.md").read_text() == CHANGELOG


def test_config_resolved():
    res = head_python("import config; print(config.NAME, config.PRECISION, config.DEFAULT_UNIT)")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "calc 2 m\n"
    res = head_python("from calc.units import convert; print(convert(2, 'km', 'm'))")
    assert res.stdout == "2000.0\n"


def test_no_conflict_markers():
    assert git("rev-parse", "--verify", "main")
    out = subprocess.run(["git", "-C", str(REPO), "grep", "-nE", "^(<<<<<<<|>>>>>>>|=======)", "main"],
                         capture_output=True, text=True).stdout
    assert out == ""


def test_fix_cherry_picked_only():
    picked = commit_by_subject("Fix rounding in divide")
    assert len(picked) == 1
    fix = original_commit("Fix rounding in divide")
    assert picked[0] != fix, "hotfix was merged instead of cherry-picked"
    assert commit_by_subject("WIP experiment") == []
    assert not (REPO / "WIP.txt").exists()
    res = head_python("from calc.ops import div, mul\ntry:\n    div(1, 0)\nexcept ZeroDivisionError as e:\n    print(e)\nprint(mul(-2, 3))")
    assert res.stdout == "division by zero\n-6\n", res.stderr


def test_tag_and_branches():
    assert git("cat-file", "-t", "v2.1.0") == "tag"
    assert git("rev-parse", "v2.1.0^{commit}") == git("rev-parse", "main")
    assert git("tag", "-l", "--format=%(contents:subject)", "v2.1.0") == "Release 2.1.0"
    assert set(git("for-each-ref", "--format=%(refname:short)", "refs/heads").splitlines()) == {"main", "hotfix"}
    assert git("log", "-1", "--format=%s", "hotfix") == "WIP experiment"


def test_clean_on_main():
    assert git("symbolic-ref", "HEAD") == "refs/heads/main"
    assert git("status", "--porcelain") == ""
    assert not (REPO / ".git" / "BISECT_LOG").exists()
    # the *final* main: the one the release tag names (a clean tree on an untouched main is not the end state)
    assert git("rev-parse", "--verify", "-q", "v2.1.0^{commit}", check=False) == git("rev-parse", "HEAD")
