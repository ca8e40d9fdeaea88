#!/bin/bash
# summarize.sh LOGFILE: per host (sorted by name): HOST REQUESTS ERRORS_5XX AVG_MS (integer, rounded down)
# Log lines: DAY HOST METHOD STATUS MS
log=$1
for host in $(cut -d' ' -f2 "$log" | sort -u); do
  count=0; errors=0; total=0
  while read -r day h method status ms; do
    if [ "$h" = "$host" ]; then
      count=$(expr $count + 1)
      if echo "$status" | grep -q '^5'; then errors=$(expr $errors + 1); fi
      total=$(expr $total + $ms)
    fi
  done < "$log"
  echo "$host $count $errors $(expr $total / $count)"
done
