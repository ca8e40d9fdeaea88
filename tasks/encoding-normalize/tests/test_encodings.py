import hashlib
from pathlib import Path

import pytest

from texts import TEXTS

DOCS = Path("/app/docs")
LOGO_SHA256 = hashlib.sha256(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) + b"\r\n\xef\xbb\xbf").hexdigest()




def check(rel):
    data = (DOCS / rel).read_bytes()
    assert not data.startswith(b"\xef\xbb\xbf"), "BOM left"
    assert b"\r" not in data, "CR left"
    assert data.decode("utf-8") == TEXTS[rel]


def test_utf8_bom_crlf():
    check("notes/meeting.txt")


def test_utf16():
    check("notes/jp.txt")


def test_latin1():
    check("legacy/kunden.txt")


def test_cp1252_crlf():
    check("legacy/quotes.md")


def test_missing_final_newline():
    check("readme.txt")


def test_binary_untouched_and_no_stray_files():
    assert hashlib.sha256((DOCS / "logo.png").read_bytes()).hexdigest() == LOGO_SHA256
    files = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*") if p.is_file()}
    assert files == set(TEXTS) | {"logo.png"}
    assert any((DOCS / rel).read_bytes().decode("utf-8", "replace") == TEXTS[rel] for rel in TEXTS)
