"""logs: answer questions about a web-server log whose format and questions vary by seed.

Formats: Apache combined, JSON lines, ``key=value`` and pipe-separated. Three or four questions are
drawn from a pool (requests with a status, error classes, busiest client, bytes per user, distinct
paths for a method, busiest hour). The tests carry the answers computed from the generated records;
the oracle recomputes them by parsing the file.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter

from t1env.families import Family, Instance

MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
FORMATS = ("combined", "jsonl", "kv", "pipe")
PATHS = ["/", "/login", "/logout", "/api/items", "/api/orders", "/api/users", "/search", "/static/app.js",
         "/static/style.css", "/health", "/admin", "/cart", "/checkout", "/img/logo.png", "/docs/intro"]
USERS = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory", "oscar"]
METHODS = ["GET", "GET", "GET", "POST", "PUT", "DELETE"]
STATUSES = [200] * 12 + [201, 204, 301, 302, 304, 400, 401, 403, 404, 404, 409, 500, 502, 503]

ORACLE = r'''
import json, re, sys
from collections import Counter
FMT, QUESTIONS = sys.argv[1], json.loads(sys.argv[2])
MON = {m: i + 1 for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split())}
rows = []
for line in open("/app/logs/server.log", encoding="utf-8"):
    line = line.rstrip("\n")
    if not line:
        continue
    if FMT == "combined":
        m = re.match(r'(\S+) \S+ (\S+) \[(\d+)/(\w+)/(\d+):(\d+):\d+:\d+ [^\]]*\] "(\S+) (\S+) [^"]*" (\d+) (\d+)', line)
        ip, user, _, _, _, hour, method, path, status, size = m.groups()
    elif FMT == "jsonl":
        d = json.loads(line)
        ip, user, method, path, status, size = d["client"], d["user"], d["method"], d["path"], d["status"], d["bytes"]
        hour = d["time"][11:13]
    elif FMT == "kv":
        d = dict(kv.split("=", 1) for kv in line.split(" "))
        ip, user, method, path, status, size = d["ip"], d["user"], d["method"], d["path"], d["status"], d["bytes"]
        hour = d["ts"][11:13]
    else:
        ts, ip, user, req, status, size = [f.strip() for f in line.split("|")]
        method, path = req.split(" ")
        hour = ts[11:13]
    rows.append(dict(ip=ip, user=user, method=method, path=path.split("?")[0], status=int(status), size=int(size), hour=hour))
out = []
for q in QUESTIONS:
    k = q["kind"]
    if k == "status":
        v = sum(r["status"] == q["arg"] for r in rows)
    elif k == "class":
        v = sum(r["status"] // 100 == q["arg"] for r in rows)
    elif k == "top_ip":
        c = Counter(r["ip"] for r in rows)
        v = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    elif k == "user_bytes":
        v = sum(r["size"] for r in rows if r["user"] == q["arg"])
    elif k == "distinct_paths":
        v = len({r["path"] for r in rows if r["method"] == q["arg"]})
    else:
        c = Counter(r["hour"] for r in rows)
        v = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    out.append(f"{q['key']}={v}")
open("/app/answers.txt", "w").write("\n".join(out) + "\n")
'''

TESTS = r'''
import hashlib
from pathlib import Path

LOG = Path("/app/logs/server.log")
ANSWERS = Path("/app/answers.txt")


def answers():
    assert hashlib.sha256(LOG.read_bytes()).hexdigest() == LOG_SHA256, "logs/server.log was modified"
    assert ANSWERS.is_file(), "/app/answers.txt is missing"
    out = {}
    for line in ANSWERS.read_text().splitlines():
        if line.strip():
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def test_answer_keys_exactly_as_asked():
    assert sorted(answers()) == sorted(EXPECTED)


'''


def _fmt(fmt: str, r: dict) -> str:
    t = r["t"]
    if fmt == "combined":
        stamp = f"{t[2]:02d}/{MONTHS[t[1] - 1]}/{t[0]}:{t[3]:02d}:{t[4]:02d}:{t[5]:02d} +0000"
        return (f'{r["ip"]} - {r["user"]} [{stamp}] "{r["method"]} {r["path"]} HTTP/1.1" '
                f'{r["status"]} {r["size"]} "-" "{r["agent"]}"')
    iso = f"{t[0]}-{t[1]:02d}-{t[2]:02d}T{t[3]:02d}:{t[4]:02d}:{t[5]:02d}Z"
    if fmt == "jsonl":
        return json.dumps({"time": iso, "client": r["ip"], "user": r["user"], "method": r["method"],
                           "path": r["path"], "status": r["status"], "bytes": r["size"]})
    if fmt == "kv":
        return (f'ts={iso} ip={r["ip"]} user={r["user"]} method={r["method"]} path={r["path"]} '
                f'status={r["status"]} bytes={r["size"]}')
    return f'{iso.replace("T", " ")[:-1]} | {r["ip"]} | {r["user"]} | {r["method"]} {r["path"]} | {r["status"]} | {r["size"]}'


FORMAT_DESC = {
    "combined": "Apache combined format (`IP - USER [TIME] \"METHOD PATH PROTO\" STATUS BYTES \"REFERER\" \"AGENT\"`)",
    "jsonl": "JSON lines (one object per line with keys `time`, `client`, `user`, `method`, `path`, `status`, `bytes`)",
    "kv": "`key=value` pairs separated by single spaces (`ts`, `ip`, `user`, `method`, `path`, `status`, `bytes`)",
    "pipe": "pipe-separated fields: `TIME | IP | USER | METHOD PATH | STATUS | BYTES`",
}


class LogAnalysis(Family):
    name = "logs"
    category = "text-processing"
    difficulty = "medium"
    description = "Answer 3-4 questions about a web-server log; format (4 kinds) and questions vary by seed."

    def build(self, rng: random.Random, seed: int) -> Instance:
        fmt = rng.choice(FORMATS)
        ips = [f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}" for _ in range(rng.randint(8, 16))]
        ip_weights = [rng.random() ** 2 + 0.05 for _ in ips]
        users = rng.sample(USERS, rng.randint(4, 8)) + ["-"]
        year, month, day = rng.randint(2019, 2025), rng.randint(1, 12), rng.randint(1, 28)
        secs = rng.randint(0, 6 * 3600)
        rows = []
        for _ in range(rng.randint(250, 700)):
            secs += rng.randint(1, 90)
            secs = min(secs, 86399)
            path = rng.choice(PATHS)
            if rng.random() < 0.25:
                path += f"?page={rng.randint(1, 9)}&q={rng.choice('abcxyz')}"
            rows.append({
                "t": (year, month, day, secs // 3600, secs // 60 % 60, secs % 60),
                "ip": rng.choices(ips, ip_weights)[0], "user": rng.choice(users), "method": rng.choice(METHODS),
                "path": path, "status": rng.choice(STATUSES), "size": rng.choice([0, rng.randint(20, 90000)]),
                "agent": rng.choice(["curl/8.1", "Mozilla/5.0", "python-requests/2.31"]),
            })
        log = "".join(_fmt(fmt, r) + "\n" for r in rows)

        # -- questions and their answers from the records ------------------------------------
        def top(counter):
            return sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]

        present = sorted({r["status"] for r in rows})
        user_q = rng.choice([u for u in users if u != "-"])
        method_q = rng.choice(["GET", "POST", "PUT", "DELETE"])
        pool = [
            ("status", rng.choice(present), "requests_{arg}", "How many requests got HTTP status {arg}?",
             lambda a: sum(r["status"] == a for r in rows)),
            ("class", rng.choice([4, 5]), "errors_{arg}xx", "How many responses had a status in the {arg}xx class?",
             lambda a: sum(r["status"] // 100 == a for r in rows)),
            ("top_ip", None, "top_client", "Which client IP made the most requests (ties: the smallest IP as a string)?",
             lambda a: top(Counter(r["ip"] for r in rows))),
            ("user_bytes", user_q, "bytes_{arg}", "How many bytes in total were sent in responses to user `{arg}`?",
             lambda a: sum(r["size"] for r in rows if r["user"] == a)),
            ("distinct_paths", method_q, "paths_{arg}",
             "How many distinct paths (query string removed: everything from `?` on) were requested with method {arg}?",
             lambda a: len({r["path"].split("?")[0] for r in rows if r["method"] == a})),
            ("busy_hour", None, "busiest_hour",
             "Which hour of the day (two digits, `00`-`23`, UTC as in the log) had the most requests (ties: the earliest)?",
             lambda a: top(Counter(f"{r['t'][3]:02d}" for r in rows))),
        ]
        chosen = rng.sample(pool, rng.randint(3, 4))
        questions, expected, lines = [], {}, []
        for kind, arg, key, text, fn in chosen:
            key = key.format(arg=str(arg).lower())
            questions.append({"kind": kind, "arg": arg, "key": key})
            expected[key] = str(fn(arg))
            lines.append(f"* `{key}` — {text.format(arg=arg)}")

        instruction = (
            f"`/app/logs/server.log` is a web-server access log in {FORMAT_DESC[fmt]}. Paths may carry a query string.\n\n"
            "Answer the questions below in `/app/answers.txt`, one line per question, formatted `KEY=VALUE` with the\n"
            "key given for each question (numbers in plain decimal). Do not modify the log.\n\n" + "\n".join(lines) + "\n"
        )
        tests = f"LOG_SHA256 = {hashlib.sha256(log.encode()).hexdigest()!r}\nEXPECTED = {expected!r}\n" + TESTS
        for key in expected:
            fn = "test_" + "".join(c if c.isalnum() else "_" for c in key)
            tests += f"def {fn}():\n    assert answers().get({key!r}) == EXPECTED[{key!r}]\n\n\n"
        solve = (f"cat > /tmp/answer.py <<'PY'\n{ORACLE.strip()}\nPY\n"
                 f"python3 /tmp/answer.py {fmt} '{json.dumps(questions)}'\ncat answers.txt\n")
        return Instance(
            title=f"Answer {len(expected)} questions about a {fmt} web-server log",
            instruction=instruction,
            solve=solve,
            tests={"test_answers.py": tests.rstrip() + "\n"},
            files={"logs/server.log": log},
            tags=("logs", fmt),
            tools=("python3",),
            max_turns=30,
        )
