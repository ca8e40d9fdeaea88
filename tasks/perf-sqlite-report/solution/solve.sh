#!/bin/bash
set -euo pipefail
cd /app
python3 -c 'import sqlite3; db = sqlite3.connect("/app/app.db"); print(db.execute("SELECT sql FROM sqlite_master").fetchall())'
cp queries.py /tmp/queries_slow.py
cat > queries.py <<'PY'
#!/usr/bin/env python3
"""python3 queries.py DB: the nightly activity report (plain text on stdout)."""
import sqlite3
import sys

db = sqlite3.connect(sys.argv[1])
db.execute("CREATE INDEX IF NOT EXISTS events_user_ts_id ON events(user_id, ts, id)")
db.commit()

print("top users:")
for uid, n in db.execute("SELECT user_id, COUNT(*) AS n FROM events GROUP BY user_id ORDER BY n DESC, user_id LIMIT 10"):
    print(f"  {uid} {n}")

(buyers, revenue) = db.execute("SELECT COUNT(DISTINCT user_id), SUM(amount) FROM events WHERE kind = 'purchase'").fetchone()
print(f"buyers {buyers} revenue {revenue}")

print("latest:")
for row in db.execute("""
    SELECT e.user_id, e.id, e.kind, e.ts FROM events e
    WHERE e.id = (SELECT e2.id FROM events e2 WHERE e2.user_id = e.user_id ORDER BY e2.ts DESC, e2.id DESC LIMIT 1)
    ORDER BY e.user_id"""):
    print("  " + " ".join(map(str, row)))
PY
time python3 queries.py app.db > /tmp/report.txt
head -n 15 /tmp/report.txt
