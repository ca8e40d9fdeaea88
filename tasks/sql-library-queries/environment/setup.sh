#!/bin/bash
set -euo pipefail
python3 - <<'PY'
"""Builds the library database (identical code is embedded in environment/setup.sh)."""
import random
import sqlite3


def build(path):
    r = random.Random(2024)
    db = sqlite3.connect(path)
    db.executescript("""
    CREATE TABLE authors(id INTEGER PRIMARY KEY, name TEXT NOT NULL);
    CREATE TABLE books(id INTEGER PRIMARY KEY, title TEXT NOT NULL, author_id INTEGER REFERENCES authors(id), year INTEGER);
    CREATE TABLE members(id INTEGER PRIMARY KEY, name TEXT NOT NULL, joined TEXT);
    CREATE TABLE loans(id INTEGER PRIMARY KEY, book_id INTEGER REFERENCES books(id), member_id INTEGER REFERENCES members(id),
                       loaned TEXT NOT NULL, due TEXT NOT NULL, returned TEXT);
    """)
    authors = ["Ursula Vance", "Tomas Reyes", "Ines Okafor", "Hugo Brandt", "Mei Tanaka", "Lars Eklund", "Noor Haddad"]
    db.executemany("INSERT INTO authors VALUES (?, ?)", list(enumerate(authors, 1)))
    for b in range(1, 61):
        db.execute("INSERT INTO books VALUES (?, ?, ?, ?)", (b, f"Book {b:02d}", r.randint(1, len(authors)), r.randint(1950, 2023)))
    members = ["Ada", "Bo", "Cy", "Di", "Ed", "Flo", "Gus", "Hal", "Ivy", "Jo", "Kim", "Lu"]
    db.executemany("INSERT INTO members VALUES (?, ?, ?)", [(i, n, f"20{r.randint(15, 23)}-0{r.randint(1, 9)}-1{r.randint(0, 9)}") for i, n in enumerate(members, 1)])
    for l in range(1, 301):
        y = r.choice([2023, 2024, 2024])
        m, d = r.randint(1, 11), r.randint(1, 28)
        loaned = f"{y}-{m:02d}-{d:02d}"
        due = f"{y}-{m + 1:02d}-{d:02d}"
        returned = None if r.random() < 0.15 else f"{y}-{m + 1:02d}-{r.randint(1, 28):02d}"
        db.execute("INSERT INTO loans VALUES (?, ?, ?, ?, ?, ?)", (l, r.randint(1, 55), r.randint(1, len(members)), loaned, due, returned))
    db.commit()
    db.close()
build("/app/library.db")
PY
