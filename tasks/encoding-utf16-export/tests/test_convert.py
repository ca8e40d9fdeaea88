import hashlib
from pathlib import Path

SRC = Path("/app/export.csv")
SHA = "03b1734c0abe6fb7eb1806520fad841f3de403626b08bdc3107712350605c904"


def source_text():
    raw = SRC.read_bytes()
    assert hashlib.sha256(raw).hexdigest() == SHA, "export.csv was modified"
    assert raw[:2] == b"\xff\xfe"
    return raw[2:].decode("utf-16-le").replace("\r\n", "\n")


def test_utf8_copy_bytes():
    want = source_text().encode("utf-8")
    got = Path("/app/export.utf8.csv").read_bytes()
    assert not got.startswith(b"\xef\xbb\xbf"), "BOM present"
    assert b"\r" not in got, "CR present"
    assert got == want


def test_standard_csv():
    lines = source_text().splitlines()
    want = ["id,name,city,amount"]
    for line in lines[1:]:
        i, name, city, amount = line.split(";")
        want.append(f"{i},{name},{city},{amount.replace(',', '.')}")
    got = Path("/app/export.std.csv").read_bytes()
    assert not got.startswith(b"\xef\xbb\xbf") and b"\r" not in got
    assert got.decode("utf-8") == "\n".join(want) + "\n"


def test_non_ascii_names():
    names = sorted({l.split(";")[1] for l in source_text().splitlines()[1:] if any(ord(c) > 127 for c in l.split(";")[1])})
    assert len(names) >= 5
    assert Path("/app/non_ascii_names.txt").read_bytes().decode("utf-8") == "".join(n + "\n" for n in names)
