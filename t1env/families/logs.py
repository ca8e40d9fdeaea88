"""logs: answer questions about a web-server log whose format and questions vary by seed.

Three or four questions are drawn from a pool (requests with a status, error classes, busiest client,
bytes per user, distinct paths for a method, busiest hour). The tests carry the answers computed from
the generated records; the oracle recomputes them by parsing the file.

The splits draw from disjoint pools (``docs/families.md``): train logs are Apache combined, JSON lines,
``key=value`` or pipe-separated, test logs are CSV with a header or syslog-style lines; user names,
client address ranges, years, answer keys and the instruction's wording differ too, so no test
instance's instruction or oracle script is a train instance's.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter

from t1env.families.base import Family, Instance, split_of_seed

MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
FORMATS = {"train": ("combined", "jsonl", "kv", "pipe"), "test": ("csv", "syslog")}
PATHS = [
    "/",
    "/login",
    "/logout",
    "/api/items",
    "/api/orders",
    "/api/users",
    "/search",
    "/static/app.js",
    "/static/style.css",
    "/health",
    "/admin",
    "/cart",
    "/checkout",
    "/img/logo.png",
    "/docs/intro",
]
USERS = {
    "train": ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory", "oscar"],
    "test": [
        "amir",
        "bianca",
        "chidi",
        "dmitri",
        "esme",
        "farah",
        "goran",
        "hana",
        "ikaika",
        "jorge",
        "kenji",
        "leila",
    ],
}
NETS = {"train": ("10.{}.{}.{}",), "test": ("172.{}.{}.{}", "192.168.{}.{}")}
YEARS = {"train": (2019, 2025), "test": (2026, 2030)}
METHODS = ["GET", "GET", "GET", "POST", "PUT", "DELETE"]
STATUSES = [200] * 12 + [201, 204, 301, 302, 304, 400, 401, 403, 404, 404, 409, 500, 502, 503]

PARSERS = {  # the oracle parses only its own instance's format
    "combined": r"""
    m = re.match(r'(\S+) \S+ (\S+) \[(\d+)/(\w+)/(\d+):(\d+):\d+:\d+ [^\]]*\] "(\S+) (\S+) [^"]*" (\d+) (\d+)', line)
    ip, user, _, _, _, hour, method, path, status, size = m.groups()""",
    "jsonl": r"""
    d = json.loads(line)
    ip, user, method, path, status, size = d["client"], d["user"], d["method"], d["path"], d["status"], d["bytes"]
    hour = d["time"][11:13]""",
    "kv": r"""
    d = dict(kv.split("=", 1) for kv in line.split(" "))
    ip, user, method, path, status, size = d["ip"], d["user"], d["method"], d["path"], d["status"], d["bytes"]
    hour = d["ts"][11:13]""",
    "pipe": r"""
    ts, ip, user, req, status, size = [f.strip() for f in line.split("|")]
    method, path = req.split(" ")
    hour = ts[11:13]""",
    "csv": r"""
    if line.startswith("timestamp,"):
        continue
    ts, ip, user, method, path, status, size = next(csv.reader([line]))
    hour = ts[11:13]""",
    "syslog": r"""
    m = re.match(r'\w+ +\d+ (\d+):\d+:\d+ \S+ \S+: (\S+) user=(\S+) "(\S+) (\S+)" status=(\d+) bytes=(\d+)', line)
    hour, ip, user, method, path, status, size = m.groups()""",
}

ORACLE = r"""
import csv, json, re, sys
from collections import Counter
QUESTIONS = json.loads(sys.argv[1])
rows = []
for line in open("/app/logs/server.log", encoding="utf-8"):
    line = line.rstrip("\n")
    if not line:
        continue
PARSER
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
"""

TESTS = r"""
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
    unasked = sorted(set(out) - set(EXPECTED))
    # an answer counts only in a file that answers the questions asked: listing every key there could be is not
    # reading the questions (without this, answering all of them lost one check of n)
    assert not unasked, f"answers.txt answers questions that were not asked: {', '.join(unasked)}"
    return out


def test_answer_keys_exactly_as_asked():
    assert sorted(answers()) == sorted(EXPECTED)


