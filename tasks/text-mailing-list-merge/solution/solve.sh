#!/bin/bash
set -euo pipefail
cd /app/lists
export LC_ALL=C
norm() { tr -d '\r' | sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' | tr 'A-Z' 'a-z' | grep -v -e '^$' -e '^#' | sort -u; }
norm < subscribers.txt > /tmp/subs
norm < unsubscribed.txt > /tmp/unsub
tail -n +2 bounced.csv | cut -d, -f1 | norm > /tmp/bounced
sort -u /tmp/unsub /tmp/bounced > /tmp/gone
comm -23 /tmp/subs /tmp/gone > /app/send.txt
comm -12 /tmp/subs /tmp/unsub | sed 's/$/ unsubscribed/' > /tmp/r1
comm -12 /tmp/subs /tmp/bounced | comm -23 - /tmp/unsub | sed 's/$/ bounced/' > /tmp/r2
sort /tmp/r1 /tmp/r2 > /app/removed.txt
wc -l /app/send.txt /app/removed.txt
