#!/bin/bash
set -euo pipefail
cd /app
mkdir -p backup
cp crm.db backup/crm-v1.db
python3 -c 'import sqlite3; db = sqlite3.connect("crm.db"); [print(r) for r in db.execute("SELECT * FROM contacts_raw LIMIT 8")]'
python3 -c 'import sqlite3; db = sqlite3.connect("crm.db"); print(db.execute("SELECT COUNT(*), COUNT(DISTINCT lower(trim(email))) FROM contacts_raw").fetchone())'
cat > /tmp/schema.sql <<'SQL'
CREATE TABLE companies(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, city TEXT);
CREATE TABLE contacts(id INTEGER PRIMARY KEY, first_name TEXT NOT NULL, last_name TEXT, email TEXT NOT NULL UNIQUE,
  phone TEXT, company_id INTEGER REFERENCES companies(id), created TEXT NOT NULL);
CREATE TABLE tags(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE contact_tags(contact_id INTEGER NOT NULL REFERENCES contacts(id), tag_id INTEGER NOT NULL REFERENCES tags(id),
  PRIMARY KEY (contact_id, tag_id));
CREATE INDEX contacts_company_idx ON contacts(company_id);
CREATE VIEW contact_summary AS
  SELECT c.email AS email, co.name AS company, (SELECT COUNT(*) FROM contact_tags ct WHERE ct.contact_id = c.id) AS tag_count
  FROM contacts c LEFT JOIN companies co ON co.id = c.company_id;
SQL
cat > /tmp/migrate.py <<'PY'
import sqlite3
db = sqlite3.connect("/app/crm.db")
raw = db.execute("SELECT id, full_name, email, phone, company, company_city, tags, created FROM contacts_raw ORDER BY id").fetchall()
db.executescript(open("/tmp/schema.sql").read())
def phone(p):
    d = "".join(c for c in p or "" if c.isdigit())
    if (p or "").strip().startswith("00"):
        d = d[2:]
    return "+" + d if d else None
companies, contacts, tagnames = {}, {}, set()
for rid, name, email, ph, comp, city, tags, created in raw:
    comp = (comp or "").strip()
    if comp and comp not in companies:
        companies[comp] = len(companies) + 1
        db.execute("INSERT INTO companies VALUES (?, ?, ?)", (companies[comp], comp, city))
    e = email.strip().lower()
    ts = {t.strip().lower() for t in (tags or "").split(",") if t.strip()}
    tagnames |= ts
    if e not in contacts:
        first, _, last = name.partition(" ")
        contacts[e] = [rid, first, last or None, e, phone(ph), companies.get(comp), created, set(ts)]
    else:
        contacts[e][6] = min(contacts[e][6], created)
        contacts[e][7] |= ts
tag_ids = {t: i for i, t in enumerate(sorted(tagnames), 1)}
db.executemany("INSERT INTO tags VALUES (?, ?)", [(i, t) for t, i in tag_ids.items()])
for c in contacts.values():
    db.execute("INSERT INTO contacts VALUES (?, ?, ?, ?, ?, ?, ?)", c[:7])
    db.executemany("INSERT INTO contact_tags VALUES (?, ?)", [(c[0], tag_ids[t]) for t in sorted(c[7])])
db.execute("DROP TABLE contacts_raw")
db.execute("PRAGMA user_version = 2")
db.commit()
print(len(companies), len(contacts), len(tag_ids))
PY
python3 /tmp/migrate.py
python3 -c 'import sqlite3; db = sqlite3.connect("/app/crm.db"); print(db.execute("PRAGMA foreign_key_check").fetchall()); [print(r) for r in db.execute("SELECT * FROM contact_summary LIMIT 5")]'
