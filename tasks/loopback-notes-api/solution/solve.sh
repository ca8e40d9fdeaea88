#!/bin/bash
set -euo pipefail
cd /app
mkdir -p data
cat > server.py <<'PY'
"""Notes API on 127.0.0.1:8080, persisted in /app/data/notes.json."""
import json
import os
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DATA = "/app/data/notes.json"
LOCK = threading.Lock()


def load():
    try:
        with open(DATA) as f:
            state = json.load(f)
        return state["next_id"], {n["id"]: n for n in state["notes"]}
    except FileNotFoundError:
        return 1, {}


NEXT_ID, NOTES = load()


def save():
    tmp = DATA + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"next_id": NEXT_ID, "notes": [NOTES[k] for k in sorted(NOTES)]}, f)
    os.replace(tmp, DATA)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, code, payload=None, raw=None):
        body = raw if raw is not None else (b"" if payload is None else json.dumps(payload).encode())
        self.send_response(code)
        if payload is not None:
            self.send_header("Content-Type", "application/json")
        elif raw is not None:
            self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def note_id(self):
        m = re.fullmatch(r"/notes/(\d+)", self.path)
        return int(m.group(1)) if m else None

    def do_GET(self):
        if self.path == "/health":
            return self.send(200, raw=b"ok")
        if self.path == "/notes":
            with LOCK:
                return self.send(200, [NOTES[k] for k in sorted(NOTES)])
        nid = self.note_id()
        with LOCK:
            note = NOTES.get(nid)
        if note is None:
            return self.send(404, {"error": "not found"})
        self.send(200, note)

    def do_POST(self):
        global NEXT_ID
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path != "/notes":
            return self.send(404, {"error": "not found"})
        try:
            data = json.loads(raw)
            assert isinstance(data, dict)
            title, body = data.get("title"), data.get("body", "")
            assert isinstance(title, str) and title and isinstance(body, str)
        except (ValueError, AssertionError):
            return self.send(400, {"error": "bad request"})
        with LOCK:
            note = {"id": NEXT_ID, "title": title, "body": body}
            NOTES[NEXT_ID] = note
            NEXT_ID += 1
            save()
        self.send(201, note)

    def do_DELETE(self):
        nid = self.note_id()
        with LOCK:
            if nid not in NOTES:
                return self.send(404, {"error": "not found"})
            del NOTES[nid]
            save()
        self.send(204)


if __name__ == "__main__":
    ThreadingHTTPServer.allow_reuse_address = True
    ThreadingHTTPServer.request_queue_size = 128
    ThreadingHTTPServer(("127.0.0.1", 8080), Handler).serve_forever()
PY
cat > start.sh <<'SH'
#!/bin/bash
# Start the notes server in its own session; wait until it answers.
cd /app
mkdir -p data
setsid python3 /app/server.py < /dev/null >> /app/data/server.log 2>&1 &
echo $! > /app/server.pid
for _ in $(seq 100); do
  if python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/health', timeout=1)" 2>/dev/null; then
    exit 0
  fi
  sleep 0.1
done
echo "server did not come up" >&2
exit 1
SH
chmod +x start.sh
./start.sh
python3 - <<'PY'
import json, urllib.request
base = "http://127.0.0.1:8080"
print(urllib.request.urlopen(base + "/health").read())
req = urllib.request.Request(base + "/notes", data=json.dumps({"title": "first", "body": "hello"}).encode(),
                             headers={"Content-Type": "application/json"}, method="POST")
print(urllib.request.urlopen(req).read())
print(urllib.request.urlopen(base + "/notes").read())
PY
