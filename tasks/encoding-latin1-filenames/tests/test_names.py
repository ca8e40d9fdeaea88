import os
from pathlib import Path

ROOT = b"/app/import"
FILES = {  # final path -> content
    "Résumé.txt": "Résumé.txt\n", "Café Menü.pdf": "Café Menü.pdf\n", "Ångström.csv": "Ångström.csv\n",
    "naïve notes.md": "naïve notes.md\n", "plain.txt": "plain.txt\n", "déjà vu/über.txt": "déjà vu/über.txt\n",
    "Ok-ünïcode/straße.txt": "already utf-8\n",
}
RENAMED = ["Ångström.csv", "Café Menü.pdf", "Résumé.txt", "déjà vu", "déjà vu/über.txt", "naïve notes.md"]


def walk():
    out = {}
    for d, dirs, files in os.walk(ROOT):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, ROOT)] = open(p, "rb").read()
    return out


def test_all_names_utf8():
    for d, dirs, files in os.walk(ROOT):
        for n in dirs + files:
            n.decode("utf-8")
    assert walk()


def test_files_renamed_contents_kept():
    got = walk()
    want = {k.encode(): v.encode() for k, v in FILES.items()}
    assert got == want


def test_renamed_list():
    assert Path("/app/renamed.txt").read_bytes() == b"".join(
        p.encode() + b"\n" for p in sorted(RENAMED, key=str.encode))
