from pathlib import Path

import gen


def test_input_unchanged():
    raw, _ = gen.damaged()
    assert Path("/app/customers.txt").read_bytes() == raw
    assert Path("/app/customers.fixed.txt").exists()


def test_fixed_file_valid_utf8():
    data = Path("/app/customers.fixed.txt").read_bytes()
    assert not data.startswith(b"\xef\xbb\xbf") and b"\r" not in data and data.endswith(b"\n")
    data.decode("utf-8")
    assert "Ã" not in data.decode("utf-8")


def test_fixed_lines_exact():
    got = Path("/app/customers.fixed.txt").read_text(encoding="utf-8").split("\n")
    assert got == gen.clean_lines() + [""]


def test_report_counts():
    _, kinds = gen.damaged()
    want = f"ok {kinds.count('ok')}\ndouble_encoded {kinds.count('mojibake')}\nlatin1 {kinds.count('latin1')}\n"
    assert Path("/app/repair-report.txt").read_text() == want
