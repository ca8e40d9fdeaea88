import hashlib
import json
import os
import tarfile
from pathlib import Path

FILES = json.loads((Path(__file__).parent / "files.json").read_text())
SHA = "9eaebb92f069d9a7b0f81c195672dc2841dccef1ae1d8d61d8c05e23da31399e"


def digest(data):
    return hashlib.sha256(data).hexdigest()


def test_backup_unchanged():
    assert digest(Path("/app/backup.tar.gz").read_bytes()) == SHA


def test_restore_only_docs():
    root = Path("/app/restore")
    got = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            got[p.relative_to(root).as_posix()] = digest(p.read_bytes())
    want = {p: h for p, (_, h) in FILES.items() if p.startswith("project/docs/")}
    assert got == want


def test_python_src_archive():
    with tarfile.open("/app/python-src.tar.xz", "r:xz") as t:
        members = t.getmembers()
        assert all(m.isfile() for m in members), [m.name for m in members if not m.isfile()]
        got = {m.name.removeprefix("./"): digest(t.extractfile(m).read()) for m in members}
    want = {p.removeprefix("project/"): h for p, (_, h) in FILES.items()
            if p.startswith("project/src/") and p.endswith(".py")}
    assert got == want


def test_manifest():
    want = "".join(f"{FILES[p][0]} {p}\n" for p in sorted(FILES, key=str.encode))
    assert Path("/app/manifest.txt").read_text() == want
