"""sql: write SQL queries over a generated sqlite shop database.

Table and column names, the data, and 3-4 questions (revenue per category, top customers, customers
without orders, orders per month, products never ordered, average order value per city) vary by
seed. The agent saves one SELECT per question; the tests run each on the shipped database and on a
hold-out database with other data, against the reference query.

The splits draw from disjoint pools (``docs/families.md``): test instances ask held-out questions (units
per category, top products by revenue, customers per city, revenue per year, orders with many lines)
about tables and columns with their own names, in a database file of its own name, under the
instruction's own wording.
"""

from __future__ import annotations

import hashlib
import random
import sqlite3

from t1env.families.base import Family, Instance, split_of_seed

CITIES = ["Lisbon", "Oslo", "Quito", "Hanoi", "Perth", "Cairo", "Lima", "Riga", "Accra", "Turku"]
CATEGORIES = ["books", "garden", "toys", "kitchen", "audio", "sports", "office", "pets"]
NAMES = [
    "Ana",
    "Ben",
    "Chen",
    "Dara",
    "Eli",
    "Femi",
    "Gita",
    "Hugo",
    "Ines",
    "Jun",
    "Kofi",
    "Lena",
    "Milo",
    "Nora",
    "Omar",
    "Pia",
    "Quin",
    "Rosa",
    "Sami",
    "Tove",
    "Uma",
    "Vik",
    "Wen",
    "Xavi",
    "Yara",
    "Zed",
]
NAMES_POOL = {  # per split: table and column names, database file names
    "train": {
        "customers": ["customers", "clients", "buyers"],
        "products": ["products", "articles", "catalog"],
        "orders": ["orders", "purchases"],
        "items": ["order_items", "order_lines", "line_items"],
        "qty": ["qty", "quantity", "amount"],
        "date": ["order_date", "placed_on", "created"],
        "db": ["shop.db", "store.sqlite", "sales.db"],
    },
    "test": {
        "customers": ["members", "patrons"],
        "products": ["goods", "wares", "stock_items"],
        "orders": ["sales", "baskets"],
        "items": ["sale_lines", "basket_items"],
        "qty": ["units", "n_units", "pieces"],
        "date": ["sold_on", "ordered_at"],
        "db": ["market.db", "retail.sqlite", "outlet.db"],
    },
}
PRODUCTS = [
    "lamp",
    "mug",
    "kite",
    "chair",
    "pen",
    "ball",
    "rake",
    "clock",
    "bowl",
    "drum",
    "tent",
    "book",
    "fan",
    "kettle",
]

TESTS = r"""
import hashlib
import sqlite3
from pathlib import Path

import pytest

APP = Path("/app")
HOLDOUT = Path(__file__).with_name("holdout.sql")


def digest(con):
    h = hashlib.sha256()
    for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
        h.update(table.encode())
        h.update(repr(sorted(con.execute(f"SELECT * FROM {table}").fetchall())).encode())
    return h.hexdigest()


@pytest.fixture(scope="module")
def shipped():
    con = sqlite3.connect(f"file:{APP / DB}?mode=ro", uri=True)
    assert digest(con) == DB_DIGEST, f"{DB} was modified"
    yield con
    con.close()


@pytest.fixture(scope="module")
def holdout():
    con = sqlite3.connect(":memory:")
    con.executescript(HOLDOUT.read_text())
    yield con
    con.close()


def same(con, q):
    path = APP / "queries" / f"{q}.sql"
    assert path.is_file(), f"{path} is missing"
    got = con.execute(path.read_text()).fetchall()
    want = con.execute(REFERENCE[q]).fetchall()
    assert len(got) == len(want), f"{len(got)} rows, expected {len(want)}"
    for g, w in zip(got, want):
        assert len(g) == len(w), f"row {g}: expected {len(w)} columns"
        for a, b in zip(g, w):
            if isinstance(b, float) or isinstance(a, float):
                assert isinstance(a, (int, float)) and abs(a - b) <= 0.011, (g, w)
            else:
                assert a == b, (g, w)


def test_queries_on_holdout_database(holdout):
    for q in REFERENCE:
        same(holdout, q)


"""


