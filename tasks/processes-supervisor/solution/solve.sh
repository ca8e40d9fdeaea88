#!/bin/bash
set -euo pipefail
mkdir -p /app/run
cat > /app/bin/supervise <<'PY'
#!/usr/bin/env python3
"""supervise PIDFILE LOGFILE -- COMMAND [ARGS...]: keep COMMAND running, with exponential backoff."""
import os
import signal
import subprocess
import sys
import time


def main():
    if len(sys.argv) < 5 or sys.argv[3] != "--":
        sys.stderr.write("usage: supervise PIDFILE LOGFILE -- COMMAND [ARGS...]\n")
        return 2
    pidfile, logfile, cmd = sys.argv[1], sys.argv[2], sys.argv[4:]
    stopping = False
    child = None

    def log(line):
        with open(logfile, "a") as f:
            f.write(line + "\n")

    def on_signal(signum, frame):
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with open(pidfile, "w") as f:
        f.write(f"{os.getpid()}\n")
    delay = 0.5
    while not stopping:
        started = time.monotonic()
        child = subprocess.Popen(cmd)
        with open(pidfile + ".child", "w") as f:
            f.write(f"{child.pid}\n")
        while True:
            try:
                status = child.wait()
                break
            except InterruptedError:
                continue
        if stopping:
            break
        log(f"exit {status if status >= 0 else 128 - status}")
        if time.monotonic() - started >= 10:
            delay = 0.5
        end = time.monotonic() + delay
        while not stopping and time.monotonic() < end:
            time.sleep(0.05)
        delay = min(delay * 2, 4.0)
    if child is not None and child.poll() is None:
        child.send_signal(signal.SIGTERM)
        child.wait()
    log("stopped")
    for p in (pidfile, pidfile + ".child"):
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
PY
chmod +x /app/bin/supervise
FLAKY_LIFETIME=1 setsid /app/bin/supervise /app/run/flaky.pid /app/run/supervise.log -- python3 /app/bin/flaky.py </dev/null >/dev/null 2>&1 &
sleep 2
cat /app/run/flaky.pid /app/run/flaky.pid.child /app/run/supervise.log /app/run/flaky.log
