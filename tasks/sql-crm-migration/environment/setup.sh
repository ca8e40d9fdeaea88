#!/bin/bash
set -euo pipefail
python3 - <<'PY'
"""Raw CRM rows and the v1 database (the same code is embedded in environment/setup.sh)."""
import random
import sqlite3


def rows():
    r = random.Random(77)
    firsts = ["Ana", "Ben", "Chloé", "Dmitri", "Eva", "Femi", "Goran", "Hana", "Ilse", "Jonas", "Kemal", "Lea"]
    lasts = ["Berg", "van Dijk", "Okoro", "Silva", "Nakamura", "de la Cruz", "Weiss", "", "Novak"]
    companies = [("Acme Corp", "Berlin"), ("Globex", "Lyon"), ("Initech", "Austin"), ("Umbrella", "Oslo"),
                 ("Hooli", "Palo Alto"), ("", "")]
    tags = ["VIP", "lead", "Partner", "newsletter", "churn-risk", "beta"]
    people = []
    for i in range(60):
        f, l = r.choice(firsts), r.choice(lasts)
        email = f"{f.lower().replace('é', 'e')}.{(l or 'x').lower().replace(' ', '')}{i}@example.com"
        people.append((f"{f} {l}".strip(), email))
    out = []
    for rid in range(1, 131):
        name, email = people[r.randrange(60)] if rid > 60 else people[rid - 1]
        if r.random() < 0.3:
            email = email.upper() if r.random() < 0.5 else f"  {email.capitalize()} "
        digits = "".join(str(r.randint(0, 9)) for _ in range(r.randint(9, 11)))
        style = r.randrange(5)
        phone = ["+" + digits, "00" + digits, f"+{digits[:2]} ({digits[2:5]}) {digits[5:]}", f"{digits[:3]}-{digits[3:6]}-{digits[6:]}", ""][style]
        comp, city = r.choice(companies)
        if comp and r.random() < 0.2:
            comp = f" {comp}  "
        if city and r.random() < 0.15:
            city = city.upper()
        tg = [r.choice(tags) for _ in range(r.randint(0, 3))]
        tagstr = ",".join(t if r.random() < 0.7 else f" {t.upper()} " for t in tg) + ("," if r.random() < 0.1 else "")
        created = f"2023-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"
        out.append((rid, name, email, phone, comp, city, tagstr, created))
    return out


def build(path):
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE contacts_raw(id INTEGER PRIMARY KEY, full_name TEXT, email TEXT, phone TEXT, company TEXT,"
               " company_city TEXT, tags TEXT, created TEXT)")
    db.executemany("INSERT INTO contacts_raw VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows())
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
build("/app/crm.db")
PY
