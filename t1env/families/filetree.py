"""files: organise a messy inbox folder by a rule, removing duplicate files and logging them.

The rule (by extension, or by the date in the name into ``YYYY/MM``), name normalisation
(lower-case, spaces to underscores) and the nested inbox vary by seed; a few files are byte-for-byte
duplicates under other names. Tests compare the final tree with the expected one by content hash.

The splits draw from disjoint pools (``docs/families.md``): test instances sort by held-out rules (by the
year and month of the name's date into one ``YYYY-MM`` folder, or by kind of file into ``images/``,
``documents/``, ``data/``, ``other/``), normalise names their own way (lower case, spaces to ``-``), keep
the duplicate whose path sorts *last*, and have their own file stems, copy names, folders, output and
log names and instruction wording.
"""

from __future__ import annotations

import hashlib
import random
import re

from t1env.families.base import Family, Instance, split_of_seed

STEMS = [
    "Invoice",
    "report",
    "Scan",
    "holiday photo",
    "notes",
    "Budget",
    "contract",
    "receipt",
    "Slides",
    "draft",
    "Meeting Minutes",
    "backup",
    "todo",
    "Letter",
    "summary",
    "plan",
    "export",
    "statement",
]
EXTS = ["txt", "TXT", "pdf", "csv", "jpg", "JPG", "png", "md", "log", "json", ""]
SUBDIRS = ["", "", "", "old", "Downloads", "misc stuff", "old/2020", "phone"]
KINDS = {"images": ("jpg", "png", "gif"), "documents": ("pdf", "txt", "md"), "data": ("csv", "json", "log")}
POOLS = {  # per split: rules, file stems, sub-folders, output folders, duplicate logs, copy-name pattern
    "train": (
        ("ext", "date"),
        STEMS,
        SUBDIRS,
        ["sorted", "organized", "archive", "filed"],
        ["duplicates.txt", "removed.txt", "dupes.log", "deleted-copies.txt"],
        "{stem} (copy)",
    ),
    "test": (
        ("month", "kind"),
        [
            "Agenda",
            "memo",
            "Photo",
            "ledger",
            "Quote",
            "timesheet",
            "Poster",
            "sketch",
            "Payslip",
            "minutes",
            "Itinerary",
            "log book",
            "Recipe",
            "manual",
            "Ticket",
        ],
        ["", "", "", "inbox-old", "Desktop", "saved files", "2019/misc", "camera"],
        ["tidy", "library", "shelved", "by-rule", "cabinet", "stowed"],
        ["copies.txt", "dropped.log", "dup-list.txt", "same-content.txt", "doubles.log"],
        "{stem} - Copy",
    ),
}
EXTS_TEST = ["txt", "pdf", "PDF", "csv", "jpg", "png", "PNG", "gif", "md", "log", "json", "xml", "zip", ""]
# the oracle's code for a file's destination folder (under the output folder) by rule; _destination is the generator's
DEST = {
    "ext": 'dest = name.rsplit(".", 1)[1].lower() if "." in name else "noext"',
    "date": 'm = re.search(r"(\\d{4})[-_]?(\\d{2})[-_]?(\\d{2})", name)\n    dest = f"{m.group(1)}/{m.group(2)}"',
    "month": 'm = re.search(r"(\\d{4})[-_]?(\\d{2})[-_]?(\\d{2})", name)\n    dest = f"{m.group(1)}-{m.group(2)}"',
    "kind": (
        'ext = name.rsplit(".", 1)[1].lower() if "." in name else ""\n'
        '    dest = next((k for k, exts in KINDS.items() if ext in exts), "other")'
    ),
}
NORMALIZE = {"train": 'name.lower().replace(" ", "_")', "test": 'name.lower().replace(" ", "-")'}


def _destination(rule: str, name: str) -> str:
    ext = name.rsplit(".", 1)[1].lower() if "." in name else ""
    if rule == "ext":
        return ext or "noext"
    if rule == "kind":
        return next((k for k, exts in KINDS.items() if ext in exts), "other")
    y, m, _ = re.search(r"(\d{4})[-_]?(\d{2})[-_]?(\d{2})", name).groups()
    return f"{y}/{m}" if rule == "date" else f"{y}-{m}"


