import os
import subprocess
import tarfile
from pathlib import Path

import pytest

SCRIPT = Path("/app/backup.sh")


def run(*args, now=None):
    env = dict(os.environ)
    env.pop("BACKUP_NOW", None)
    if now:
        env["BACKUP_NOW"] = now
    return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=60,
                          env=env, cwd="/tmp")


@pytest.fixture
def src(tmp_path):
    d = tmp_path / "my data" / "proj"
    (d / "sub dir").mkdir(parents=True)
    (d / "logs").mkdir()
    (d / "a.txt").write_text("alpha\n")
    (d / "sub dir" / "b c.txt").write_text("beta gamma\n")
    (d / "logs" / "x.log").write_text("log\n")
    (d / "keep.log.bak").write_text("bak\n")
    (d / "scratch.tmp").write_text("tmp\n")
    return d


def members(archive):
    with tarfile.open(archive, "r:gz") as t:
        return {m.name.rstrip("/"): (t.extractfile(m).read() if m.isfile() else None) for m in t.getmembers()}


def test_creates_named_archive(src, tmp_path):
    dest = tmp_path / "out dir"
    res = run(src, dest, now="20240315-101112")
    assert res.returncode == 0, res.stderr
    archive = dest / "backup-20240315-101112.tar.gz"
    assert archive.is_file()
    assert Path(res.stdout.strip()).resolve() == archive.resolve()


def test_archive_contents(src, tmp_path):
    res = run(src, tmp_path / "o", now="20240315-101112")
    assert res.returncode == 0, res.stderr
    m = members(tmp_path / "o" / "backup-20240315-101112.tar.gz")
    files = {k: v for k, v in m.items() if v is not None}
    assert files == {"proj/a.txt": b"alpha\n", "proj/sub dir/b c.txt": b"beta gamma\n", "proj/logs/x.log": b"log\n",
                     "proj/keep.log.bak": b"bak\n", "proj/scratch.tmp": b"tmp\n"}
    assert all(k == "proj" or k.startswith("proj/") for k in m)


def test_backupignore_respected(src, tmp_path):
    (src / ".backupignore").write_text("*.tmp\n\nlogs\n")
    res = run(src, tmp_path / "o", now="20240315-101112")
    assert res.returncode == 0, res.stderr
    names = set(members(tmp_path / "o" / "backup-20240315-101112.tar.gz"))
    assert "proj/scratch.tmp" not in names and not any(n.startswith("proj/logs") for n in names)
    assert {"proj/a.txt", "proj/sub dir/b c.txt", "proj/keep.log.bak"} <= names


def test_default_rotation_keeps_five(src, tmp_path):
    dest = tmp_path / "o"
    dest.mkdir()
    (dest / "notes.txt").write_text("mine\n")
    (dest / "backup-readme.md").write_text("not a backup archive\n")
    stamps = ["20240101-000000", "20231231-235959", "20240102-000000", "20240101-120000",
              "20240105-080000", "20240103-000000", "20240104-000000"]
    for s in stamps:
        res = run(src, dest, now=s)
        assert res.returncode == 0, res.stderr
    left = sorted(p.name for p in dest.glob("backup-*.tar.gz"))
    assert left == [f"backup-{s}.tar.gz" for s in sorted(stamps)[-5:]]
    assert (dest / "notes.txt").read_text() == "mine\n" and (dest / "backup-readme.md").exists()


def test_keep_argument(src, tmp_path):
    dest = tmp_path / "o"
    for s in ["20240101-000001", "20240101-000002", "20240101-000003", "20240101-000004"]:
        assert run(src, dest, 2, now=s).returncode == 0
    assert sorted(p.name for p in dest.glob("backup-*")) == ["backup-20240101-000003.tar.gz",
                                                            "backup-20240101-000004.tar.gz"]


def test_clock_stamp_when_unset(src, tmp_path):
    res = run(src, tmp_path / "o")
    assert res.returncode == 0, res.stderr
    names = [p.name for p in (tmp_path / "o").glob("backup-*.tar.gz")]
    assert len(names) == 1
    import re
    import time
    m = re.fullmatch(r"backup-(\d{8}-\d{6})\.tar\.gz", names[0])
    assert m
    stamp = time.mktime(time.strptime(m.group(1), "%Y%m%d-%H%M%S"))
    assert abs(stamp - time.time()) < 120


def test_missing_source_fails_cleanly(tmp_path):
    dest = tmp_path / "o"
    res = run(tmp_path / "does-not-exist", dest, now="20240101-000000")
    assert res.returncode != 0
    assert res.stderr.strip()
    assert not list(dest.glob("*")) if dest.exists() else True
