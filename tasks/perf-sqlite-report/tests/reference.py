import sqlite3


def report(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    users = {}
    buyers, revenue = set(), 0
    for i, uid, kind, ts, amount in db.execute("SELECT id, user_id, kind, ts, amount FROM events"):
        u = users.get(uid)
        if u is None:
            users[uid] = [1, (ts, i, kind)]
        else:
            u[0] += 1
            if (ts, i) > u[1][:2]:
                u[1] = (ts, i, kind)
        if kind == "purchase":
            buyers.add(uid)
            revenue += amount
    lines = ["top users:"]
    for uid, (n, _) in sorted(users.items(), key=lambda kv: (-kv[1][0], kv[0]))[:10]:
        lines.append(f"  {uid} {n}")
    lines.append(f"buyers {len(buyers)} revenue {revenue if buyers else None}")
    lines.append("latest:")
    for uid in sorted(users):
        ts, i, kind = users[uid][1]
        lines.append(f"  {uid} {i} {kind} {ts}")
    return "\n".join(lines) + "\n"


def fingerprint(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    return db.execute("SELECT COUNT(*), SUM(id), SUM(user_id), SUM(ts), SUM(amount), SUM(length(kind)) FROM events").fetchone()