def _normalized(split: str, name: str) -> str:
    return name.lower().replace(" ", "_" if split == "train" else "-")


ORACLE = r"""
import hashlib, os, re, shutil, sys
KINDS = KINDS_LITERAL
normalize, out, log = sys.argv[1] == "1", sys.argv[2], sys.argv[3]
inbox = "/app/inbox"
files = sorted((os.path.relpath(os.path.join(d, f), inbox) for d, _, fs in os.walk(inbox) for f in fs), reverse=LAST)
seen, dups = {}, []
for rel in files:
    h = hashlib.sha256(open(os.path.join(inbox, rel), "rb").read()).hexdigest()
    if h in seen:
        dups.append(rel)
        os.remove(os.path.join(inbox, rel))
        continue
    seen[h] = rel
    name = os.path.basename(rel)
    DEST_CODE
    if normalize:
        name = NORMALIZE_CODE
    os.makedirs(f"/app/{out}/{dest}", exist_ok=True)
    shutil.move(os.path.join(inbox, rel), f"/app/{out}/{dest}/{name}")
for d, _, _ in sorted(os.walk(inbox), reverse=True):
    if d != inbox:
        os.rmdir(d)
open(f"/app/{log}", "w").write("".join(r + "\n" for r in sorted(dups)))
"""

TESTS = r"""
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
"""


