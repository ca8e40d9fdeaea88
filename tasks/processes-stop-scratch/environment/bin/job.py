#!/usr/bin/env python3
"""A long-running job. Its role comes from the environment (JOB_ROLE)."""
import os
import time

with open(f"/app/run/{os.getpid()}.started", "w") as f:
    f.write(os.environ.get("JOB_ROLE", "?") + "\n")
while True:
    time.sleep(1)
