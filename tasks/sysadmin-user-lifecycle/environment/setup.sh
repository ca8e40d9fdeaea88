#!/bin/bash
# ownership of the existing homes (files in environment/ are copied as root)
set -euo pipefail
mkdir -p /app/root-fs/var/archive  # empty folders do not survive git: make them here
cd /app/root-fs/home
chown -R 1000:1000 alice; chown -R 1001:1001 bob; chown -R 1002:1002 carol; chown -R 1004:1004 erin; chown -R 1007:100 frank
chmod 700 alice bob carol erin frank
find /app/root-fs -exec touch -h -d @1700000000 {} +
