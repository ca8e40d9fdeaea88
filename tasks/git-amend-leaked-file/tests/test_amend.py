import subprocess
from pathlib import Path

REPO = Path("/app/tool")


def git(*args):
    res = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_files_dropped_from_commit_but_kept():
    files = set(git("ls-tree", "-r", "--name-only", "HEAD").splitlines())
    assert files == {"README.md", "tool.py", "test_tool.py", ".gitignore"}
    assert (REPO / ".env").read_text() == "TOKEN=ghp_9f8e7d6c5b4a39281706\n"
    assert (REPO / "debug.dump").stat().st_size == 200000


def test_gitignore_in_commit():
    assert git("rev-list", "--count", "main") == "2"
    ignore = git("show", "HEAD:.gitignore")
    for probe in (".env", "debug.dump", "other.dump"):
        res = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", "--no-index", probe])
        assert res.returncode == 0, probe
    assert ignore


def test_message_author_and_changes():
    assert git("log", "-1", "--format=%s|%an|%ae|%at") == "Return v2 and add test|Pat Coder|pat@example.com|1715003600"
    assert 'return "v2"' in git("show", "HEAD:tool.py")
    assert "test_run" in git("show", "HEAD:test_tool.py")


def test_history_and_clean():
    assert git("rev-list", "--count", "main") == "2"
    assert git("log", "-1", "--format=%s", "HEAD~1") == "Initial version"
    assert git("rev-parse", "HEAD~1") == "cc0bb5b73661ca756b8bdcc46d60f160b08b80cd"
    assert git("log", "-1", "--format=%at", "HEAD~1") == "1715000000"
    assert git("status", "--porcelain") == ""
    res = subprocess.run(["git", "-C", str(REPO), "log", "--all", "--format=%H", "--", ".env", "debug.dump"],
                         capture_output=True, text=True)
    reachable = [h for h in res.stdout.split() if h]
    assert reachable == [], "a branch still has a commit containing the files"
