import json
import os
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path

BASE = "http://127.0.0.1:8080"


def req(path, method="GET", data=None, headers=None):
    r = urllib.request.Request(BASE + path, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(r, timeout=5) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_health():
    status, _, body = req("/health")
    assert (status, body) == (200, b"ok")


def test_get_forwarded_with_prefix_stripped():
    status, headers, body = req("/api/items/7?color=red&n=2")
    assert status == 200
    echo = json.loads(body)
    assert (echo["method"], echo["path"]) == ("GET", "/items/7?color=red&n=2")
    assert headers.get("Content-Type") == "application/json"
    assert json.loads(req("/api")[2])["path"] == "/"


def test_post_body_and_status():
    payload = json.dumps({"name": "Zoë", "qty": 3}).encode()
    status, _, body = req("/api/orders", "POST", payload, {"Content-Type": "application/json"})
    assert status == 201
    echo = json.loads(body)
    assert echo["method"] == "POST" and echo["path"] == "/orders" and echo["body"] == payload.decode()


def test_headers_added_and_passed():
    _, _, body = req("/api/me", headers={"Authorization": "Bearer abc123"})
    h = json.loads(body)["headers"]
    assert h.get("x-forwarded-for") == "127.0.0.1"
    assert h.get("x-proxy") == "t1"
    assert h.get("authorization") == "Bearer abc123"


def test_other_paths_404():
    assert req("/health")[0] == 200
    for p in ("/", "/apix", "/static/app.js", "/apiary/x"):
        assert req(p)[0] == 404, p


def test_detached_pidfile():
    assert req("/health")[0] == 200
    pid = int(Path("/app/proxy.pid").read_text().strip())
    assert Path(f"/proc/{pid}").exists()
    assert os.getsid(pid) == pid
    for fd in (0, 1, 2):
        t = os.readlink(f"/proc/{pid}/fd/{fd}")
        assert "/dev/pts" not in t and "tty" not in t


def test_zz_backend_down_gives_502():
    assert req("/health")[0] == 200, "proxy not running"
    pid = int(Path(os.environ["T1_PRIVATE"], "backend.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.3)
    assert req("/api/anything")[0] == 502
    assert req("/health")[0] == 200
