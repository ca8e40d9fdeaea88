"""files: organise a messy inbox folder by a rule, removing duplicate files and logging them.

The rule (by extension, or by the date in the name into ``YYYY/MM``), name normalisation
(lower-case, spaces to underscores) and the nested inbox vary by seed; a few files are byte-for-byte
duplicates under other names. Tests compare the final tree with the expected one by content hash.
"""

from __future__ import annotations

import hashlib
import random
import re

from t1env.families import Family, Instance

STEMS = ["Invoice", "report", "Scan", "holiday photo", "notes", "Budget", "contract", "receipt", "Slides", "draft",
         "Meeting Minutes", "backup", "todo", "Letter", "summary", "plan", "export", "statement"]
EXTS = ["txt", "TXT", "pdf", "csv", "jpg", "JPG", "png", "md", "log", "json", ""]
SUBDIRS = ["", "", "", "old", "Downloads", "misc stuff", "old/2020", "phone"]

ORACLE = r'''
import hashlib, json, os, re, shutil, sys
rule, normalize, out, log = sys.argv[1], sys.argv[2] == "1", sys.argv[3], sys.argv[4]
inbox = "/app/inbox"
files = sorted(os.path.relpath(os.path.join(d, f), inbox) for d, _, fs in os.walk(inbox) for f in fs)
seen, dups = {}, []
for rel in files:
    h = hashlib.sha256(open(os.path.join(inbox, rel), "rb").read()).hexdigest()
    if h in seen:
        dups.append(rel)
        os.remove(os.path.join(inbox, rel))
        continue
    seen[h] = rel
    name = os.path.basename(rel)
    if rule == "ext":
        ext = name.rsplit(".", 1)[1].lower() if "." in name else "noext"
        dest = ext
    else:
        m = re.search(r"(\d{4})[-_]?(\d{2})[-_]?(\d{2})", name)
        dest = f"{m.group(1)}/{m.group(2)}"
    if normalize:
        name = name.lower().replace(" ", "_")
    os.makedirs(f"/app/{out}/{dest}", exist_ok=True)
    shutil.move(os.path.join(inbox, rel), f"/app/{out}/{dest}/{name}")
for d, _, _ in sorted(os.walk(inbox), reverse=True):
    if d != inbox:
        os.rmdir(d)
open(f"/app/{log}", "w").write("".join(r + "\n" for r in sorted(dups)))
'''

TESTS = r'''
import hashlib
from pathlib import Path

APP = Path("/app")


def tree():
    root = APP / OUT
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*") if p.is_file()} if root.is_dir() else {}


def test_inbox_emptied():
    inbox = APP / "inbox"
    assert inbox.is_dir(), "keep the (empty) inbox folder"
    assert not [p for p in inbox.rglob("*") if not p.is_dir()]


def test_every_unique_file_at_its_destination():
    t = tree()
    wrong = [d for d, h in EXPECTED.items() if t.get(d) != h]
    assert not wrong, f"{len(wrong)} files missing or wrong, e.g. {wrong[:3]}"


def test_nothing_extra_in_sorted():
    extra = sorted(set(tree()) - set(EXPECTED))
    assert tree() and not extra, f"unexpected files: {extra[:5]}"


def test_no_duplicate_contents_kept():
    hashes = list(tree().values())
    assert hashes and len(hashes) == len(set(hashes))


def test_duplicates_logged():
    lines = [line for line in (APP / LOG).read_text().splitlines() if line.strip()]
    assert lines == DUPLICATES
'''


