import json
import re
from datetime import datetime, timezone

APACHE = re.compile(r'^(\S+) \S+ \S+ \[([^\]]+)\] "(\S+) (\S+) [^"]*" (\d{3}) (\d+|-) ')


def parse(line):
    m = APACHE.match(line)
    if m:
        ip, stamp, _, uri, status, size = m.groups()
        t = datetime.strptime(stamp, "%d/%b/%Y:%H:%M:%S %z")
        return ip, t, uri, int(status), 0 if size == "-" else int(size)
    try:
        o = json.loads(line)
        t = datetime.fromisoformat(o["ts"].replace("Z", "+00:00"))
        if t.tzinfo is None:
            return None
        return o["client"], t, o["uri"], int(o["status"]), int(o["size"])
    except Exception:
        return None


def build(text):
    recs, skipped, lines = [], 0, 0
    for line in text.splitlines():
        lines += 1
        rec = parse(line)
        if rec is None:
            skipped += 1
            continue
        ip, t, uri, status, size = rec
        recs.append((int(t.timestamp()), ip, uri.split("?", 1)[0], status, size))
    recs.sort(key=lambda x: (x[0], x[1]))
    open_s, sessions = {}, []
    for ts, ip, path, status, size in recs:
        s = open_s.get(ip)
        if s is None or ts - s["end"] > 1800:
            s = {"ip": ip, "start": ts, "end": ts, "requests": 0, "bytes": 0, "paths": set()}
            open_s[ip] = s
            sessions.append(s)
        s["end"] = ts
        s["requests"] += 1
        s["bytes"] += size
        s["paths"].add(path)
    fmt = lambda ts: datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    sessions.sort(key=lambda s: (s["start"], s["ip"]))
    csv = "ip,start,end,requests,bytes,paths\n" + "".join(
        f"{s['ip']},{fmt(s['start'])},{fmt(s['end'])},{s['requests']},{s['bytes']},{len(s['paths'])}\n" for s in sessions)
    hits, status = {}, {}
    for _, _, path, st, _ in recs:
        hits[path] = hits.get(path, 0) + 1
        status[str(st)] = status.get(str(st), 0) + 1
    summary = {"lines": lines, "skipped": skipped, "sessions": len(sessions),
               "top_paths": [[p, c] for p, c in sorted(hits.items(), key=lambda kv: (-kv[1], kv[0]))[:5]],
               "status": dict(sorted(status.items()))}
    return csv, summary
