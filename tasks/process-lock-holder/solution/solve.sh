#!/bin/bash
set -euo pipefail
cd /app
ps -eo pid,ppid,sid,cmd || true
cat /proc/locks
# the lock's inode, then the processes that have it open
ino=$(stat -c %i /app/run/data.lock)
grep ":$ino " /proc/locks
holders=""
for p in /proc/[0-9]*; do
  pid=${p#/proc/}
  for fd in "$p"/fd/*; do
    if [ "$(readlink "$fd" 2>/dev/null)" = "/app/run/data.lock" ]; then holders="$holders $pid"; break; fi
  done
done
echo "processes with the lock file open:$holders"
# the parent is the one whose parent is not itself a holder
parent=""
for pid in $holders; do
  ppid=$(awk '{print $4}' /proc/$pid/stat)
  case " $holders " in *" $ppid "*) ;; *) parent=$pid ;; esac
done
echo "$parent" > /app/killed.txt
kill -KILL $holders
sleep 0.5
ps -eo pid,ppid,cmd || true
cd /app/run
TICK_INTERVAL=0.2 setsid nohup python3 /app/bin/ticker.py >> /app/run/ticker.log 2>/dev/null < /dev/null &
echo $! > /app/run/ticker.pid
sleep 1
cat /app/run/ticker.log
