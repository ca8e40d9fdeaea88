"""Taking ``$T1_PRIVATE`` out of the sandbox: only plain files and directories land, and only under the
destination, on every Python 3.11 (Debian 12's 3.11.2 has no ``extractall(filter=...)``)."""

from __future__ import annotations

import io
import tarfile

import pytest

from t1env.sandbox.base import _extract_plain


def _tar(entries: list[tarfile.TarInfo], data: bytes = b"x") -> tarfile.TarFile:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for e in entries:
            t.addfile(e, io.BytesIO(data) if e.isreg() else None)
    buf.seek(0)
    return tarfile.open(fileobj=buf)


def _reg(name: str, mode: int = 0o644) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode = 1, mode
    return info


def test_plain_files_land_and_links_and_devices_do_not(tmp_path):
    link = tarfile.TarInfo("escape")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    fifo = tarfile.TarInfo("pipe")
    fifo.type = tarfile.FIFOTYPE
    _extract_plain(_tar([_reg("keys/answer.txt", 0o4755), link, fifo]), tmp_path)
    assert (tmp_path / "keys/answer.txt").read_bytes() == b"x"
    assert not (tmp_path / "keys/answer.txt").stat().st_mode & 0o4000  # no setuid survives
    assert not (tmp_path / "escape").exists() and not (tmp_path / "pipe").exists()


@pytest.mark.parametrize("name", ["../outside.txt", "/abs/outside.txt", "a/../../outside.txt"])
def test_a_member_that_climbs_out_is_an_error(tmp_path, name):
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(tarfile.TarError, match="outside"):
        _extract_plain(_tar([_reg(name)]), dest)
    assert not (tmp_path / "outside.txt").exists()
