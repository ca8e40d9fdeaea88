#!/bin/bash
set -euo pipefail
cd /app
cat > summarize.sh <<'SH'
#!/bin/bash
# Summarize 5xx responses per path (query string stripped) from an access log.
set -euo pipefail
log="$1"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
awk '
  match($0, /"[A-Z]+ [^ "]* [^"]*" [0-9][0-9][0-9] /) {
    n = split(substr($0, RSTART, RLENGTH), f, " ")
    if (f[n] ~ /^5/) { path = f[2]; sub(/\?.*/, "", path); count[path]++ }
  }
  END { for (p in count) printf "%d %s\n", count[p], p }
' "$log" > "$tmp"
LC_ALL=C sort -k1,1nr -k2,2 "$tmp" | head -n 5
awk '{ s += $1 } END { printf "TOTAL %d\n", s }' "$tmp"
SH
chmod +x summarize.sh
./summarize.sh logs/access.log > summary.txt
cat summary.txt
