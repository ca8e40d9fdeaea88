#!/bin/bash
set -euo pipefail
cd /app
head -n 3 data/requests.log
cat > summarize.sh <<'SH'
#!/bin/bash
# summarize.sh LOGFILE: per host (sorted by name): HOST REQUESTS ERRORS_5XX AVG_MS (integer, rounded down)
# Log lines: DAY HOST METHOD STATUS MS
awk '{ c[$2]++; if ($4 ~ /^5/) e[$2]++; t[$2] += $5 }
     END { for (h in c) printf "%s %d %d %d\n", h, c[h], e[h], int(t[h] / c[h]) }' "$1" | LC_ALL=C sort
SH
time bash summarize.sh data/requests.log > summary.txt
head summary.txt
