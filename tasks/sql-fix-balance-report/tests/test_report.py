import csv
import hashlib
import io
import subprocess
from pathlib import Path

import gen

HEADER = ["name", "orders", "billed", "paid", "balance", "avg_order"]


def parse(text):
    rows = list(csv.reader(io.StringIO(text)))
    assert rows and rows[0] == HEADER, rows[:1]
    return rows[1:]


def check(rows, want):
    assert [r[0] for r in rows] == [w[0] for w in want]
    for r, w in zip(rows, want):
        assert [int(x) for x in r[1:5]] == list(w[1:5]), (r, w)
        if w[5] is None:
            assert r[5] == "NULL", r
        else:
            assert abs(float(r[5]) - w[5]) < 0.006, (r, w)


def run(db):
    res = subprocess.run(["python3", "/app/run_report.py", str(db), "/app/report.sql"], capture_output=True,
                         text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    return parse(res.stdout)


def test_report_csv_for_shop(tmp_path):
    ref = tmp_path / "ref.db"
    gen.build(str(ref), 1)
    agent = sqlite_dump("/app/shop.db")
    assert agent == sqlite_dump(ref), "shop.db was modified"
    check(parse(Path("/app/report.csv").read_text()), gen.expected(str(ref)))


def sqlite_dump(path):
    import sqlite3
    return list(sqlite3.connect(path).iterdump())


def test_all_customers_listed(tmp_path):
    db = tmp_path / "a.db"
    gen.build(str(db), 21)
    rows = run(db)
    assert sorted(r[0] for r in rows) == sorted(w[0] for w in gen.expected(str(db)))
    assert len(rows) == 10


def test_totals_no_fanout(tmp_path):
    db = tmp_path / "b.db"
    gen.build(str(db), 22)
    want = {w[0]: w[1:5] for w in gen.expected(str(db))}
    for r in run(db):
        assert tuple(int(x) for x in r[1:5]) == want[r[0]], r


def test_avg_and_order(tmp_path):
    db = tmp_path / "c.db"
    gen.build(str(db), 23)
    check(run(db), gen.expected(str(db)))


def test_runner_unchanged():
    src = Path("/app/run_report.py").read_text()
    assert 'f"{v:.2f}" if isinstance(v, float)' in src
    assert "csv.writer(sys.stdout" in src
    assert Path("/app/report.csv").exists()
