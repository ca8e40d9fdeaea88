#!/bin/bash
set -euo pipefail
cd /app/srv
find . -printf '%m %u:%g %y %p\n' | sort -k4
find . \( -perm -4000 -o -perm -2000 \) -printf '%P\n' | LC_ALL=C sort > /app/audit.txt
cat /app/audit.txt
find . -type d -exec chmod 755 {} +
find . -type d -exec chmod ug-s {} +   # numeric chmod keeps setgid on directories
find . -type f -exec chmod 644 {} +
find bin -maxdepth 1 -type f -exec chmod 755 {} +
chmod 700 secrets
find secrets -type f -exec chmod 600 {} +
chown :1000 www/uploads
chmod 1770 www/uploads
chown -R 1000:1000 logs
find logs -type d -exec chmod 750 {} +
find logs -type f -exec chmod 640 {} +
find . -printf '%m %U:%G %y %p\n' | sort -k4
