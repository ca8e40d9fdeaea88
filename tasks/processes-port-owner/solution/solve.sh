#!/bin/bash
set -euo pipefail
cat /proc/net/tcp
# local address 0100007F:24C9 = 127.0.0.1:9417, state 0A = LISTEN
inode=$(awk '$2 == "0100007F:24C9" && $4 == "0A" { print $10 }' /proc/net/tcp)
echo "socket inode $inode"
pid=""
for d in /proc/[0-9]*; do
  if ls -l "$d/fd" 2>/dev/null | grep -q "socket:\[$inode\]"; then pid=${d#/proc/}; break; fi
done
script=$(tr '\0' '\n' < "/proc/$pid/cmdline" | sed -n 2p)
printf '%s\n%s\n' "$pid" "$script" > /app/port-owner.txt
cat /app/port-owner.txt
kill "$pid"
sleep 0.5
python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 9417)); print("port free")'
