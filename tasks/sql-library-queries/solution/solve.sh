#!/bin/bash
set -euo pipefail
cd /app
mkdir -p answers
python3 - <<'PY'
import sqlite3
db = sqlite3.connect("/app/library.db")
q = lambda sql: db.execute(sql).fetchall()
print(q("SELECT name, sql FROM sqlite_master"))
open("answers/q1.txt", "w").write(f"{q('SELECT COUNT(*) FROM books WHERE id NOT IN (SELECT book_id FROM loans)')[0][0]}\n")
open("answers/q2.txt", "w").write(q("""SELECT m.name FROM loans l JOIN members m ON m.id = l.member_id
    WHERE l.loaned LIKE '2024-%' GROUP BY m.id ORDER BY COUNT(*) DESC, m.id LIMIT 1""")[0][0] + "\n")
rows = q("""SELECT a.name, COUNT(*) c FROM loans l JOIN books b ON b.id = l.book_id JOIN authors a ON a.id = b.author_id
    GROUP BY a.id ORDER BY c DESC, a.name LIMIT 3""")
open("answers/q3.txt", "w").write("".join(f"{n},{c}\n" for n, c in rows))
rows = q("SELECT id FROM loans WHERE returned IS NULL AND due < '2024-12-01' ORDER BY id")
open("answers/q4.txt", "w").write("".join(f"{i}\n" for (i,) in rows))
db.execute("""CREATE VIEW member_loans AS SELECT m.id AS member_id, m.name AS name, COUNT(l.id) AS loans
    FROM members m LEFT JOIN loans l ON l.member_id = m.id GROUP BY m.id""")
db.commit()
PY
head answers/*
