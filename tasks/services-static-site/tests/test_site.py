import json
import os
import urllib.error
import urllib.request
from pathlib import Path

BASE = "http://127.0.0.1:8088"


def get(path):
    try:
        with urllib.request.urlopen(BASE + path, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_index_and_css():
    assert get("/") == (200, Path("/app/public/index.html").read_bytes())
    assert get("/css/site.css") == (200, b"p { color: navy; }\n")


def test_health_json():
    status, body = get("/health.json")
    assert status == 200 and json.loads(body) == {"status": "ok"}


def test_missing_is_404():
    assert get("/index.html")[0] == 200
    assert get("/nope/missing.txt")[0] == 404


def test_detached_with_pidfile():
    assert get("/")[0] == 200
    pid = int(Path("/app/server.pid").read_text().strip())
    assert Path(f"/proc/{pid}").exists(), "pid file does not name a running process"
    assert os.getsid(pid) == pid, "server is not in its own session"
    for fd in (0, 1, 2):
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
        assert "/dev/pts" not in target and "tty" not in target, f"fd {fd} -> {target}"
    # the pid really is the server: it has a listening socket
    inodes = set()
    for f in os.listdir(f"/proc/{pid}/fd"):
        try:
            inodes.add(os.readlink(f"/proc/{pid}/fd/{f}"))
        except FileNotFoundError:  # a connection (the request above) closed since the listing
            continue
    listen = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        parts = line.split()
        if parts[1].endswith(":1F98") and parts[3] == "0A":
            listen.add(f"socket:[{parts[9]}]")
    assert listen & inodes, "the pid in server.pid does not own the listening socket"
