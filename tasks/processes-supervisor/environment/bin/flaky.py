#!/usr/bin/env python3
"""A flaky worker: appends 'start PID' to /app/run/flaky.log, works a little, then crashes
(exit status 3) after FLAKY_LIFETIME seconds (default 1.0). On SIGTERM it writes 'stop PID' and exits 0."""
import os
import signal
import sys
import time


def on_term(signum, frame):
    with open("/app/run/flaky.log", "a") as f:
        f.write(f"stop {os.getpid()}\n")
    sys.exit(0)


signal.signal(signal.SIGTERM, on_term)
with open("/app/run/flaky.log", "a") as f:
    f.write(f"start {os.getpid()}\n")
time.sleep(float(os.environ.get("FLAKY_LIFETIME", "1.0")))
sys.exit(3)
