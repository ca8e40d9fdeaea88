#!/bin/bash
set -euo pipefail
cd /app/inbox
export LC_ALL=C
find . -type f | sed 's|^\./||' | sort > /tmp/paths.txt
while IFS= read -r p; do printf '%s\t%s\n' "$(sha256sum < "$p" | cut -d' ' -f1)" "$p"; done < /tmp/paths.txt > /tmp/hashed.txt
awk -F'\t' '{ if ($1 in keep) print $2 " -> " keep[$1]; else keep[$1] = $2 }' /tmp/hashed.txt | sort > /app/duplicates.txt
sed 's/ -> .*//' /app/duplicates.txt | while IFS= read -r p; do rm -- "$p"; done
find . -mindepth 1 -type d -empty -delete
cat /app/duplicates.txt
find . -type f | sort
