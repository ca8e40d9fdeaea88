import csv
from pathlib import Path

L = Path("/app/lists")
HASHES = {'bounced.csv': 'a3775fcf712b91aff1160da693e9bf67ddf32eb41faf32e97b67b7f8b3e7a849', 'subscribers.txt': '24946041931a85c36300dbcc0fdc8e63d947bcd1267ec6ed93df3a3833722d65', 'unsubscribed.txt': 'd8eb2062977bd289bb9089b17e3f5d4caa577af8f78d1a398acd6c17a982818a'}


def norm(s):
    return s.strip().lower()


def expected():
    import hashlib
    for name, sha in HASHES.items():
        assert hashlib.sha256((L / name).read_bytes()).hexdigest() == sha, f"{name} was modified"
    subs = {norm(l) for l in L.joinpath("subscribers.txt").read_text().splitlines()
            if l.strip() and not l.strip().startswith("#")}
    unsub = {norm(l) for l in L.joinpath("unsubscribed.txt").read_text().splitlines() if l.strip()}
    with open(L / "bounced.csv", newline="") as f:
        bounced = {norm(r["email"]) for r in csv.DictReader(f)}
    assert len(subs) > 50 and unsub and bounced
    send = sorted(subs - unsub - bounced, key=str.encode)
    removed = sorted(((a, "unsubscribed" if a in unsub else "bounced") for a in subs & (unsub | bounced)),
                     key=lambda x: x[0].encode())
    return send, removed


def test_send_list():
    send, _ = expected()
    assert Path("/app/send.txt").read_text() == "".join(a + "\n" for a in send)


def test_removed_list():
    _, removed = expected()
    assert Path("/app/removed.txt").read_text() == "".join(f"{a} {r}\n" for a, r in removed)


def test_no_overlap_and_normalized():
    send = Path("/app/send.txt").read_text().splitlines()
    removed = {l.split(" ")[0] for l in Path("/app/removed.txt").read_text().splitlines()}
    assert send and not set(send) & removed
    assert all(a == a.strip().lower() and "@" in a for a in send)
    assert len(send) == len(set(send))
