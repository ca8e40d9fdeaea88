"""Expected v2 content computed from the raw rows."""
import gen


def phone(p):
    d = "".join(c for c in p if c.isdigit())
    if p.strip().startswith("00"):
        d = d[2:]
    return "+" + d if d else None


def expected():
    raw = sorted(gen.rows())
    companies, contacts, by_email, tagnames = {}, {}, {}, set()
    for rid, name, email, ph, comp, city, tags, created in raw:
        comp = comp.strip()
        if comp and comp not in companies:
            companies[comp] = (len(companies) + 1, city)
        e = email.strip().lower()
        ts = {t.strip().lower() for t in tags.split(",") if t.strip()}
        tagnames |= ts
        if e not in by_email:
            first, _, last = name.partition(" ")
            by_email[e] = {"id": rid, "first": first, "last": last or None, "email": e, "phone": phone(ph),
                           "company": comp or None, "created": created, "tags": set(ts)}
        else:
            c = by_email[e]
            c["created"] = min(c["created"], created)
            c["tags"] |= ts
    tag_ids = {t: i for i, t in enumerate(sorted(tagnames), 1)}
    return companies, by_email, tag_ids