"""


def _fmt(fmt: str, r: dict) -> str:
    t = r["t"]
    if fmt == "combined":
        stamp = f"{t[2]:02d}/{MONTHS[t[1] - 1]}/{t[0]}:{t[3]:02d}:{t[4]:02d}:{t[5]:02d} +0000"
        return (
            f'{r["ip"]} - {r["user"]} [{stamp}] "{r["method"]} {r["path"]} HTTP/1.1" '
            f'{r["status"]} {r["size"]} "-" "{r["agent"]}"'
        )
    if fmt == "syslog":
        return (
            f"{MONTHS[t[1] - 1]} {t[2]:2d} {t[3]:02d}:{t[4]:02d}:{t[5]:02d} {r['host']}: {r['ip']} "
            f'user={r["user"]} "{r["method"]} {r["path"]}" status={r["status"]} bytes={r["size"]}'
        )
    iso = f"{t[0]}-{t[1]:02d}-{t[2]:02d}T{t[3]:02d}:{t[4]:02d}:{t[5]:02d}Z"
    if fmt == "jsonl":
        return json.dumps(
            {
                "time": iso,
                "client": r["ip"],
                "user": r["user"],
                "method": r["method"],
                "path": r["path"],
                "status": r["status"],
                "bytes": r["size"],
            }
        )
    if fmt == "kv":
        return (
            f"ts={iso} ip={r['ip']} user={r['user']} method={r['method']} path={r['path']} "
            f"status={r['status']} bytes={r['size']}"
        )
    if fmt == "csv":
        return f"{iso},{r['ip']},{r['user']},{r['method']},{r['path']},{r['status']},{r['size']}"
    return f"{iso.replace('T', ' ')[:-1]} | {r['ip']} | {r['user']} | {r['method']} {r['path']} | {r['status']} | {r['size']}"


FORMAT_DESC = {
    "combined": 'Apache combined format (`IP - USER [TIME] "METHOD PATH PROTO" STATUS BYTES "REFERER" "AGENT"`)',
    "jsonl": "JSON lines (one object per line with keys `time`, `client`, `user`, `method`, `path`, `status`, `bytes`)",
    "kv": "`key=value` pairs separated by single spaces (`ts`, `ip`, `user`, `method`, `path`, `status`, `bytes`)",
    "pipe": "pipe-separated fields: `TIME | IP | USER | METHOD PATH | STATUS | BYTES`",
    "csv": "CSV with a header row `timestamp,client,user,method,path,status,bytes` (ISO timestamps in UTC)",
    "syslog": (
        'syslog style: `MON DAY HH:MM:SS HOST PROGRAM[PID]: CLIENT user=USER "METHOD PATH" status=STATUS '
        "bytes=BYTES` (times in UTC)"
    ),
}
# per split: (answer key template, question text) for each question kind
QUESTIONS = {
    "train": {
        "status": ("requests_{arg}", "How many requests got HTTP status {arg}?"),
        "class": ("errors_{arg}xx", "How many responses had a status in the {arg}xx class?"),
        "top_ip": ("top_client", "Which client IP made the most requests (ties: the smallest IP as a string)?"),
        "user_bytes": ("bytes_{arg}", "How many bytes in total were sent in responses to user `{arg}`?"),
        "distinct_paths": (
            "paths_{arg}",
            "How many distinct paths (query string removed: everything from `?` on) were requested with method {arg}?",
        ),
        "busy_hour": (
            "busiest_hour",
            "Which hour of the day (two digits, `00`-`23`, UTC as in the log) had the most "
            "requests (ties: the earliest)?",
        ),
    },
    "test": {
        "status": ("status_{arg}_count", "The number of log lines whose response status is exactly {arg}."),
        "class": (
            "class_{arg}xx_count",
            "The number of responses with a {arg}xx status code (any status from {arg}00 to {arg}99).",
        ),
        "top_ip": (
            "most_active_client",
            "The client address that appears on the most lines (on a tie, the one that sorts first as a string).",
        ),
        "user_bytes": ("{arg}_bytes_total", "The sum of the response sizes (bytes) of all requests by user `{arg}`."),
        "distinct_paths": (
            "{arg}_unique_paths",
            "The number of different paths requested with {arg}, a path's query string (from `?` on) not counted.",
        ),
        "busy_hour": ("peak_hour", "The hour (`00`-`23`, UTC) with the most requests; on a tie, the earliest hour."),
    },
}
INTRO = {
    "train": (
        "`/app/logs/server.log` is a web-server access log in {desc}. Paths may carry a query string.\n\n"
        "Answer the questions below in `/app/answers.txt`, one line per question, formatted `KEY=VALUE` with "
        "the\nkey given for each question (numbers in plain decimal). Do not modify the log.\n\n"
    ),
    "test": (
        "Our web server writes its access log to `/app/logs/server.log`, in {desc}; a path may end in a "
        "query string.\n\nCompute the values listed below and save them to `/app/answers.txt`: one "
        "`KEY=VALUE` line each, using\nthe key shown, numbers in plain decimal. Leave the log unchanged.\n\n"
    ),
}


class LogAnalysis(Family):
    name = "logs"
    category = "text-processing"
    difficulty = "medium"
    description = "Answer 3-4 questions about a web-server log; format (6, 2 held out) and questions vary by seed."

    def build(self, rng: random.Random, seed: int) -> Instance:
        split = split_of_seed(seed)
        fmt = rng.choice(FORMATS[split])
        ips = [
            rng.choice(NETS[split]).format(*(rng.randint(0, 255) for _ in range(2)), rng.randint(1, 254))
            for _ in range(rng.randint(8, 16))
        ]
        ip_weights = [rng.random() ** 2 + 0.05 for _ in ips]
        users = rng.sample(USERS[split], rng.randint(4, 8)) + ["-"]
        host = (
            f"{rng.choice(['web', 'edge', 'api'])}{rng.randint(1, 9)} "
            f"{rng.choice(['httpd', 'nginx'])}[{rng.randint(100, 9999)}]"
        )
        year, month, day = rng.randint(*YEARS[split]), rng.randint(1, 12), rng.randint(1, 28)
        secs = rng.randint(0, 6 * 3600)
        rows = []
        for _ in range(rng.randint(250, 700)):
            secs += rng.randint(1, 90)
            secs = min(secs, 86399)
            path = rng.choice(PATHS)
            if rng.random() < 0.25:
                path += f"?page={rng.randint(1, 9)}&q={rng.choice('abcxyz')}"
            rows.append(
                {
                    "t": (year, month, day, secs // 3600, secs // 60 % 60, secs % 60),
                    "ip": rng.choices(ips, ip_weights)[0],
                    "user": rng.choice(users),
                    "method": rng.choice(METHODS),
                    "path": path,
                    "status": rng.choice(STATUSES),
                    "size": rng.choice([0, rng.randint(20, 90000)]),
                    "agent": rng.choice(["curl/8.1", "Mozilla/5.0", "python-requests/2.31"]),
                    "host": host,
                }
            )
        log = ("timestamp,client,user,method,path,status,bytes\n" if fmt == "csv" else "") + "".join(
            _fmt(fmt, r) + "\n" for r in rows
        )

        # -- questions and their answers from the records ------------------------------------
        def top(counter):
            return sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]

        present = sorted({r["status"] for r in rows})
        user_q = rng.choice([u for u in users if u != "-"])
        method_q = rng.choice(["GET", "POST", "PUT", "DELETE"])
        pool = [
            ("status", rng.choice(present), lambda a: sum(r["status"] == a for r in rows)),
            ("class", rng.choice([4, 5]), lambda a: sum(r["status"] // 100 == a for r in rows)),
            ("top_ip", None, lambda a: top(Counter(r["ip"] for r in rows))),
            ("user_bytes", user_q, lambda a: sum(r["size"] for r in rows if r["user"] == a)),
            ("distinct_paths", method_q, lambda a: len({r["path"].split("?")[0] for r in rows if r["method"] == a})),
            ("busy_hour", None, lambda a: top(Counter(f"{r['t'][3]:02d}" for r in rows))),
        ]
        chosen = rng.sample(pool, rng.randint(3, 4))
        questions, expected, lines = [], {}, []
        for kind, arg, fn in chosen:
            key, text = QUESTIONS[split][kind]
            key = key.format(arg=str(arg).lower())
            questions.append({"kind": kind, "arg": arg, "key": key})
            expected[key] = str(fn(arg))
            lines.append(f"* `{key}` — {text.format(arg=arg)}")

        instruction = INTRO[split].format(desc=FORMAT_DESC[fmt]) + "\n".join(lines) + "\n"
        tests = f"LOG_SHA256 = {hashlib.sha256(log.encode()).hexdigest()!r}\nEXPECTED = {expected!r}\n" + TESTS
        for key in expected:
            fn = "test_" + "".join(c if c.isalnum() else "_" for c in key)
            tests += f"def {fn}():\n    assert answers().get({key!r}) == EXPECTED[{key!r}]\n\n\n"
        oracle = ORACLE.strip().replace("PARSER", PARSERS[fmt].strip("\n"))
        solve = (
            f"cat > /tmp/answer.py <<'PY'\n{oracle}\nPY\n"
            f"python3 /tmp/answer.py '{json.dumps(questions)}'\ncat answers.txt\n"
        )
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
