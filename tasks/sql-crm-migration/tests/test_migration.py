import sqlite3
from pathlib import Path

import pytest

import gen
import reference

DB = Path("/app/crm.db")


@pytest.fixture(scope="module")
def db():
    assert DB.is_file()
    con = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
    yield con
    con.close()


@pytest.fixture(scope="module")
def ref():
    return reference.expected()


def test_backup_is_v1():
    con = sqlite3.connect("file:/app/backup/crm-v1.db?mode=ro", uri=True)
    assert con.execute("PRAGMA user_version").fetchone() == (1,)
    assert sorted(con.execute("SELECT * FROM contacts_raw").fetchall()) == sorted(gen.rows())


def test_version_and_raw_dropped(db):
    assert db.execute("PRAGMA user_version").fetchone() == (2,)
    names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "contacts_raw" not in names
    assert {"companies", "contacts", "tags", "contact_tags"} <= names


def test_companies(db, ref):
    companies, _, _ = ref
    want = sorted((i, name, city) for name, (i, city) in companies.items())
    assert sorted(db.execute("SELECT id, name, city FROM companies").fetchall()) == want


def test_contacts_deduplicated(db, ref):
    _, contacts, _ = ref
    got = sorted(db.execute("SELECT id, email FROM contacts").fetchall())
    assert got == sorted((c["id"], c["email"]) for c in contacts.values())


def test_contact_names(db, ref):
    _, contacts, _ = ref
    got = dict(((r[0]), r[1:]) for r in db.execute("SELECT id, first_name, last_name FROM contacts"))
    assert got == {c["id"]: (c["first"], c["last"]) for c in contacts.values()}


def test_contact_phones(db, ref):
    _, contacts, _ = ref
    got = dict(db.execute("SELECT id, phone FROM contacts").fetchall())
    assert got == {c["id"]: c["phone"] for c in contacts.values()}


def test_contact_company_and_created(db, ref):
    companies, contacts, _ = ref
    got = {r[0]: r[1:] for r in db.execute("SELECT id, company_id, created FROM contacts")}
    want = {c["id"]: (companies[c["company"]][0] if c["company"] else None, c["created"]) for c in contacts.values()}
    assert got == want


def test_tags_and_links(db, ref):
    _, contacts, tag_ids = ref
    assert sorted(db.execute("SELECT id, name FROM tags").fetchall()) == sorted((i, t) for t, i in tag_ids.items())
    want = sorted((c["id"], tag_ids[t]) for c in contacts.values() for t in c["tags"])
    assert sorted(db.execute("SELECT contact_id, tag_id FROM contact_tags").fetchall()) == want


def test_constraints_and_index(db):
    fks = {(r[2], r[3], r[4]) for r in db.execute("PRAGMA foreign_key_list(contacts)")}
    assert ("companies", "company_id", "id") in fks
    fks = {(r[2], r[3]) for r in db.execute("PRAGMA foreign_key_list(contact_tags)")}
    assert {("contacts", "contact_id"), ("tags", "tag_id")} <= fks
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []
    indexed = set()
    for name, unique in [(r[1], r[2]) for r in db.execute("PRAGMA index_list(contacts)")]:
        cols = [r[2] for r in db.execute(f"PRAGMA index_info('{name}')")]
        indexed.add((tuple(cols), unique))
    assert (("company_id",), 0) in indexed or (("company_id",), 1) in indexed
    assert (("email",), 1) in indexed, "email is not UNIQUE"
    pk = [r[1] for r in sorted(db.execute("PRAGMA table_info(contact_tags)"), key=lambda r: r[5]) if r[5]]
    assert pk == ["contact_id", "tag_id"]


def test_summary_view(db, ref):
    companies, contacts, _ = ref
    assert db.execute("SELECT type FROM sqlite_master WHERE name = 'contact_summary'").fetchone() == ("view",)
    want = sorted((c["email"], c["company"], len(c["tags"])) for c in contacts.values())
    assert sorted(db.execute("SELECT email, company, tag_count FROM contact_summary").fetchall()) == want
