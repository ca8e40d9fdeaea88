#!/usr/bin/env python3
"""Prints one numbered tick line every TICK_INTERVAL seconds (default 1.0)."""
import itertools
import os
import time

interval = float(os.environ.get("TICK_INTERVAL", "1.0"))
for i in itertools.count(1):
    print(f"tick {i} {time.time():.3f}", flush=True)
    time.sleep(interval)
