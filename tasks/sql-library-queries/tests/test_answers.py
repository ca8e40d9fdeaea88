import sqlite3
from pathlib import Path

import pytest

import gen

ANS = Path("/app/answers")


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    p = tmp_path_factory.mktemp("ref") / "ref.db"
    gen.build(str(p))
    return sqlite3.connect(p)


def dump(db):
    return {t: sorted(db.execute(f"SELECT * FROM {t}").fetchall()) for t in ("authors", "books", "members", "loans")}


def test_data_unchanged(ref):
    agent = sqlite3.connect("file:/app/library.db?mode=ro", uri=True)
    assert dump(agent) == dump(ref)
    assert (ANS / "q1.txt").is_file()


def test_q1_never_loaned(ref):
    n = ref.execute("SELECT COUNT(*) FROM books b WHERE NOT EXISTS (SELECT 1 FROM loans l WHERE l.book_id = b.id)").fetchone()[0]
    assert (ANS / "q1.txt").read_text() == f"{n}\n"


def test_q2_top_member_2024(ref):
    counts = {}
    for mid, name, loaned in ref.execute("SELECT m.id, m.name, l.loaned FROM loans l JOIN members m ON m.id = l.member_id"):
        if loaned.startswith("2024-"):
            counts[(mid, name)] = counts.get((mid, name), 0) + 1
    best = min(counts, key=lambda k: (-counts[k], k[0]))
    assert (ANS / "q2.txt").read_text() == best[1] + "\n"


def test_q3_top_authors(ref):
    counts = {}
    for (name,) in ref.execute("SELECT a.name FROM loans l JOIN books b ON b.id = l.book_id JOIN authors a ON a.id = b.author_id"):
        counts[name] = counts.get(name, 0) + 1
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    assert (ANS / "q3.txt").read_text() == "".join(f"{n},{c}\n" for n, c in top)


def test_q4_open_overdue(ref):
    ids = [i for i, ret, due in ref.execute("SELECT id, returned, due FROM loans") if ret is None and due < "2024-12-01"]
    assert ids
    assert (ANS / "q4.txt").read_text() == "".join(f"{i}\n" for i in sorted(ids))


def test_member_loans_view(ref):
    agent = sqlite3.connect("file:/app/library.db?mode=ro", uri=True)
    kind = agent.execute("SELECT type FROM sqlite_master WHERE name = 'member_loans'").fetchone()
    assert kind == ("view",)
    cols = [d[0] for d in agent.execute("SELECT * FROM member_loans").description]
    assert cols == ["member_id", "name", "loans"]
    want = {}
    for mid, name in ref.execute("SELECT id, name FROM members"):
        want[mid] = (mid, name, ref.execute("SELECT COUNT(*) FROM loans WHERE member_id = ?", (mid,)).fetchone()[0])
    # the view must be live: check it against the agent db's own tables too
    assert sorted(agent.execute("SELECT * FROM member_loans").fetchall()) == sorted(want.values())
