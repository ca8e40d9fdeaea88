#!/usr/bin/env python3
"""Listens on the port given as argv[1] (0 = no listening socket) and idles."""
import socket
import sys
import time

port = int(sys.argv[1])
if port:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(8)
while True:
    time.sleep(1)
