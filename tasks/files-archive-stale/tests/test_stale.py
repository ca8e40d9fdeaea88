import os
from pathlib import Path

CUTOFF = 1704067200
MTIMES = {"reports/2023/q1.txt": 1680429600, "reports/2023/q4.txt": 1704067199, "reports/2024/q1.txt": 1711958400,
          "reports/draft old.txt": 1655294400, "scratch/tmp1.dat": 1701302400, "scratch/keep/recent.dat": 1709208000,
          "scratch/keep/edge.dat": 1704067200, "notes.md": 1609459200, "todo.md": 1714885505,
          ".hidden/old-config": 1580608922}
STALE = sorted((p for p, t in MTIMES.items() if t < CUTOFF), key=str.encode)


def tree(root):
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = Path(d) / f
            if not p.is_symlink():
                out[p.relative_to(root).as_posix()] = p
    return out


def test_stale_files_moved_intact():
    got = tree("/app/stale")
    assert sorted(got) == STALE
    for rel, p in got.items():
        assert p.read_text() == rel + "\n"
        assert int(p.stat().st_mtime) == MTIMES[rel], rel


def test_recent_files_stay():
    got = tree("/app/work")
    assert sorted(got) == sorted(p for p, t in MTIMES.items() if t >= CUTOFF)
    for rel, p in got.items():
        assert int(p.stat().st_mtime) == MTIMES[rel]


def test_symlink_left_and_empty_dirs_removed():
    link = Path("/app/work/link-to-q1")
    assert link.is_symlink() and os.readlink(link) == "reports/2023/q1.txt"
    assert Path("/app/stale/reports/2023/q1.txt").is_file()
    assert not Path("/app/work/reports/2023").exists()
    assert not Path("/app/work/.hidden").exists()
    assert Path("/app/work/scratch/keep").is_dir() and not Path("/app/work/scratch/tmp1.dat").exists()


def test_stale_list():
    assert Path("/app/stale.txt").read_text() == "".join(p + "\n" for p in STALE)
