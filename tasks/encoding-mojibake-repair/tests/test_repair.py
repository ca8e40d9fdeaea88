from pathlib import Path

import gen


def ids(lines):
    return [line.split("|", 1)[0] for line in lines]


def test_input_unchanged():
    # unchanged, and the repair was written beside it: one output line per input line, same ids in the same order
    raw, _ = gen.damaged()
    assert Path("/app/customers.txt").read_bytes() == raw
    fixed = Path("/app/customers.fixed.txt").read_bytes().decode("latin-1").split("\n")  # ids are ASCII either way
    assert ids(fixed[:-1]) == ids(raw.decode("latin-1").split("\n")[:-1]) and fixed[-1] == ""


def test_fixed_file_valid_utf8():
    data = Path("/app/customers.fixed.txt").read_bytes()
    assert not data.startswith(b"\xef\xbb\xbf") and b"\r" not in data and data.endswith(b"\n")
    text = data.decode("utf-8")
    assert "Ã" not in text
    # every record kept (an empty or truncated file is valid UTF-8 too)
    assert ids(text.split("\n")[:-1]) == ids(gen.clean_lines())
    assert not text.isascii(), "the accented letters were stripped, not repaired"


def test_fixed_lines_exact():
    got = Path("/app/customers.fixed.txt").read_text(encoding="utf-8").split("\n")
    assert got == gen.clean_lines() + [""]


def test_report_counts():
    _, kinds = gen.damaged()
    want = f"ok {kinds.count('ok')}\ndouble_encoded {kinds.count('mojibake')}\nlatin1 {kinds.count('latin1')}\n"
    assert Path("/app/repair-report.txt").read_text() == want
