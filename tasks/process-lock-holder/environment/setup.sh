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
# wait until the holder has its two helpers (procps may not be installed: read /proc)
helpers() {
  for f in /proc/[0-9]*/cmdline; do
    if tr '\0' ' ' < "$f" 2>/dev/null | grep -q ' /app/bin/worker[.]py --child '; then
      d=${f%/cmdline}; echo "${d#/proc/}"
    fi
  done
}
for _ in $(seq 50); do
  [ "$(helpers | wc -l)" = 2 ] && break
  sleep 0.1
done
[ "$(helpers | wc -l)" = 2 ] || { echo "helpers did not start" >&2; exit 1; }
children=$(helpers | tr '\n' ',' | sed 's/,$//')
# the answer key goes to $T1_PRIVATE: only the checks see it (the agent could rewrite a file in /tmp)
printf '{"keeper": %s, "holder": %s, "others": [%s, %s], "children": [%s]}\n' \
  "$keeper" "$holder" "$other1" "$other2" "$children" > "$T1_PRIVATE/procs.json"
