#!/bin/bash
set -euo pipefail
setsid python3 /app/backend/echo.py </dev/null >/dev/null 2>&1 &
echo "$!" > /tmp/.t1-backend.pid
for _ in $(seq 50); do grep -q ' 0100007F:2329 .* 0A ' /proc/net/tcp && break; sleep 0.1; done
