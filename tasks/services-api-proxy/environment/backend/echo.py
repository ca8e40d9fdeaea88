#!/usr/bin/env python3
"""Backend on 127.0.0.1:9001: answers every GET/POST with a JSON echo of the request."""
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Echo(BaseHTTPRequestHandler):
    def _echo(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode("utf-8", "replace") if n else ""
        data = json.dumps({"method": self.command, "path": self.path, "body": body,
                           "headers": {k.lower(): v for k, v in self.headers.items()}}).encode()
        status = 201 if self.command == "POST" else 200
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Backend", "echo")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _echo

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", 9001), Echo).serve_forever()
