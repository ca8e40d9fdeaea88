#!/bin/bash
set -euo pipefail
cat > /app/proxy.py <<'PY'
"""Reverse proxy on 127.0.0.1:8080: /api/* -> http://127.0.0.1:9001/*, /health, 404, 502."""
import http.client
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer", "host", "content-length"}


class Proxy(BaseHTTPRequestHandler):
    def reply(self, status, body, ctype="text/plain"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def handle_any(self):
        path, _, query = self.path.partition("?")
        if self.command == "GET" and path == "/health":
            return self.reply(200, b"ok")
        if path != "/api" and not path.startswith("/api/"):
            return self.reply(404, b"not found")
        target = (path[4:] or "/") + ("?" + query if query else "")
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        headers["X-Forwarded-For"] = self.client_address[0]
        headers["X-Proxy"] = "t1"
        try:
            conn = http.client.HTTPConnection("127.0.0.1", 9001, timeout=10)
            conn.request(self.command, target, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except OSError:
            return self.reply(502, b"bad gateway")
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in HOP and k.lower() not in ("server", "date"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = handle_any

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", 8080), Proxy).serve_forever()
PY
setsid python3 /app/proxy.py </dev/null >/dev/null 2>&1 &
echo $! > /app/proxy.pid
for i in $(seq 50); do python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:8080/health", timeout=1)' 2>/dev/null && break; sleep 0.1; done
python3 -c 'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:8080/api/x?y=1").read())'
