#!/bin/bash
set -euo pipefail
mkdir -p /app/kv
cat > /app/kv/server.py <<'PY'
"""Line-protocol key/value server on 127.0.0.1:7070 with an append-only log."""
import json
import os
import socketserver
import threading

LOG = "/app/kv/data.log"
lock = threading.Lock()
data = {}


def load():
    if not os.path.exists(LOG):
        return
    with open(LOG, encoding="utf-8") as f:
        for line in f:
            try:
                op = json.loads(line)
            except ValueError:
                continue  # torn last line
            if op[0] == "set":
                data[op[1]] = op[2]
            else:
                data.pop(op[1], None)


log = None


def persist(op):
    log.write(json.dumps(op) + "\n")
    log.flush()
    os.fsync(log.fileno())


def handle(line):
    parts = line.split(" ", 2)
    cmd = parts[0]
    with lock:
        if cmd == "SET" and len(parts) == 3 and parts[1]:
            data[parts[1]] = parts[2]
            persist(["set", parts[1], parts[2]])
            return "OK"
        if cmd == "GET" and len(parts) == 2 and parts[1]:
            return f"VALUE {data[parts[1]]}" if parts[1] in data else "NOTFOUND"
        if cmd == "DEL" and len(parts) == 2 and parts[1]:
            if parts[1] not in data:
                return "NOTFOUND"
            del data[parts[1]]
            persist(["del", parts[1]])
            return "DELETED"
        if cmd == "INCR" and len(parts) == 2 and parts[1]:
            try:
                n = int(data.get(parts[1], "0")) + 1
            except ValueError:
                return "ERR not an integer"
            data[parts[1]] = str(n)
            persist(["set", parts[1], str(n)])
            return f"VALUE {n}"
        if cmd == "KEYS" and len(parts) <= 2:
            prefix = parts[1] if len(parts) == 2 else ""
            return " ".join(["KEYS"] + sorted(k for k in data if k.startswith(prefix)))
    return "ERR unknown command"


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        for raw in self.rfile:
            line = raw.decode("utf-8", "replace").rstrip("\n").rstrip("\r")
            self.wfile.write((handle(line) + "\n").encode())
            self.wfile.flush()


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
    request_queue_size = 128


if __name__ == "__main__":
    load()
    log = open(LOG, "a", encoding="utf-8")
    with Server(("127.0.0.1", 7070), Handler) as srv:
        srv.serve_forever()
PY
cat > /app/kv/start.sh <<'SH'
#!/bin/bash
# Start the kv server detached; write its pid; wait until it accepts connections.
cd /app/kv
setsid python3 /app/kv/server.py </dev/null >>/app/kv/server.log 2>&1 &
echo $! > /app/kv/kv.pid
for _ in $(seq 50); do
  python3 -c 'import socket; socket.create_connection(("127.0.0.1", 7070), timeout=0.2).close()' 2>/dev/null && exit 0
  sleep 0.1
done
echo "server did not start" >&2
exit 1
SH
chmod +x /app/kv/start.sh
/app/kv/start.sh
python3 - <<'PY'
import socket
s = socket.create_connection(("127.0.0.1", 7070))
s.sendall(b"SET a hello world\nGET a\nINCR n\nKEYS\n")
print(s.recv(4096).decode())
PY