def _data(rng: random.Random, t: dict[str, str]) -> str:
    """An SQL script creating and filling the four tables."""
    cities = rng.sample(CITIES, rng.randint(4, 7))
    cats = rng.sample(CATEGORIES, rng.randint(4, 6))
    out = [
        f"CREATE TABLE {t['customers']} (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL);",
        f"CREATE TABLE {t['products']} (id INTEGER PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL, price REAL NOT NULL);",
        f"CREATE TABLE {t['orders']} (id INTEGER PRIMARY KEY, {t['cust_id']} INTEGER NOT NULL REFERENCES {t['customers']}(id), "
        f"{t['date']} TEXT NOT NULL);",
        f"CREATE TABLE {t['items']} (order_id INTEGER NOT NULL REFERENCES {t['orders']}(id), "
        f"product_id INTEGER NOT NULL REFERENCES {t['products']}(id), {t['qty']} INTEGER NOT NULL);",
    ]
    names = rng.sample([f"{a} {b}" for a in NAMES for b in NAMES if a != b], rng.randint(15, 35))
    for i, n in enumerate(names, 1):
        out.append(f"INSERT INTO {t['customers']} VALUES ({i}, '{n}', '{rng.choice(cities)}');")
    prods = rng.sample(
        [f"{c} {p}" for c in ("red", "big", "mini", "eco", "pro") for p in PRODUCTS], rng.randint(12, 30)
    )
    for i, p in enumerate(prods, 1):
        out.append(
            f"INSERT INTO {t['products']} VALUES ({i}, '{p}', '{rng.choice(cats)}', {rng.randint(99, 25000) / 100:.2f});"
        )
    buyers = rng.sample(range(1, len(names) + 1), max(1, len(names) - rng.randint(2, 6)))
    item_rows = []
    for o in range(1, rng.randint(40, 120)):
        date = f"{rng.choice([2022, 2023, 2024])}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        out.append(f"INSERT INTO {t['orders']} VALUES ({o}, {rng.choice(buyers)}, '{date}');")
        for pid in rng.sample(range(1, len(prods) + 1), rng.randint(1, 4)):
            item_rows.append(f"INSERT INTO {t['items']} VALUES ({o}, {pid}, {rng.randint(1, 9)});")
    return "\n".join(out + item_rows) + "\n"


def _questions(rng: random.Random, t: dict[str, str]) -> list[tuple[str, str]]:
    c, p, o, i, cid, date, qty = (t[k] for k in ("customers", "products", "orders", "items", "cust_id", "date", "qty"))
    k = rng.randint(3, 5)
    year = rng.choice([2022, 2023, 2024])
    pool = [
        (
            "Revenue per product category: columns `category`, `revenue` (sum of quantity × price over all order items,\n"
            "  rounded to 2 decimals); highest revenue first, ties by category.",
            f"SELECT p.category, ROUND(SUM(i.{qty} * p.price), 2) AS revenue FROM {i} i JOIN {p} p ON p.id = i.product_id "
            "GROUP BY p.category ORDER BY revenue DESC, p.category",
        ),
        (
            f"The {k} customers with the most orders: columns `name`, `orders`; most orders first, ties by name.",
            f"SELECT c.name, COUNT(*) AS n FROM {o} o JOIN {c} c ON c.id = o.{cid} GROUP BY c.id "
            f"ORDER BY n DESC, c.name LIMIT {k}",
        ),
        (
            "Customers who never placed an order: one column `name`, sorted by name.",
            f"SELECT name FROM {c} WHERE id NOT IN (SELECT {cid} FROM {o}) ORDER BY name",
        ),
        (
            f"Orders per month in {year}: columns `month` (`YYYY-MM`), `orders`; months without orders are left out; by month.",
            f"SELECT substr({date}, 1, 7) AS m, COUNT(*) FROM {o} WHERE {date} LIKE '{year}-%' GROUP BY m ORDER BY m",
        ),
        (
            "Products that were never ordered: columns `name`, `category`, sorted by name.",
            f"SELECT name, category FROM {p} WHERE id NOT IN (SELECT product_id FROM {i}) ORDER BY name",
        ),
        (
            "Average order value per customer city: columns `city`, `avg_value` (an order's value is the sum of quantity ×\n"
            "  price over its items; average over the orders of customers in that city, rounded to 2 decimals); by city.",
            f"SELECT c.city, ROUND(AVG(v.total), 2) FROM (SELECT o.id, o.{cid} AS cid, SUM(i.{qty} * p.price) AS total "
            f"FROM {o} o JOIN {i} i ON i.order_id = o.id JOIN {p} p ON p.id = i.product_id GROUP BY o.id) v "
            f"JOIN {c} c ON c.id = v.cid GROUP BY c.city ORDER BY c.city",
        ),
    ]
    return rng.sample(pool, rng.randint(3, 4))


def _held_out_questions(rng: random.Random, t: dict[str, str]) -> list[tuple[str, str]]:
    """The test split's questions: none of them is one of :func:`_questions`."""
    c, p, o, i, date, qty = (t[k] for k in ("customers", "products", "orders", "items", "date", "qty"))
    k = rng.randint(3, 5)
    lines = rng.choice([3, 4])
    pool = [
        (
            "Units sold per product category: columns `category`, `units` (the total quantity over all order lines);\n"
            "  most units first, ties by category.",
            f"SELECT p.category, SUM(i.{qty}) AS u FROM {i} i JOIN {p} p ON p.id = i.product_id "
            "GROUP BY p.category ORDER BY u DESC, p.category",
        ),
        (
            f"The {k} products that brought in the most money: columns `name`, `revenue` (quantity × price summed over\n"
            "  the product's order lines, rounded to 2 decimals); highest revenue first, ties by name.",
            f"SELECT p.name, ROUND(SUM(i.{qty} * p.price), 2) AS r FROM {i} i JOIN {p} p ON p.id = i.product_id "
            f"GROUP BY p.id ORDER BY r DESC, p.name LIMIT {k}",
        ),
        (
            "How many customers live in each city (whether or not they ever ordered): columns `city`, `customers`;\n"
            "  by city.",
            f"SELECT city, COUNT(*) FROM {c} GROUP BY city ORDER BY city",
        ),
        (
            "Revenue per calendar year: columns `year` (`YYYY`), `revenue` (quantity × price over the lines of that\n"
            "  year's orders, rounded to 2 decimals); by year.",
            f"SELECT substr(o.{date}, 1, 4) AS y, ROUND(SUM(i.{qty} * p.price), 2) FROM {o} o "
            f"JOIN {i} i ON i.order_id = o.id JOIN {p} p ON p.id = i.product_id GROUP BY y ORDER BY y",
        ),
        (
            f"Orders with at least {lines} order lines: columns `order_id`, `lines` (the number of its lines); by\n"
            "  order id.",
            f"SELECT order_id, COUNT(*) AS n FROM {i} GROUP BY order_id HAVING n >= {lines} ORDER BY order_id",
        ),
    ]
    return rng.sample(pool, rng.randint(3, 4))


