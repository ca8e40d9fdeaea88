#!/bin/bash
set -euo pipefail
cd /app
printf '{"status": "ok"}\n' > public/health.json
setsid python3 -m http.server 8088 --bind 127.0.0.1 --directory /app/public </dev/null >/tmp/http.log 2>&1 &
echo $! > /app/server.pid
for i in $(seq 50); do python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:8088/", timeout=1)' 2>/dev/null && break; sleep 0.1; done
python3 -c 'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:8088/health.json").read())'
