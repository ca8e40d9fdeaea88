import os
import stat
from pathlib import Path

APP = Path("/app")
HELLO = APP / "greetings" / "hello.txt"
EXPECTED = b"Hello, t1!\nHave a nice day.\n"


def test_directory_mode_750():
    d = APP / "greetings"
    assert d.is_dir() and not d.is_symlink()
    assert stat.S_IMODE(d.stat().st_mode) == 0o750


def test_hello_content_exact():
    assert HELLO.is_file() and not HELLO.is_symlink()
    assert HELLO.read_bytes() == EXPECTED


def test_hello_mode_640():
    assert HELLO.is_file()
    assert stat.S_IMODE(HELLO.stat().st_mode) == 0o640


def test_latest_is_relative_symlink_to_hello():
    link = APP / "latest"
    assert link.is_symlink()
    target = os.readlink(link)
    assert not target.startswith("/"), f"link target is absolute: {target}"
    assert os.path.normpath(target) == "greetings/hello.txt"
    assert link.read_bytes() == EXPECTED


def test_count_matches_size():
    count = APP / "greetings" / "count.txt"
    assert HELLO.is_file()
    assert count.read_text() == f"{HELLO.stat().st_size}\n"
    assert HELLO.stat().st_size == len(EXPECTED)
