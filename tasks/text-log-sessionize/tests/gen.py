import json
import random
from datetime import datetime, timedelta, timezone

MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def generate(seed, n):
    r = random.Random(seed)
    ips = [f"198.51.100.{i}" for i in range(1, 9)] + [f"2001:db8::{i:x}" for i in range(1, 4)]
    paths = ["/", "/login", "/cart", "/api/items", "/api/items/42", "/static/app.js", "/search"]
    t0 = datetime(2024, 10, 10, 8, 0, tzinfo=timezone.utc)
    clock = {ip: t0 + timedelta(seconds=r.randint(0, 3600)) for ip in ips}
    lines = []
    for _ in range(n):
        ip = r.choice(ips)
        gap = r.choice([5, 30, 120, 600, 1799, 1800, 1801, 4000]) if r.random() < 0.3 else r.randint(1, 90)
        clock[ip] += timedelta(seconds=gap)
        t = clock[ip]
        path = r.choice(paths) + (f"?q={r.randint(1, 9)}" if r.random() < 0.2 else "")
        status = r.choice([200, 200, 200, 304, 404, 500])
        size = r.randint(0, 50000)
        if r.random() < 0.03:
            lines.append(r.choice(["", "garbage line", '{"ts": "oops"}', '1.2.3.4 - - [bad] "GET"']))
        if r.random() < 0.5:
            off = r.choice([0, 2, -5, 5.5])
            tz = timezone(timedelta(hours=off))
            lt = t.astimezone(tz)
            sign = "+" if off >= 0 else "-"
            hh, mm = divmod(int(abs(off) * 60), 60)
            stamp = f"{lt.day:02d}/{MONTHS[lt.month - 1]}/{lt.year}:{lt:%H:%M:%S} {sign}{hh:02d}{mm:02d}"
            sz = "-" if size == 0 or r.random() < 0.05 else str(size)
            lines.append(f'{ip} - - [{stamp}] "GET {path} HTTP/1.1" {status} {sz} "-" "Mozilla/5.0 (X11)"')
        else:
            off = r.choice([0, 0, 1, -3, 5.5])
            if off == 0 and r.random() < 0.5:
                ts = t.strftime("%Y-%m-%dT%H:%M:%SZ")
            else:
                tz = timezone(timedelta(hours=off))
                ts = t.astimezone(tz).isoformat()
            lines.append(json.dumps({"ts": ts, "client": ip, "method": "GET", "uri": path, "status": status,
                                     "size": size}))
    r.shuffle(lines)
    return "\n".join(lines) + "\n"
