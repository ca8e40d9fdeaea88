import os
import stat
import subprocess
from pathlib import Path

TOOL = "/app/bin/snapshot"


def snap(src, dest, stamp, keep=None):
    env = {"PATH": "/usr/bin:/bin", "SNAPSHOT_TIME": stamp}
    if keep is not None:
        env["KEEP"] = str(keep)
    assert os.access(TOOL, os.X_OK), "snapshot missing or not executable"
    return subprocess.run([TOOL, str(src), str(dest)], capture_output=True, text=True, timeout=30, env=env)


def make_src(root):
    (root / "sub dir" / "deep").mkdir(parents=True)
    (root / "a.txt").write_text("a")
    (root / "sub dir" / "b.txt").write_text("bb")
    (root / "sub dir" / "deep" / "c.bin").write_bytes(b"\0\1\2")
    (root / ".hidden").write_text("h")
    (root / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(root / "run.sh", 0o750)
    for i, p in enumerate(sorted(root.rglob("*"))):
        os.utime(p, (1700000000 + i, 1700000000 + i), follow_symlinks=False)


def files(root):
    out = {}
    for d, _, fs in os.walk(root):
        for f in fs:
            p = Path(d) / f
            out[p.relative_to(root).as_posix()] = p
    return out


def test_shipped_snapshot():
    s = Path("/app/backups/20240101-000000")
    assert os.readlink("/app/backups/latest") == "20240101-000000"
    assert sorted(files(s)) == [".snapshotignore", "a.txt", "docs/meeting notes.md"]
    assert (s / "docs" / "meeting notes.md").read_text() == "notes\n"


def test_full_copy_metadata(tmp_path):
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    make_src(src)
    os.symlink("sub dir/b.txt", src / "link")
    res = snap(src, dest, "20240301-120000")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "copied 5 linked 0\n"
    s = dest / "20240301-120000"
    for rel, p in files(src).items():
        q = s / rel
        if p.is_symlink():
            assert q.is_symlink() and os.readlink(q) == os.readlink(p)
            continue
        assert q.read_bytes() == p.read_bytes(), rel
        assert int(q.stat().st_mtime) == int(p.stat().st_mtime), rel
        assert stat.S_IMODE(q.stat().st_mode) == stat.S_IMODE(p.stat().st_mode), rel
    assert int((s / "sub dir").stat().st_mtime) == int((src / "sub dir").stat().st_mtime)


def test_incremental_hardlinks(tmp_path):
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    make_src(src)
    assert snap(src, dest, "20240301-120000").returncode == 0
    (src / "a.txt").write_text("changed")
    (src / "new.txt").write_text("n")
    (src / "sub dir" / "deep" / "c.bin").unlink()
    res = snap(src, dest, "20240302-120000")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "copied 2 linked 3\n"
    one, two = dest / "20240301-120000", dest / "20240302-120000"
    assert (two / "sub dir" / "b.txt").stat().st_ino == (one / "sub dir" / "b.txt").stat().st_ino
    assert (two / "a.txt").stat().st_ino != (one / "a.txt").stat().st_ino
    assert (two / "a.txt").read_text() == "changed" and (one / "a.txt").read_text() == "a"
    assert not (two / "sub dir" / "deep" / "c.bin").exists() and (one / "sub dir" / "deep" / "c.bin").exists()
    assert os.readlink(dest / "latest") == "20240302-120000"


def test_same_size_changed_mtime_is_copied(tmp_path):
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    make_src(src)
    assert snap(src, dest, "20240301-120000").returncode == 0
    (src / "a.txt").write_text("z")
    os.utime(src / "a.txt", (1800000000, 1800000000))
    res = snap(src, dest, "20240301-130000")
    assert res.stdout == "copied 1 linked 4\n"
    assert (dest / "20240301-130000" / "a.txt").read_text() == "z"


def test_excludes(tmp_path):
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    make_src(src)
    (src / "node_modules" / "x").mkdir(parents=True)
    (src / "node_modules" / "x" / "i.js").write_text("x")
    (src / "sub dir" / "tmp.log").write_text("log")
    (src / ".snapshotignore").write_text("node_modules\n\n*.log\nc.*\n")
    assert snap(src, dest, "20240301-120000").returncode == 0
    got = sorted(files(dest / "20240301-120000"))
    assert got == [".hidden", ".snapshotignore", "a.txt", "run.sh", "sub dir/b.txt"]


def test_retention(tmp_path):
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    make_src(src)
    stamps = [f"202403{d:02d}-000000" for d in range(1, 9)]
    for s in stamps:
        assert snap(src, dest, s, keep=3).returncode == 0
    assert sorted(os.listdir(dest)) == sorted(stamps[-3:] + ["latest"])
    assert os.readlink(dest / "latest") == stamps[-1]
    for s in stamps[:2]:
        assert snap(src, tmp_path / "d2", s).returncode == 0
    assert sorted(os.listdir(tmp_path / "d2")) == sorted(stamps[:2] + ["latest"])


def test_errors(tmp_path):
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    make_src(src)
    assert snap(src, dest, "20240301-120000").returncode == 0
    before = sorted(files(dest))
    res = snap(src, dest, "20240301-120000")
    assert res.returncode == 1 and sorted(files(dest)) == before
    assert snap(tmp_path / "missing", dest, "20240305-000000").returncode == 2
    res = subprocess.run([TOOL, str(src)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 2 and res.stderr
