#!/usr/bin/env python3
"""Writes a heartbeat file every half second. Must keep running."""
import time

while True:
    with open("/app/run/keeper.hb", "w") as f:
        f.write(f"{time.time():.3f}\n")
    time.sleep(0.5)
