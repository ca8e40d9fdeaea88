import hashlib
import json
import os
from pathlib import Path

INBOX = Path("/app/inbox")
MANIFEST = json.loads((Path(__file__).parent / "manifest.json").read_text())


def expected():
    keep, dupes = {}, {}
    for p in sorted(MANIFEST, key=lambda s: s.encode()):
        h = MANIFEST[p]
        if h in keep:
            dupes[p] = keep[h]
        else:
            keep[h] = p
    return set(keep.values()), dupes


def current():
    out = {}
    for dirpath, _, files in os.walk(INBOX):
        for f in files:
            full = Path(dirpath) / f
            out[full.relative_to(INBOX).as_posix()] = hashlib.sha256(full.read_bytes()).hexdigest()
    return out


def test_no_duplicate_contents_remain():
    cur = current()
    assert cur, "inbox is empty"
    assert len(set(cur.values())) == len(cur)


def test_exactly_the_first_copies_kept_unchanged():
    kept, _ = expected()
    cur = current()
    assert set(cur) == kept
    for p in kept:
        assert cur[p] == MANIFEST[p], f"{p} was modified"


def test_empty_directories_removed():
    assert INBOX.is_dir()
    empty = [d for d, subdirs, files in os.walk(INBOX) if not subdirs and not files and Path(d) != INBOX]
    assert not empty, empty
    assert not (INBOX / "zz-dupes").exists()
    assert not (INBOX / "notes").exists()


def test_duplicates_report():
    _, dupes = expected()
    want = "".join(f"{d} -> {k}\n" for d, k in sorted(dupes.items(), key=lambda kv: kv[0].encode()))
    assert Path("/app/duplicates.txt").read_text() == want
