#!/usr/bin/env python3
"""python3 run_report.py DB [SQLFILE]: runs the report query (default /app/report.sql) and prints CSV."""
import csv
import sqlite3
import sys

db = sqlite3.connect(sys.argv[1])
sql = open(sys.argv[2] if len(sys.argv) > 2 else "/app/report.sql").read()
cur = db.execute(sql)
w = csv.writer(sys.stdout, lineterminator="\n")
w.writerow([d[0] for d in cur.description])
for row in cur:
    w.writerow(["NULL" if v is None else f"{v:.2f}" if isinstance(v, float) else v for v in row])
