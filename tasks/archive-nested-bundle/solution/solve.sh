#!/bin/bash
set -euo pipefail
cd /app
ls -la incoming
mkdir -p extracted
tar -xzf incoming/reports-2024.tar.gz -C extracted
python3 -c "import tarfile; tarfile.open('incoming/misc.tar.bz2').extractall('extracted')"
python3 -c "import zipfile; zipfile.ZipFile('incoming/legacy.zip').extractall('extracted')"
# nested archives: extract next to themselves, then delete (repeat until none are left)
while true; do
  found=$(find extracted -type f \( -name '*.zip' -o -name '*.tar.gz' -o -name '*.tgz' -o -name '*.tar.bz2' \) | head -n 1)
  [ -z "$found" ] && break
  dir=$(dirname "$found")
  case "$found" in
    *.zip) python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$found" "$dir" ;;
    *) tar -xf "$found" -C "$dir" ;;
  esac
  rm -f "$found"
done
find extracted -type f | sort
file extracted/legacy/customers-2019.csv || true
stage=$(mktemp -d)
mkdir "$stage/csv"
find extracted -type f -name '*.csv' | while read -r f; do
  name=$(basename "$f")
  if iconv -f utf-8 -t utf-8 "$f" > /dev/null 2>&1; then
    cp "$f" "$stage/csv/$name"
  else
    iconv -f latin1 -t utf-8 "$f" > "$stage/csv/$name"
  fi
done
tar -czf bundle.tar.gz -C "$stage" csv
(cd "$stage" && find csv -type f | LC_ALL=C sort | xargs sha256sum) > bundle.sha256
(cd "$stage" && sha256sum -c /app/bundle.sha256)
rm -rf "$stage"
tar -tzf bundle.tar.gz