class FileTree(Family):
    name = "files"
    category = "files"
    difficulty = "medium"
    description = "Organise a nested inbox by extension or by date in the name; drop and log duplicate files."

    def build(self, rng: random.Random, seed: int) -> Instance:
        rule = rng.choice(["ext", "date"])
        out = rng.choice(["sorted", "organized", "archive", "filed"])
        log = rng.choice(["duplicates.txt", "removed.txt", "dupes.log", "deleted-copies.txt"])
        normalize = rng.random() < 0.5
        files: dict[str, bytes] = {}
        used_names: set[str] = set()
        target = rng.randint(18, 40)
        while len(files) < target:
            y, m, d = rng.randint(2015, 2024), rng.randint(1, 12), rng.randint(1, 28)
            date = rng.choice([f"{y}{m:02d}{d:02d}", f"{y}-{m:02d}-{d:02d}", f"{y}_{m:02d}_{d:02d}"])
            stem = rng.choice(STEMS)
            base = rng.choice([f"{stem} {date}", f"{date} {stem}", f"{stem}_{date}", f"{stem}-{date}"]) if rule == "date" \
                else rng.choice([stem, f"{stem} {rng.randint(1, 99)}", f"{stem}_{date}"])
            ext = rng.choice(EXTS if rule == "ext" else [e for e in EXTS if e])
            name = f"{base}.{ext}" if ext else base
            key = name.lower().replace(" ", "_") if normalize else name
            if key in used_names or key.lower() in {u.lower() for u in used_names}:
                continue
            used_names.add(key)
            rel = f"{rng.choice(SUBDIRS)}/{name}".lstrip("/")
            body = "".join(f"{rng.choice(STEMS)} line {i} value {rng.randint(0, 10**6)}\n" for i in range(rng.randint(1, 12)))
            files[rel] = body.encode()
        # duplicates: copies of some files under other (unique) names
        originals = sorted(files)
        for src in rng.sample(originals, rng.randint(2, 5)):
            name = src.rsplit("/", 1)[-1]
            stem, dot, ext = name.rpartition(".")
            copy_name = f"{stem} (copy){dot}{ext}" if dot else f"{name} (copy)"
            rel = f"{rng.choice(SUBDIRS)}/{copy_name}".lstrip("/")
            key = copy_name.lower().replace(" ", "_") if normalize else copy_name
            if rel in files or key in used_names:
                continue
            used_names.add(key)
            files[rel] = files[src]

        # expected outcome
        seen: dict[bytes, str] = {}
        expected, dups = {}, []
        for rel in sorted(files):
            if files[rel] in seen:
                dups.append(rel)
                continue
            seen[files[rel]] = rel
            name = rel.rsplit("/", 1)[-1]
            if rule == "ext":
                dest = name.rsplit(".", 1)[1].lower() if "." in name else "noext"
            else:
                mt = re.search(r"(\d{4})[-_]?(\d{2})[-_]?(\d{2})", name)
                dest = f"{mt.group(1)}/{mt.group(2)}"
            if normalize:
                name = name.lower().replace(" ", "_")
            expected[f"{dest}/{name}"] = hashlib.sha256(files[rel]).hexdigest()

        if rule == "ext":
            rule_text = (f"into `/app/{out}/EXT/`, where EXT is the file's extension in lower case (the part after the\n"
                         f"last `.` of the name); files without an extension go to `/app/{out}/noext/`")
        else:
            rule_text = (f"into `/app/{out}/YYYY/MM/` by the date in the file name (written `YYYYMMDD`, `YYYY-MM-DD` or\n"
                         "`YYYY_MM_DD`; each name holds exactly one date)")
        norm_text = ("File names are normalised on the way: lower case, spaces replaced by `_`."
                     if normalize else "File names stay exactly as they are.")
        instruction = (
            "`/app/inbox/` is a messy folder (with sub-folders) of files. Organise it:\n\n"
            f"* move every file {rule_text}. {norm_text}\n"
            "* some files are byte-for-byte duplicates of others. Of each set of identical files keep only the one whose\n"
            "  path relative to `/app/inbox/` sorts first (plain byte order) and delete the others;\n"
            "* write the relative paths (inside `inbox/`) of the deleted duplicates, sorted, one per line, to\n"
            f"  `/app/{log}` (an empty file if there are none);\n"
            "* afterwards `/app/inbox/` exists and is empty (remove its sub-folders).\n"
        )
        solve = (f"cat > /tmp/organise.py <<'PY'\n{ORACLE.strip()}\nPY\n"
                 f"python3 /tmp/organise.py {rule} {int(normalize)} {out} {log}\nfind {out} -type f | head -n 20\n")
        tests = f"OUT = {out!r}\nLOG = {log!r}\nEXPECTED = {expected!r}\nDUPLICATES = {dups!r}\n" + TESTS
        return Instance(
            title=f"Organise an inbox folder by {'extension' if rule == 'ext' else 'date'} and drop duplicates",
            instruction=instruction,
            solve=solve,
            tests={"test_tree.py": tests},
            files={f"inbox/{rel}": body for rel, body in files.items()},
            tags=("files", "find", "dedupe", rule),
            tools=("python3",),
            max_turns=40,
        )
