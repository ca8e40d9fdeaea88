#!/bin/bash
set -euo pipefail
cd /app/work
export LC_ALL=C
find . -printf '%TY-%Tm-%Td %TT %p %y\n' | sort
cutoff=$(date -d '2024-01-01 00:00:00 UTC' +%s)
find . -type f -printf '%T@ %P\n' | awk -v c="$cutoff" '{ t = $1; sub(/^[^ ]* /, ""); if (t < c) print }' | sort > /app/stale.txt
cat /app/stale.txt
while IFS= read -r f; do mkdir -p "/app/stale/$(dirname "$f")"; mv -- "$f" "/app/stale/$f"; done < /app/stale.txt
find . -mindepth 1 -type d -empty -delete
find /app/stale /app/work | sort
