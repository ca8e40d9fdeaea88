#!/bin/bash
# Starts four idle services; only one of them listens on 127.0.0.1:9417. Names and ports do not match.
set -euo pipefail
mkdir -p /app/svc/run
cd /app/svc
cp listener.py alpha.py; cp listener.py beta.py; cp listener.py gamma.py; cp listener.py delta.py
start() { setsid python3 "/app/svc/$1" "$2" </dev/null >/dev/null 2>&1 & echo $!; }
a=$(start alpha.py 9418); b=$(start beta.py 0); c=$(start gamma.py 9417); d=$(start delta.py 9416)
# the answer key goes to $T1_PRIVATE: only the checks see it (the agent could rewrite a file in /tmp)
printf '{"alpha": %s, "beta": %s, "gamma": %s, "delta": %s}\n' "$a" "$b" "$c" "$d" > "$T1_PRIVATE/listeners.json"
for _ in $(seq 50); do
  [ "$(grep -c ' 0100007F:24C[89A] ' /proc/net/tcp || true)" -ge 3 ] && break
  sleep 0.1
done
