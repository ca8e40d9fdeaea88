#!/bin/bash
set -euo pipefail
mkdir -p /app/run
start() { env JOB_ROLE="$1" setsid python3 /app/bin/job.py "${@:2}" </dev/null >/dev/null 2>&1 & echo $!; }
a=$(start prod --name billing)
b=$(start scratch --name billing)
c=$(start prod --name scratch)
d=$(start scratch --name export)
e=$(start batch --name scratch-cleanup)
f=$(start scratch --name reports)
# the answer key goes to $T1_PRIVATE: only the checks see it (the agent could rewrite a file in /tmp)
printf '{"keep": [%s, %s, %s], "stop": [%s, %s, %s]}\n' "$a" "$c" "$e" "$b" "$d" "$f" > "$T1_PRIVATE/jobs.json"
for _ in $(seq 50); do [ "$(ls /app/run | wc -l)" -ge 6 ] && break; sleep 0.1; done
