#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import random
import sqlite3


def build(path, seed):
    r = random.Random(seed)
    db = sqlite3.connect(path)
    db.executescript("""
    CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT, country TEXT);
    CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INTEGER, placed TEXT);
    CREATE TABLE order_items(order_id INTEGER, sku TEXT, qty INTEGER, unit_cents INTEGER);
    CREATE TABLE payments(order_id INTEGER, cents INTEGER);
    """)
    names = ["Acme", "Bolt & Co", "Cedar", "Dune", "Echo", "Fjord", "Gale", "Harbor", "Iris", "Jade"]
    for i, n in enumerate(names, 1):
        db.execute("INSERT INTO customers VALUES (?, ?, ?)", (i, n, r.choice(["DE", "FR", "US"])))
    oid = 0
    for c in range(1, len(names) + 1):
        if c in (4, 9):
            continue  # customers without orders
        for _ in range(r.randint(1, 6)):
            oid += 1
            year = r.choice([2023, 2024, 2024])
            db.execute("INSERT INTO orders VALUES (?, ?, ?)", (oid, c, f"{year}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"))
            for _ in range(r.randint(0, 4)):
                db.execute("INSERT INTO order_items VALUES (?, ?, ?, ?)", (oid, f"S{r.randint(1, 50)}", r.randint(1, 5), r.randint(100, 9999)))
            for _ in range(r.choice([0, 1, 1, 2, 3])):
                db.execute("INSERT INTO payments VALUES (?, ?)", (oid, r.randint(100, 20000)))
    db.commit()
    db.close()


def expected(path):
    db = sqlite3.connect(path)
    rows = []
    for cid, name in db.execute("SELECT id, name FROM customers"):
        orders = [o for (o,) in db.execute("SELECT id FROM orders WHERE customer_id = ? AND placed >= '2024-01-01' AND placed < '2025-01-01'", (cid,))]
        billed = sum(q * u for o in orders for q, u in db.execute("SELECT qty, unit_cents FROM order_items WHERE order_id = ?", (o,)))
        paid = sum(c for o in orders for (c,) in db.execute("SELECT cents FROM payments WHERE order_id = ?", (o,)))
        avg = billed / len(orders) if orders else None
        rows.append((name, len(orders), billed, paid, billed - paid, avg))
    rows.sort(key=lambda r: (-r[4], r[0]))
    return rows
build("/app/shop.db", 1)
PY
