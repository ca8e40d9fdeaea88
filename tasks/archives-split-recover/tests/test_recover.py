import hashlib
import json
import os
import tarfile
from pathlib import Path

EXP = json.loads((Path(__file__).parent / "expected.json").read_text())
DS = Path("/app/dataset")


def sha(data):
    return hashlib.sha256(data).hexdigest()


def test_reassembled_archive():
    assert sha(Path("/app/dataset.tar.xz").read_bytes()) == EXP["whole"]


def test_dataset_extracted():
    for rel in ("README.txt", "tables/stations.csv", "notes/2024-03.md", "MANIFEST.sha256"):
        assert sha((DS / rel).read_bytes()) == EXP["final"][rel], rel


def test_nested_tar_extracted_and_removed():
    for rel in ("logs/app.log", "logs/db/errors.log", "logs/db/slow.log"):
        assert sha((DS / rel).read_bytes()) == EXP["final"][rel], rel
    assert not (DS / "logs.tar.gz").exists()


def test_nested_zip_extracted_and_removed():
    for rel in ("images/a.raw", "images/b.raw", "images/thumbs/a.raw"):
        assert sha((DS / rel).read_bytes()) == EXP["final"][rel], rel
    assert not (DS / "images.zip").exists()


def test_dataset_tree_exact():
    got = {}
    for dirpath, _, files in os.walk(DS):
        for f in files:
            p = Path(dirpath) / f
            got[p.relative_to(DS).as_posix()] = sha(p.read_bytes())
    assert got == EXP["final"]


def test_bad_files_list():
    assert Path("/app/bad_files.txt").read_text() == "".join(p + "\n" for p in EXP["corrupt"])


def members():
    with tarfile.open("/app/clean.tar.gz", "r:gz") as t:
        return [(m, t.extractfile(m).read() if m.isfile() else None) for m in t.getmembers()]


def test_clean_archive_contents():
    files = {m.name.removeprefix("./"): sha(d) for m, d in members() if m.isfile()}
    want = {"dataset/" + p: h for p, h in EXP["final"].items() if p not in EXP["corrupt"]}
    assert files == want


def test_clean_archive_reproducible_metadata():
    ms = [m for m, _ in members()]
    names = [m.name.removeprefix("./").rstrip("/") for m in ms]
    assert len(ms) >= 9
    assert names == sorted(names, key=str.encode), names
    for m in ms:
        assert m.mtime == 1704067200, (m.name, m.mtime)
        assert (m.uid, m.gid) == (0, 0), m.name
    head = Path("/app/clean.tar.gz").read_bytes()[:10]
    assert head[:3] == b"\x1f\x8b\x08"
    assert head[3] & 0x08 == 0, "gzip header stores a file name"
    assert head[4:8] == b"\0\0\0\0", "gzip header has a timestamp"
