import shutil
import sqlite3
from pathlib import Path

import pytest

DB = Path("/app/shop.db")
MERGED = {61: 4, 62: 11, 63: 18, 64: 26, 65: 34, 66: 42}
ORDERS_AFTER_MERGE = {4: 26, 11: 15, 18: 28, 26: 23, 34: 26, 42: 18}


@pytest.fixture
def db():
    conn = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
    yield conn
    conn.close()


@pytest.fixture
def db_copy(tmp_path):
    dst = tmp_path / "copy.db"
    shutil.copy(DB, dst)
    conn = sqlite3.connect(dst)
    yield conn
    conn.close()


def test_nothing_lost(db):
    assert db.execute("SELECT COUNT(*) FROM orders").fetchone()[0] == 700
    assert db.execute("SELECT COUNT(*) FROM order_items").fetchone()[0] == 1767
    assert db.execute("SELECT COUNT(*) FROM products").fetchone()[0] == 24
    orphans = db.execute("SELECT COUNT(*) FROM orders WHERE customer_id NOT IN (SELECT id FROM customers)").fetchone()[0]
    assert orphans == 0
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []


def test_emails_normalized(db):
    emails = [e for (e,) in db.execute("SELECT email FROM customers")]
    assert emails and all(e == e.strip().lower() for e in emails)


def test_duplicates_merged(db):
    ids = {i for (i,) in db.execute("SELECT id FROM customers")}
    assert ids == set(range(1, 61))
    for keep, n in ORDERS_AFTER_MERGE.items():
        assert db.execute("SELECT COUNT(*) FROM orders WHERE customer_id = ?", (keep,)).fetchone()[0] == n
    assert db.execute("SELECT COUNT(*) FROM orders").fetchone()[0] == 700


def test_unique_email_index(db, db_copy):
    idx = db.execute("SELECT name FROM pragma_index_list('customers') WHERE \"unique\" = 1").fetchall()
    cols = [db.execute("SELECT name FROM pragma_index_info(?)", (n,)).fetchall() for (n,) in idx]
    assert ("idx_customers_email",) in idx and [("email",)] in cols
    email = db.execute("SELECT email FROM customers WHERE id = 7").fetchone()[0]
    with pytest.raises(sqlite3.IntegrityError):
        db_copy.execute("INSERT INTO customers (name, email, country) VALUES ('X', ?, 'DE')", (email,))


def test_orders_customer_index_used(db):
    info = db.execute("SELECT name FROM pragma_index_info('idx_orders_customer')").fetchall()
    assert info == [("customer_id",)]
    plan = " ".join(row[-1] for row in db.execute("EXPLAIN QUERY PLAN SELECT * FROM orders WHERE customer_id = 5"))
    assert "idx_orders_customer" in plan


def expected_revenue(conn):
    rows = conn.execute("""
        SELECT o.customer_id, o.id, SUM(i.qty * i.unit_price_cents)
        FROM orders o JOIN order_items i ON i.order_id = o.id
        WHERE o.status = 'paid' GROUP BY o.id""").fetchall()
    out = {}
    for cust, _oid, cents in rows:
        n, total = out.get(cust, (0, 0))
        out[cust] = (n + 1, total + cents)
    names = dict(conn.execute("SELECT id, name FROM customers"))
    return {c: (names[c], n, round(total / 100, 2)) for c, (n, total) in out.items()}


def view_rows(conn):
    cur = conn.execute("SELECT * FROM customer_revenue")
    cols = [d[0] for d in cur.description]
    assert cols == ["customer_id", "name", "paid_orders", "revenue"]
    return {row[0]: row[1:] for row in cur.fetchall()}


def check_view(conn):
    got = view_rows(conn)
    want = expected_revenue(conn)
    assert set(got) == set(want)
    for cust, (name, n, rev) in want.items():
        gname, gn, grev = got[cust]
        assert (gname, gn) == (name, n), cust
        assert abs(grev - rev) < 0.006, (cust, grev, rev)


def test_view_correct(db):
    kinds = dict(db.execute("SELECT name, type FROM sqlite_master WHERE name = 'customer_revenue'"))
    assert kinds.get("customer_revenue") == "view"
    check_view(db)
    # merged customers carry the orders of their duplicates
    assert view_rows(db)[18][1] >= 10


def test_view_follows_data_changes(db_copy):
    c = db_copy
    c.execute("INSERT INTO customers (id, name, email, country) VALUES (500, 'New Person', 'new@x.org', 'US')")
    c.execute("INSERT INTO orders VALUES (9001, 500, '2024-12-30', 'paid')")
    c.execute("INSERT INTO order_items VALUES (9001, 1, 3, 1005)")
    c.execute("INSERT INTO orders VALUES (9002, 500, '2024-12-31', 'pending')")
    c.execute("INSERT INTO order_items VALUES (9002, 1, 1, 100000)")
    c.execute("UPDATE orders SET status = 'refunded' WHERE customer_id = 4")
    check_view(c)
    rows = view_rows(c)
    assert rows[500][1:] == (1, 30.15)
    assert 4 not in rows


def test_top_categories_csv(db):
    q = """SELECT p.category, SUM(i.qty * i.unit_price_cents) AS cents
           FROM order_items i JOIN orders o ON o.id = i.order_id AND o.status = 'paid'
           JOIN products p ON p.id = i.product_id GROUP BY p.category ORDER BY cents DESC"""
    want = "category,revenue\n" + "".join(f"{cat},{c // 100}.{c % 100:02d}\n" for cat, c in db.execute(q))
    assert Path("/app/top_categories.csv").read_text() == want
    assert db.execute("SELECT COUNT(*) FROM order_items").fetchone()[0] == 1767
