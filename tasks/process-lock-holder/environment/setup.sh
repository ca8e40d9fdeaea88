#!/bin/bash
# Starts the keeper and three workers; the first worker (queue "reports") takes the lock.
set -euo pipefail
mkdir -p /app/run
cd /app/run
start() { setsid "$@" < /dev/null > /dev/null 2>&1 & echo $!; }
keeper=$(start python3 /app/bin/keeper.py)
holder=$(start python3 /app/bin/worker.py --queue reports)
sleep 0.5
other1=$(start python3 /app/bin/worker.py --queue billing)
other2=$(start python3 /app/bin/worker.py --queue alerts)
# wait until the holder has its two helpers
for _ in $(seq 50); do
  [ "$(pgrep -c -f 'worker[.]py --child')" = 2 ] && break
  sleep 0.1
done
children=$(pgrep -f 'worker[.]py --child' | tr '\n' ' ')
printf '{"keeper": %s, "holder": %s, "others": [%s, %s], "children": [%s]}\n' \
  "$keeper" "$holder" "$other1" "$other2" "$(echo $children | tr ' ' ',')" > /tmp/.t1-procs.json
