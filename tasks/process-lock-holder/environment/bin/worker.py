#!/usr/bin/env python3
"""Queue worker. The first worker to start takes the data lock and does the (stuck) batch job."""
import fcntl
import os
import signal
import subprocess
import sys
import time

LOCK = "/app/run/data.lock"


def main():
    if sys.argv[1] == "--child":
        while True:  # a helper of the batch job; it keeps the inherited lock open
            time.sleep(1)
    queue = sys.argv[2]
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        while True:  # not our turn: wait for work on our queue
            time.sleep(1)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the batch job is stuck and ignores SIGTERM
    for i in range(2):
        subprocess.Popen([sys.executable, __file__, "--child", f"{queue}.{i}"], pass_fds=(fd,),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main()
