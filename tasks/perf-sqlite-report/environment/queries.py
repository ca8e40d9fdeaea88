#!/usr/bin/env python3
"""python3 queries.py DB: the nightly activity report (plain text on stdout)."""
import sqlite3
import sys

db = sqlite3.connect(sys.argv[1])

# 1. the 10 most active users (ties: lower user id first)
counts = []
for (uid,) in db.execute("SELECT DISTINCT user_id FROM events ORDER BY user_id").fetchall():
    (n,) = db.execute("SELECT COUNT(*) FROM events WHERE user_id = ?", (uid,)).fetchone()
    counts.append((n, uid))
counts.sort(key=lambda c: (-c[0], c[1]))
print("top users:")
for n, uid in counts[:10]:
    print(f"  {uid} {n}")

# 2. buyers and revenue
(buyers, revenue) = db.execute("SELECT COUNT(DISTINCT user_id), SUM(amount) FROM events WHERE kind = 'purchase'").fetchone()
print(f"buyers {buyers} revenue {revenue}")

# 3. every user's latest event (the one with the highest ts; ties: highest id)
print("latest:")
for row in db.execute("""
    SELECT e.user_id, e.id, e.kind, e.ts FROM events e
    WHERE e.id = (SELECT e2.id FROM events e2 WHERE e2.user_id = e.user_id ORDER BY e2.ts DESC, e2.id DESC LIMIT 1)
    ORDER BY e.user_id"""):
    print("  " + " ".join(map(str, row)))
