import os
import zipfile
from pathlib import Path

ROOT = Path("/app/release")
FILES = ["LICENSE", "bin/tool", "data.bin", "docs/README.txt", "docs/manual.txt"]


def z():
    return zipfile.ZipFile("/app/tool-3.0.zip")


def test_contents():
    with z() as zf:
        names = [i.filename for i in zf.infolist() if not i.is_dir()]
        assert sorted(names) == ["tool-3.0/" + f for f in FILES]
        for f in FILES:
            assert zf.read("tool-3.0/" + f) == (ROOT / f).read_bytes(), f
        assert zf.testzip() is None


def test_compression_methods():
    with z() as zf:
        infos = {i.filename: i for i in zf.infolist()}
        assert infos["tool-3.0/data.bin"].compress_type == zipfile.ZIP_STORED
        for f in FILES:
            if f != "data.bin":
                assert infos["tool-3.0/" + f].compress_type == zipfile.ZIP_DEFLATED, f
        assert infos["tool-3.0/docs/manual.txt"].compress_size < infos["tool-3.0/docs/manual.txt"].file_size * 0.8


def test_unix_modes():
    with z() as zf:
        for i in zf.infolist():
            if i.is_dir():
                continue
            mode = (i.external_attr >> 16) & 0o7777
            want = 0o755 if i.filename == "tool-3.0/bin/tool" else 0o644
            assert mode == want, (i.filename, oct(mode))
    assert os.access(ROOT / "bin" / "tool", os.X_OK)


def test_order_and_comment():
    with z() as zf:
        names = [i.filename for i in zf.infolist()]
        assert names == sorted(names)
        assert zf.comment == b"tool 3.0"
        assert any(n.endswith("docs/manual.txt") for n in names)
