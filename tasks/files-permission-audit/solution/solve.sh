#!/bin/bash
set -euo pipefail
export LC_ALL=C
cd /app
find /app/srv -printf '%m %y %p\n' | sort -k3
{
  find /app/srv -perm -o+w ! -type l ! \( -type d -perm -1000 \) -printf 'world-writable %p\n'
  find /app/srv -type f -perm -4000 -printf 'setuid %p\n'
  find /app/srv -type f -perm -2000 -printf 'setgid %p\n'
  find /app/srv -xtype l -printf 'broken-link %p\n'
  find /app/srv -type f \( -name '*.env' -o -name '*.key' \) -perm -o+r -printf 'secret-readable %p\n'
} | sort > /app/audit.txt
cat /app/audit.txt
awk '$1 == "world-writable" { print $2 }' /app/audit.txt | xargs -r chmod o-w
awk '$1 == "setuid" || $1 == "setgid" { print $2 }' /app/audit.txt | xargs -r chmod ug-s
awk '$1 == "broken-link" { print $2 }' /app/audit.txt | xargs -r rm -f
awk '$1 == "secret-readable" { print $2 }' /app/audit.txt | xargs -r chmod o-rwx
find /app/srv -printf '%m %y %p\n' | sort -k3