def _digest(script: str) -> str:
    con = sqlite3.connect(":memory:")
    con.executescript(script)
    h = hashlib.sha256()
    for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
        h.update(table.encode())
        h.update(repr(sorted(con.execute(f"SELECT * FROM {table}").fetchall())).encode())
    con.close()
    return h.hexdigest()


class SqlQuery(Family):
    name = "sql"
    category = "sql"
    difficulty = "medium"
    description = "Write 3-4 SQL queries over a generated sqlite shop database (random names, data and questions)."

    def build(self, rng: random.Random, seed: int) -> Instance:
        split = split_of_seed(seed)
        names = NAMES_POOL[split]
        t = {k: rng.choice(names[k]) for k in ("customers", "products", "orders", "items", "qty", "date")}
        t["cust_id"] = rng.choice(["customer_id" if split == "train" else "member_ref", f"{t['customers'][:-1]}_id"])
        db = rng.choice(names["db"])
        script = _data(rng, t)
        holdout = _data(random.Random(f"{self.instance_id(seed)}/holdout"), t)
        questions = (_questions if split == "train" else _held_out_questions)(rng, t)
        reference = {f"q{n}": sql for n, (_, sql) in enumerate(questions, 1)}

        qtext = "\n".join(f"{n}. `queries/q{n}.sql` — {text}" for n, (text, _) in enumerate(questions, 1))
        instruction = (
            (
                f"`/app/{db}` is a sqlite database of a small shop (tables `{t['customers']}`, `{t['products']}`, "
                f"`{t['orders']}`,\n`{t['items']}`). Python's `sqlite3` module is available; a `sqlite3` command may not be.\n\n"
                f"Answer each question below with **one SQL SELECT statement** saved in `/app/queries/` under the name given.\n"
                "Your queries are also run on other databases with the same schema, so compute the answer in SQL (no\n"
                "hard-coded values). Output the columns in the order given (column names do not matter). Do not modify the\n"
                "database.\n\n" + qtext + "\n"
            )
            if split == "train"
            else (
                f"A small shop keeps its data in the sqlite file `/app/{db}`, with the tables `{t['customers']}`, "
                f"`{t['products']}`,\n`{t['orders']}` and `{t['items']}`. You can use Python's `sqlite3` module (there may be "
                "no `sqlite3` program).\n\n"
                "For each question below, save a **single SQL SELECT statement** under `/app/queries/`, in the file named\n"
                "there. The same queries will be run against other databases with this schema, so let SQL compute the\n"
                "answer instead of writing values in. Return the columns in the order listed (their names are free). Leave\n"
                "the database unchanged.\n\n" + qtext + "\n"
            )
        )
        solve = "mkdir -p queries\n" + "".join(
            f"cat > queries/{q}.sql <<'SQL'\n{sql};\nSQL\n" for q, sql in reference.items()
        )
        solve += (
            f"python3 -c \"import sqlite3; c = sqlite3.connect('{db}'); "
            "print(c.execute(open('queries/q1.sql').read()).fetchall()[:5])\"\n"
        )
        tests = f"DB = {db!r}\nDB_DIGEST = {_digest(script)!r}\nREFERENCE = {reference!r}\n" + TESTS
        for q in reference:
            tests += f"def test_{q}_on_shipped_database(shipped):\n    same(shipped, {q!r})\n\n\n"
        setup = (
            "#!/bin/bash\nset -euo pipefail\ncd /app\n"
            f"python3 -c \"import sqlite3; c = sqlite3.connect('{db}'); c.executescript(open('/app/.data.sql').read()); "
            'c.commit()"\nrm -f /app/.data.sql\n'
        )
        return Instance(
            title=f"Answer {len(questions)} questions about a shop database with SQL",
            instruction=instruction,
            solve=solve,
            tests={"test_queries.py": tests.rstrip() + "\n", "holdout.sql": holdout},
            files={"setup.sh": setup, ".data.sql": script},
            tags=("sql", "sqlite"),
            tools=("python3",),
            max_turns=40,
        )
