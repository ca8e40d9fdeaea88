import subprocess
from pathlib import Path

SITE = Path("/app/site")
TRACKED = {".gitignore", "index.html", "robots.txt", "assets/style.css", "assets/app.js"}
IGNORED_FILES = {"build.log": "built ok\n", "assets/npm-debug.log": "npm warn\n"}


def git(*args):
    res = subprocess.run(["git", "-C", str(SITE), *args], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_repo_on_main():
    assert (SITE / ".git").is_dir()
    assert git("symbolic-ref", "HEAD") == "refs/heads/main"


def test_tracked_files_exact_and_logs_kept():
    assert set(git("ls-files").splitlines()) == TRACKED
    for name, content in IGNORED_FILES.items():
        assert (SITE / name).read_text() == content, f"{name} must stay on disk"
    assert (SITE / "tmp" / "cache.bin").is_file()
    for probe in ("x.log", "deep/er/y.log", "tmp/z.txt"):
        res = subprocess.run(["git", "-C", str(SITE), "check-ignore", "-q", "--no-index", probe])
        assert res.returncode == 0, f"{probe} is not ignored"


def test_single_commit_author_message():
    assert git("rev-list", "--count", "HEAD") == "1"
    assert git("log", "-1", "--format=%an|%ae|%cn|%ce|%s") == (
        "Robin Web|robin@example.org|Robin Web|robin@example.org|Initial site")


def test_annotated_tag():
    assert git("cat-file", "-t", "v0.1") == "tag"
    assert git("rev-parse", "v0.1^{commit}") == git("rev-parse", "HEAD")
    assert git("tag", "-l", "--format=%(contents:subject)", "v0.1") == "First release"


def test_clean_status():
    assert git("rev-parse", "HEAD")
    assert git("status", "--porcelain") == ""
