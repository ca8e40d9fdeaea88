#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import random
import sqlite3


def build(path, seed, n=200_000, users=2000):
    r = random.Random(seed)
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE events(id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL, kind TEXT NOT NULL, ts INTEGER NOT NULL, amount INTEGER)")
    kinds = ["view", "view", "view", "click", "cart", "purchase"]
    db.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?)",
                   ((i, r.randint(1, users), r.choice(kinds), r.randint(1_700_000_000, 1_730_000_000), r.randint(1, 50000))
                    for i in range(1, n + 1)))
    db.commit()
    db.close()
build("/app/app.db", 1)
PY
