import hashlib
import re
from collections import Counter
from pathlib import Path

BOOK = Path("/app/book.txt")
SHA = "edcce0dfafd1b11e388293c323bcd8a0868603ff82111a27281a6fd24f21c965"


def words():
    data = BOOK.read_bytes()
    assert hashlib.sha256(data).hexdigest() == SHA, "book.txt was modified"
    return [w.lower() for w in re.findall(r"[A-Za-z]+", data.decode("ascii"))], data


def stats():
    lines = Path("/app/stats.txt").read_text().splitlines()
    assert len(lines) == 3, lines
    out = {}
    for line in lines:
        k, v = line.split(" ")
        out[k] = v
    return out


def test_top_words():
    ws, _ = words()
    ranked = sorted(Counter(ws).items(), key=lambda kv: (-kv[1], kv[0]))[:15]
    assert Path("/app/top_words.txt").read_text() == "".join(f"{c} {w}\n" for w, c in ranked)


def test_line_count():
    _, data = words()
    assert stats()["lines"] == str(data.count(b"\n"))


def test_word_count():
    ws, _ = words()
    assert stats()["words"] == str(len(ws))


def test_unique_count():
    ws, _ = words()
    assert stats()["unique"] == str(len(set(ws)))
