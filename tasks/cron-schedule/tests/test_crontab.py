import datetime as dt
import os
import re
import stat
from pathlib import Path

import pytest

CRONTAB = Path("/app/crontab")
NAMES = {"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
         "oct": 10, "nov": 11, "dec": 12, "sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}
RANGES = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]
MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
          "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}


def parse_field(text, lo, hi):
    values = set()
    for part in text.lower().split(","):
        step = 1
        if "/" in part:
            part, s = part.split("/", 1)
            step = int(s)
            assert step > 0
        if part == "*":
            a, b = lo, hi
        elif "-" in part:
            a, b = (int(NAMES.get(x, x)) for x in part.split("-", 1))
        else:
            a = int(NAMES.get(part, part))
            b = hi if step != 1 else a
        assert lo <= a <= b <= hi, f"{text}: out of range"
        values.update(range(a, b + 1, step))
    return values


def parse_crontab():
    env, jobs = {}, []
    for raw in CRONTAB.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$", line)
        if m:
            env[m.group(1)] = m.group(2).strip().strip("'\"")
            continue
        if line.startswith("@"):
            macro, cmd = line.split(None, 1)
            fields = MACROS[macro].split()
        else:
            parts = line.split(None, 5)
            assert len(parts) == 6, f"bad crontab line: {raw}"
            fields, cmd = parts[:5], parts[5]
        sets = [parse_field(f, lo, hi) for f, (lo, hi) in zip(fields, RANGES)]
        if 7 in sets[4]:
            sets[4].add(0)
        jobs.append((fields, sets, cmd.strip()))
    return env, jobs


def runs_in_2024(job):
    fields, (mins, hours, doms, months, dows), _ = job
    dom_star, dow_star = fields[2].startswith("*"), fields[4].startswith("*")
    out = set()
    day = dt.date(2024, 1, 1)
    while day.year == 2024:
        dom_ok, dow_ok = day.day in doms, (day.isoweekday() % 7) in dows
        if dom_star or dow_star:
            day_ok = dom_ok and dow_ok
        else:  # cron: when both are restricted, either matches
            day_ok = dom_ok or dow_ok
        if day.month in months and day_ok:
            for h in hours:
                for m in mins:
                    out.add((day, h, m))
        day += dt.timedelta(days=1)
    return out


def expected(pred):
    out = set()
    day = dt.date(2024, 1, 1)
    while day.year == 2024:
        for h in range(24):
            for m in range(60):
                if pred(day, h, m):
                    out.add((day, h, m))
        day += dt.timedelta(days=1)
    return out


def job_for(command):
    _, jobs = parse_crontab()
    matching = [j for j in jobs if j[2] == command]
    assert len(matching) == 1, f"{command!r} appears on {len(matching)} lines"
    return matching[0]


def check(command, pred):
    got = runs_in_2024(job_for(command))
    want = expected(pred)
    missing, extra = sorted(want - got)[:3], sorted(got - want)[:3]
    assert got == want, f"missing e.g. {missing}, unexpected e.g. {extra}"


def test_environment_lines():
    env, _ = parse_crontab()
    assert env.get("SHELL") == "/bin/bash"
    assert env.get("MAILTO") == "ops@example.com"
    assert env.get("PATH") == "/usr/local/bin:/usr/bin:/bin"


def test_backup_daily_0230():
    check("/app/bin/backup.sh", lambda d, h, m: (h, m) == (2, 30))


def test_rotate_logs_business_hours():
    check("/app/bin/rotate-logs.sh", lambda d, h, m: d.weekday() < 5 and 8 <= h <= 17 and m % 15 == 0)


def test_monthly_report():
    check("/app/bin/report.sh monthly", lambda d, h, m: d.day == 1 and (h, m) == (6, 0))


def test_sunday_cleanup():
    check("/app/bin/cleanup.sh", lambda d, h, m: d.weekday() == 6 and (h, m) == (23, 45))


def test_ping_every_five_minutes():
    check("/app/bin/ping.sh", lambda d, h, m: m % 5 == 0)


def test_quarterly():
    check("/app/bin/quarterly.sh", lambda d, h, m: d.day == 1 and d.month in (1, 4, 7, 10) and (h, m) == (0, 0))


def test_scripts_executable():
    _, jobs = parse_crontab()
    assert len(jobs) == 6, f"expected exactly 6 jobs, found {len(jobs)}"
    for _, _, cmd in jobs:
        path = Path(cmd.split()[0])
        assert path.is_file(), path
        assert stat.S_IMODE(path.stat().st_mode) == 0o755, f"{path} mode {oct(path.stat().st_mode)}"
