#!/bin/bash
set -euo pipefail
cd /app
export LC_ALL=C
tar -tvzf backup.tar.gz
mkdir -p restore
tar -xzf backup.tar.gz -C restore project/docs
rm -rf /tmp/x && mkdir -p /tmp/x
tar -xzf backup.tar.gz -C /tmp/x project/src
(cd /tmp/x/project && find src -type f -name '*.py' | sort | tar -cJf /app/python-src.tar.xz --no-recursion -T -)
tar -tvJf python-src.tar.xz
tar -tvzf backup.tar.gz | awk '$1 ~ /^-/ {print $3, $6}' | sort -k2 > manifest.txt
cat manifest.txt
