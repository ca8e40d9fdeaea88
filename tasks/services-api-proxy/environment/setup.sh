#!/bin/bash
set -euo pipefail
setsid python3 /app/backend/echo.py </dev/null >/dev/null 2>&1 &
# the answer key goes to $T1_PRIVATE: only the checks see it (the agent could rewrite a file in /tmp)
echo "$!" > "$T1_PRIVATE/backend.pid"
for _ in $(seq 50); do grep -q ' 0100007F:2329 .* 0A ' /proc/net/tcp && break; sleep 0.1; done
