#!/bin/bash
set -euo pipefail
: > /tmp/stop.txt
for d in /proc/[0-9]*; do
  pid=${d#/proc/}
  tr '\0' ' ' < "$d/cmdline" 2>/dev/null | grep -q 'bin/job[.]py' || continue
  echo "$pid $(tr '\0' ' ' < "$d/cmdline")"
  if tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qx 'JOB_ROLE=scratch'; then echo "$pid" >> /tmp/stop.txt; fi
done
sort -n /tmp/stop.txt > /app/stopped.txt
xargs -r kill < /app/stopped.txt
sleep 0.5
cat /app/stopped.txt
