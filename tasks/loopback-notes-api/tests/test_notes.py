import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

BASE = "http://127.0.0.1:8080"


def call(method, path, payload=None, raw=None):
    data = raw if raw is not None else (json.dumps(payload).encode() if payload is not None else None)
    req = urllib.request.Request(BASE + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def create(title, body="b"):
    status, raw = call("POST", "/notes", {"title": title, "body": body})
    assert status == 201, (status, raw)
    note = json.loads(raw)
    assert note["title"] == title and note["body"] == body and isinstance(note["id"], int) and note["id"] > 0
    return note


def tag():
    return "t-" + uuid.uuid4().hex[:8]


def test_health():
    status, body = call("GET", "/health")
    assert (status, body) == (200, b"ok")


def test_create_and_get():
    t = tag()
    note = create(t, "héllo wörld")
    status, raw = call("GET", f"/notes/{note['id']}")
    assert status == 200 and json.loads(raw) == note
    status, _ = call("GET", "/notes/987654321")
    assert status == 404


def test_list_sorted_and_complete():
    mine = [create(tag()) for _ in range(3)]
    status, raw = call("GET", "/notes")
    assert status == 200
    notes = json.loads(raw)
    ids = [n["id"] for n in notes]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for n in mine:
        assert n in notes


def test_validation_errors():
    t = tag()
    assert call("POST", "/notes", raw=b"{not json")[0] == 400
    assert call("POST", "/notes", [t])[0] == 400
    assert call("POST", "/notes", {"body": t})[0] == 400
    assert call("POST", "/notes", {"title": "", "body": t})[0] == 400
    assert call("POST", "/notes", {"title": 5, "body": t})[0] == 400
    status, raw = call("POST", "/notes", {"title": t})
    assert status == 201 and json.loads(raw)["body"] == ""
    listed = json.loads(call("GET", "/notes")[1])
    assert not any(n["body"] == t for n in listed)


def test_delete():
    note = create(tag())
    status, body = call("DELETE", f"/notes/{note['id']}")
    assert status == 204 and body == b""
    assert call("GET", f"/notes/{note['id']}")[0] == 404
    assert call("DELETE", f"/notes/{note['id']}")[0] == 404


def test_ids_not_reused_after_delete():
    a = create(tag())
    call("DELETE", f"/notes/{a['id']}")
    b = create(tag())
    assert b["id"] > a["id"]


def test_concurrent_creates_unique_ids():
    t = tag()
    results, errors = [], []

    def worker(i):
        time.sleep(i * 0.005)  # a burst, but staggered enough not to overflow a default listen backlog
        try:
            results.append(create(f"{t}-{i}"))
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    assert not errors, errors[:3]
    assert len({n["id"] for n in results}) == 16
    listed = json.loads(call("GET", "/notes")[1])
    assert sum(n["title"].startswith(t) for n in listed) == 16


def test_persisted_to_file():
    note = create(tag())
    text = Path("/app/data/notes.json").read_text()
    assert note["title"] in text
    json.loads(text)


def test_survives_restart():
    note = create(tag(), "keep me")
    pid = int(Path("/app/server.pid").read_text().strip())
    os.kill(pid, signal.SIGTERM)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            call("GET", "/health")
        except OSError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("server still answering after SIGTERM to server.pid")
    res = subprocess.run(["/app/start.sh"], cwd="/app", timeout=60, capture_output=True,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr
    assert call("GET", "/health") == (200, b"ok")
    status, raw = call("GET", f"/notes/{note['id']}")
    assert status == 200 and json.loads(raw) == note
    assert create(tag())["id"] > note["id"]
