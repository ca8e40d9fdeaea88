#!/bin/bash
set -euo pipefail
cd /app/incoming
export LC_ALL=C
cat SHA256SUMS
sha256sum dataset.tar.xz.part-* mirror/* || true
sha256sum -c SHA256SUMS 2>&1 || true
mkdir -p /tmp/parts
# pick, for every part listed, a copy (main or mirror) whose hash matches
grep 'part-' SHA256SUMS | while read -r sum name; do
  for cand in "$name" "mirror/$name"; do
    if [ -f "$cand" ] && [ "$(sha256sum < "$cand" | cut -d' ' -f1)" = "$sum" ]; then cp "$cand" "/tmp/parts/$name"; break; fi
  done
  [ -f "/tmp/parts/$name" ] || { echo "no good copy of $name" >&2; exit 1; }
done
ls -l /tmp/parts
cat $(grep -o 'dataset.tar.xz.part-[0-9]*' SHA256SUMS | sort | sed 's|^|/tmp/parts/|') > /app/dataset.tar.xz
cd /app
grep ' dataset.tar.xz$' incoming/SHA256SUMS | sha256sum -c -
tar -xJf dataset.tar.xz
tar -xzf dataset/logs.tar.gz -C dataset
python3 -c 'import zipfile; zipfile.ZipFile("/app/dataset/images.zip").extractall("/app/dataset")'
rm dataset/logs.tar.gz dataset/images.zip
find dataset -type f | sort
(cd dataset && { sha256sum -c MANIFEST.sha256 2>/dev/null || true; } | grep -v ": OK$" | sed "s/: FAILED.*$//" | sort) > bad_files.txt
cat bad_files.txt
sed 's|^|dataset/|' bad_files.txt > /tmp/exclude.txt
find dataset -type f | sort | grep -vxF -f /tmp/exclude.txt > /tmp/include.txt
tar --sort=name --mtime='2024-01-01 00:00:00 UTC' --owner=0 --group=0 --numeric-owner --no-recursion -cf - -T /tmp/include.txt | gzip -n > clean.tar.gz
tar -tvzf clean.tar.gz