class FileTree(Family):
    name = "files"
    category = "files"
    difficulty = "medium"
    description = "Organise a nested inbox by a rule (extension, date, month, kind); drop and log duplicate files."

    def build(self, rng: random.Random, seed: int) -> Instance:
        split = split_of_seed(seed)
        rules, stems, subdirs, outs, logs, copy_pattern = POOLS[split]
        rule = rng.choice(rules)
        out = rng.choice(outs)
        log = rng.choice(logs)
        normalize = rng.random() < 0.5
        keep_last = split == "test"
        dated = rule in ("date", "month")
        exts = EXTS if split == "train" else EXTS_TEST
        files: dict[str, bytes] = {}
        used_names: set[str] = set()
        target = rng.randint(18, 40)
        while len(files) < target:
            y, m, d = rng.randint(2015, 2024), rng.randint(1, 12), rng.randint(1, 28)
            date = rng.choice([f"{y}{m:02d}{d:02d}", f"{y}-{m:02d}-{d:02d}", f"{y}_{m:02d}_{d:02d}"])
            stem = rng.choice(stems)
            base = (
                rng.choice([f"{stem} {date}", f"{date} {stem}", f"{stem}_{date}", f"{stem}-{date}"])
                if dated
                else rng.choice([stem, f"{stem} {rng.randint(1, 99)}", f"{stem}_{date}"])
            )
            ext = rng.choice(exts if not dated else [e for e in exts if e])
            name = f"{base}.{ext}" if ext else base
            key = _normalized(split, name) if normalize else name
            if key in used_names or key.lower() in {u.lower() for u in used_names}:
                continue
            used_names.add(key)
            rel = f"{rng.choice(subdirs)}/{name}".lstrip("/")
            body = "".join(
                f"{rng.choice(stems)} line {i} value {rng.randint(0, 10**6)}\n" for i in range(rng.randint(1, 12))
            )
            files[rel] = body.encode()
        # duplicates: copies of some files under other (unique) names
        originals = sorted(files)
        for src in rng.sample(originals, rng.randint(2, 5)):
            name = src.rsplit("/", 1)[-1]
            stem, dot, ext = name.rpartition(".")
            copy_name = f"{copy_pattern.format(stem=stem)}{dot}{ext}" if dot else copy_pattern.format(stem=name)
            rel = f"{rng.choice(subdirs)}/{copy_name}".lstrip("/")
            key = _normalized(split, copy_name) if normalize else copy_name
            if rel in files or key in used_names:
                continue
            used_names.add(key)
            files[rel] = files[src]

        # expected outcome
        seen: dict[bytes, str] = {}
        expected, dups = {}, []
        for rel in sorted(files, reverse=keep_last):
            if files[rel] in seen:
                dups.append(rel)
                continue
            seen[files[rel]] = rel
            name = rel.rsplit("/", 1)[-1]
            dest = _destination(rule, name)
            if normalize:
                name = _normalized(split, name)
            expected[f"{dest}/{name}"] = hashlib.sha256(files[rel]).hexdigest()
        dups.sort()

        if rule == "ext":
            rule_text = (
                f"into `/app/{out}/EXT/`, where EXT is the file's extension in lower case (the part after the\n"
                f"last `.` of the name); files without an extension go to `/app/{out}/noext/`"
            )
        elif rule == "date":
            rule_text = (
                f"into `/app/{out}/YYYY/MM/` by the date in the file name (written `YYYYMMDD`, `YYYY-MM-DD` or\n"
                "`YYYY_MM_DD`; each name holds exactly one date)"
            )
        elif rule == "month":
            rule_text = (
                f"into the folder `/app/{out}/YYYY-MM/` named after the year and month of the date that each\n"
                "  file name contains (the date is written `YYYYMMDD`, `YYYY-MM-DD` or `YYYY_MM_DD`; one per name)"
            )
        else:
            rule_text = (
                f"into a folder under `/app/{out}/` named after its kind, decided by the extension (the part\n"
                "  after the last `.`, compared in lower case):\n  "
                + "; ".join(f"`{k}/` for {', '.join(f'`{e}`' for e in v)}" for k, v in KINDS.items())
                + ";\n  `other/` for every other extension and for names without one"
            )
        if split == "train":
            norm_text = (
                "File names are normalised on the way: lower case, spaces replaced by `_`."
                if normalize
                else "File names stay exactly as they are."
            )
            instruction = (
                "`/app/inbox/` is a messy folder (with sub-folders) of files. Organise it:\n\n"
                f"* move every file {rule_text}. {norm_text}\n"
                "* some files are byte-for-byte duplicates of others. Of each set of identical files keep only the one whose\n"
                "  path relative to `/app/inbox/` sorts first (plain byte order) and delete the others;\n"
                "* write the relative paths (inside `inbox/`) of the deleted duplicates, sorted, one per line, to\n"
                f"  `/app/{log}` (an empty file if there are none);\n"
                "* afterwards `/app/inbox/` exists and is empty (remove its sub-folders).\n"
            )
        else:
            norm_text = (
                "  While moving, rename each file to lower case with every space turned into `-`."
                if normalize
                else "  Keep every file name unchanged."
            )
            instruction = (
                "Tidy up `/app/inbox/`, a folder tree of files that grew without any order:\n\n"
                f"1. Put each file {rule_text}.\n{norm_text}\n"
                "2. Several files have identical contents under different names. From each group of identical files keep\n"
                "   just one, the one whose path relative to `/app/inbox/` is **last** in plain byte order; delete the"
                " rest.\n"
                f"3. List the deleted files in `/app/{log}`: their paths relative to `/app/inbox/`, one per line, in\n"
                "   sorted order (leave the file empty when nothing was deleted).\n"
                "4. When you are done, `/app/inbox/` must still exist, with nothing left in it (no sub-folders either).\n"
            )
        oracle = (
            ORACLE.strip()
            .replace("DEST_CODE", DEST[rule])
            .replace("NORMALIZE_CODE", NORMALIZE[split])
            .replace("reverse=LAST", f"reverse={keep_last}")
        )
        oracle = (
            oracle.replace("KINDS = KINDS_LITERAL", f"KINDS = {KINDS!r}")
            if rule == "kind"
            else oracle.replace("KINDS = KINDS_LITERAL\n", "")
        )
        solve = (
            f"cat > /tmp/organise.py <<'PY'\n{oracle}\nPY\n"
            f"python3 /tmp/organise.py {int(normalize)} {out} {log}\nfind {out} -type f | head -n 20\n"
        )
        tests = f"OUT = {out!r}\nLOG = {log!r}\nEXPECTED = {expected!r}\nDUPLICATES = {dups!r}\n" + TESTS
        by = {"ext": "extension", "date": "date", "month": "month", "kind": "kind of file"}[rule]
        return Instance(
            title=f"Organise an inbox folder by {by} and drop duplicates",
            instruction=instruction,
            solve=solve,
            tests={"test_tree.py": tests},
            files={f"inbox/{rel}": body for rel, body in files.items()},
            tags=("files", "find", "dedupe", rule),
            tools=("python3",),
            max_turns=40,
        )
