#!/bin/bash
set -euo pipefail
cd /app
head -n 5 logs/access.log
wc -l logs/access.log
cat > sessionize.py <<'PY'
"""python3 sessionize.py LOGFILE OUTDIR -> OUTDIR/sessions.csv, OUTDIR/summary.json"""
import json
import os
import re
import sys
from datetime import datetime, timezone

APACHE = re.compile(r'^(\S+) \S+ \S+ \[([^\]]+)\] "(\S+) (\S+) [^"]*" (\d{3}) (\d+|-) ')


def parse(line):
    m = APACHE.match(line)
    if m:
        ip, stamp, _, uri, status, size = m.groups()
        try:
            t = datetime.strptime(stamp, "%d/%b/%Y:%H:%M:%S %z")
        except ValueError:
            return None
        return ip, t, uri, int(status), 0 if size == "-" else int(size)
    try:
        o = json.loads(line)
        t = datetime.fromisoformat(o["ts"].replace("Z", "+00:00"))
        if t.tzinfo is None:
            return None
        return o["client"], t, o["uri"], int(o["status"]), int(o["size"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def utc(ts):
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def main(src, outdir):
    os.makedirs(outdir, exist_ok=True)
    recs, lines, skipped = [], 0, 0
    with open(src, encoding="utf-8", errors="replace") as f:
        for line in f.read().splitlines():
            lines += 1
            rec = parse(line)
            if rec is None:
                skipped += 1
                continue
            ip, t, uri, status, size = rec
            recs.append((int(t.timestamp()), ip, uri.split("?", 1)[0], status, size))
    recs.sort(key=lambda r: (r[0], r[1]))
    current, sessions = {}, []
    for ts, ip, path, status, size in recs:
        s = current.get(ip)
        if s is None or ts - s["end"] > 1800:
            s = current[ip] = {"ip": ip, "start": ts, "end": ts, "n": 0, "bytes": 0, "paths": set()}
            sessions.append(s)
        s["end"] = ts
        s["n"] += 1
        s["bytes"] += size
        s["paths"].add(path)
    sessions.sort(key=lambda s: (s["start"], s["ip"]))
    with open(os.path.join(outdir, "sessions.csv"), "w") as f:
        f.write("ip,start,end,requests,bytes,paths\n")
        for s in sessions:
            f.write(f"{s['ip']},{utc(s['start'])},{utc(s['end'])},{s['n']},{s['bytes']},{len(s['paths'])}\n")
    hits, status = {}, {}
    for _, _, path, st, _ in recs:
        hits[path] = hits.get(path, 0) + 1
        status[str(st)] = status.get(str(st), 0) + 1
    summary = {"lines": lines, "skipped": skipped, "sessions": len(sessions),
               "top_paths": [[p, c] for p, c in sorted(hits.items(), key=lambda kv: (-kv[1], kv[0]))[:5]],
               "status": dict(sorted(status.items()))}
    with open(os.path.join(outdir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
PY
python3 sessionize.py logs/access.log out
head -n 5 out/sessions.csv
cat out/summary.json
