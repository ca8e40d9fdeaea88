import subprocess
from pathlib import Path

import wordgen

SCRIPT = Path("/app/matcher.py")


def run(tmp_path, ws, qs, timeout, raw_words=None):
    wf, qf = tmp_path / "w.txt", tmp_path / "q.txt"
    wf.write_text(raw_words if raw_words is not None else "\n".join(ws) + "\n")
    qf.write_text("\n".join(qs) + "\n")
    try:
        res = subprocess.run(["python3", str(SCRIPT), str(wf), str(qf)], capture_output=True, text=True,
                             timeout=timeout, cwd="/tmp")
    except subprocess.TimeoutExpired:
        raise AssertionError(f"matcher.py did not finish within {timeout} s") from None
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


def test_medium_random(tmp_path):
    ws, qs = wordgen.words(11, 20000), wordgen.words(12, 5000, lo=1, hi=5)
    assert run(tmp_path, ws, qs, 12) == wordgen.reference(ws, qs)


def test_duplicates_counted(tmp_path):
    base = wordgen.words(21, 4000, alphabet="abc", lo=1, hi=4)
    ws = base * 5
    qs = wordgen.words(22, 5000, alphabet="abcd", lo=1, hi=4) + ["a", "a", "abc", "cab"]
    assert run(tmp_path, ws, qs, 12) == wordgen.reference(ws, qs)


def test_edge_cases(tmp_path):
    ws = wordgen.words(31, 20000, alphabet="xyz", lo=1, hi=9)
    qs = ["zzzzzzzzzzzzzzzzzzzz", "q", "xyz", "zyx", "x", "xyzxyzxyz"] + wordgen.words(32, 5000, alphabet="xyzw")
    raw = "\n" + "\n".join(ws[:10000]) + "\n\n  \n" + "\n".join(ws[10000:]) + "\n\n"
    assert run(tmp_path, ws, qs, 12, raw_words=raw) == wordgen.reference(ws, qs)


def test_full_size(tmp_path):
    ws, qs = wordgen.words(41, 100000), wordgen.words(42, 20000, lo=1, hi=6)
    assert run(tmp_path, ws, qs, 20) == wordgen.reference(ws, qs)


def test_full_size_wide_alphabet(tmp_path):
    alphabet = "abcdefghijklmnopqrstuvwxyz"
    ws = wordgen.words(51, 120000, alphabet=alphabet, lo=3, hi=10)
    qs = wordgen.words(52, 20000, alphabet="etaoinshr", lo=1, hi=4) + ws[:5000]
    assert run(tmp_path, ws, qs, 20) == wordgen.reference(ws, qs)
