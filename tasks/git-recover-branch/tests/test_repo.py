import subprocess
from pathlib import Path

from t1check import agent_module

REPO = Path("/app/repo")
LOST_TIP = "2a499bc06c463d7d140de2c4d8e902a2ff6ed614"
LOST_PARENT = "6bc1b4fbe6e50392ab85e282582ad7d02c7fac85"
OLD_MAIN = "6fcc30ad7f944f08160c3e70e8ac4e5ed59593f5"
CHANGELOG = ("# Changelog\n\n## Unreleased\n\n- char_histogram\n- line_count\n"
             "- sentence_count\n- word_count\n")


def git(*args, check=True):
    res = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=30)
    if check:
        assert res.returncode == 0, f"git {' '.join(args)}: {res.stderr}"
    return res.stdout.strip()


def is_ancestor(a, b):
    return subprocess.run(["git", "-C", str(REPO), "merge-base", "--is-ancestor", a, b],
                          capture_output=True, timeout=30).returncode == 0


def merge_commits():
    """Merge commits on main whose parents are the old main tip and the recovered tip."""
    out = []
    for line in git("rev-list", "--merges", "--parents", "main").splitlines():
        sha, *parents = line.split()
        if parents == [OLD_MAIN, LOST_TIP]:
            out.append(sha)
    return out


def test_branch_recreated_at_lost_tip():
    assert git("rev-parse", "refs/heads/feature/parser") == LOST_TIP
    assert git("rev-parse", "feature/parser~1") == LOST_PARENT


def test_main_history_not_rewritten():
    assert git("rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert is_ancestor(OLD_MAIN, "main")
    assert git("log", "--format=%s", "-1", OLD_MAIN) == "Polish module docstring"


def test_merged_with_merge_commit():
    assert is_ancestor(LOST_TIP, "main")
    assert merge_commits(), "no merge commit with parents (old main, feature/parser tip)"


def test_changelog_resolved():
    assert merge_commits()
    assert (REPO / "CHANGELOG.md").read_text() == CHANGELOG
    assert git("show", "main:CHANGELOG.md") + "\n" == CHANGELOG


def test_all_functions_work():
    with agent_module(str(REPO / "textstats.py")) as mod:  # the agent's module runs in a child process
        assert mod.word_count("one two\tthree\n four") == 4
        assert mod.sentence_count("Hi. Are you ok? Yes!") == 3
        assert mod.line_count("x\ny\nz") == 3 and mod.line_count("x\n") == 1
        assert mod.char_histogram("zz y\nz") == {"z": 3, "y": 1}


def test_no_conflict_markers_committed():
    assert merge_commits()
    for path in git("ls-files").splitlines():
        text = git("show", f"main:{path}")
        for marker in ("<<<<<<<", ">>>>>>>", "\n=======\n"):
            assert marker not in text, f"conflict marker in {path}"


def test_unit_tests_pass():
    assert (REPO / "tests" / "test_lines.py").is_file(), "feature tests missing"
    res = subprocess.run(["python3", "-m", "unittest", "discover", "-s", "tests"],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "Ran 3 tests" in res.stderr


def test_repository_clean():
    assert merge_commits()
    assert not (REPO / ".git" / "MERGE_HEAD").exists(), "merge not concluded"
    assert git("status", "--porcelain") == ""
