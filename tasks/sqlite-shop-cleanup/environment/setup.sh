#!/bin/bash
# Generates /app/shop.db deterministically.
set -euo pipefail
python3 - <<'PY'
import random
import sqlite3

r = random.Random(4242)
db = sqlite3.connect("/app/shop.db")
db.executescript("""
PRAGMA foreign_keys = ON;
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL, country TEXT NOT NULL);
CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                     ordered_at TEXT NOT NULL, status TEXT NOT NULL CHECK (status IN ('paid','pending','refunded')));
CREATE TABLE order_items (order_id INTEGER NOT NULL REFERENCES orders(id), product_id INTEGER NOT NULL REFERENCES products(id),
                          qty INTEGER NOT NULL, unit_price_cents INTEGER NOT NULL);
""")
first = ["Ada", "Ben", "Cleo", "Dev", "Eva", "Finn", "Gus", "Hana", "Ivo", "Jun", "Kim", "Lea", "Mo", "Nia", "Oto"]
last = ["Stone", "Moss", "Reed", "Vale", "Hart", "Lund", "Quist", "Ortiz", "Park", "Nagy"]
countries = ["DE", "FR", "US", "JP", "BR", "IN"]
customers = []
used = set()
while len(customers) < 60:
    f, l = r.choice(first), r.choice(last)
    email = f"{f}.{l}@example.com".lower()
    if email in used:
        continue
    used.add(email)
    customers.append((f"{f} {l}", email, r.choice(countries)))
# duplicates created by a buggy signup form: same person, email differs in case/whitespace
dups = [(3, "  {}"), (10, "{}  "), (17, "UPPER"), (25, "Title"), (33, " UPPER "), (41, "{}")]
rows = list(customers)
for idx, style in dups:
    name, email, country = customers[idx]
    if style == "UPPER":
        variant = email.upper()
    elif style == " UPPER ":
        variant = " " + email.upper() + " "
    elif style == "Title":
        variant = email.title()
    else:
        variant = style.format(email.capitalize())
    rows.append((name, variant, country))
# some originals also carry stray case/whitespace
for i in (5, 12, 41):
    n, e, c = rows[i]
    rows[i] = (n, " " + e.upper(), c)
db.executemany("INSERT INTO customers (name, email, country) VALUES (?, ?, ?)", rows)
cats = {"books": 6, "games": 5, "garden": 4, "kitchen": 5, "music": 4}
pid = 0
for cat, n in cats.items():
    for k in range(n):
        pid += 1
        db.execute("INSERT INTO products VALUES (?, ?, ?)", (pid, f"{cat}-{k+1}", cat))
ncust = len(rows)
for oid in range(1, 701):
    cust = r.randint(1, ncust)
    status = r.choices(["paid", "pending", "refunded"], [7, 2, 1])[0]
    day = f"2024-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"
    db.execute("INSERT INTO orders VALUES (?, ?, ?, ?)", (oid, cust, day, status))
    for _ in range(r.randint(1, 4)):
        db.execute("INSERT INTO order_items VALUES (?, ?, ?, ?)",
                   (oid, r.randint(1, pid), r.randint(1, 5), r.randint(199, 9999)))
db.commit()
db.close()
PY
