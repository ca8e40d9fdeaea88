import hashlib
import json
import subprocess
from pathlib import Path

import gen
import reference

SHA = "b53017ea359c59da9301b046bf2c2aee089c4870b30150f3cba0c45241a05e62"


def run(tmp_path, text):
    src = tmp_path / "in.log"
    src.write_text(text)
    out = tmp_path / "o" / "p"
    res = subprocess.run(["python3", "/app/sessionize.py", str(src), str(out)], capture_output=True, text=True,
                         timeout=60, cwd="/tmp")
    assert res.returncode == 0, res.stderr[-2000:]
    return out


def shipped():
    text = Path("/app/logs/access.log").read_text()
    assert hashlib.sha256(text.encode()).hexdigest() == SHA, "access.log was modified"
    return reference.build(text)


def test_shipped_sessions():
    csv, _ = shipped()
    assert Path("/app/out/sessions.csv").read_text() == csv


def test_shipped_summary():
    _, summary = shipped()
    assert json.loads(Path("/app/out/summary.json").read_text()) == summary


def test_fresh_sessions(tmp_path):
    text = gen.generate(77, 2500)
    csv, _ = reference.build(text)
    assert (run(tmp_path, text) / "sessions.csv").read_text() == csv


def test_fresh_summary(tmp_path):
    text = gen.generate(78, 2000)
    _, summary = reference.build(text)
    assert json.loads((run(tmp_path, text) / "summary.json").read_text()) == summary


def test_gap_boundary_and_timezones(tmp_path):
    lines = [
        '10.0.0.1 - - [10/Oct/2024:10:00:00 +0200] "GET /a?x=1 HTTP/1.1" 200 10 "-" "ua"',   # 08:00:00Z
        '{"ts": "2024-10-10T13:00:00+05:00", "client": "10.0.0.1", "uri": "/b", "status": 404, "size": 5}',  # 08:00:00Z
        '{"ts": "2024-10-10T08:30:00Z", "client": "10.0.0.1", "uri": "/a", "status": 200, "size": 1}',  # +1800: same
        '10.0.0.1 - - [10/Oct/2024:04:00:01 -0430] "GET /c HTTP/1.0" 500 - "-" "ua"',  # 08:30:01Z: same (+1 s)
        '{"ts": "2024-10-10T09:00:02Z", "client": "10.0.0.1", "uri": "/a", "status": 200, "size": 2}',  # +1801: new
        '{"ts": "2024-10-10T09:00:02Z", "client": "::1", "uri": "/", "status": 200, "size": 3}',
        '',
        '{"ts": "2024-10-10T09:00:02", "client": "::2", "uri": "/", "status": 200, "size": 3}',
        'junk',
    ]
    out = run(tmp_path, "\n".join(lines) + "\n")
    assert (out / "sessions.csv").read_text() == (
        "ip,start,end,requests,bytes,paths\n"
        "10.0.0.1,2024-10-10T08:00:00Z,2024-10-10T08:30:01Z,4,16,3\n"
        "10.0.0.1,2024-10-10T09:00:02Z,2024-10-10T09:00:02Z,1,2,1\n"
        "::1,2024-10-10T09:00:02Z,2024-10-10T09:00:02Z,1,3,1\n")
    s = json.loads((out / "summary.json").read_text())
    assert (s["lines"], s["skipped"], s["sessions"]) == (9, 3, 3)
    assert s["status"] == {"200": 4, "404": 1, "500": 1}
