#!/bin/bash
set -euo pipefail
cd /app
ls -la site
cat site/.backupignore
cat > backup.sh <<'SH'
#!/bin/bash
# backup.sh SRC_DIR DEST_DIR [KEEP]: timestamped tar.gz of SRC_DIR, keeping the KEEP newest.
set -euo pipefail
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  echo "usage: $0 SRC_DIR DEST_DIR [KEEP]" >&2
  exit 2
fi
src=$1 dest=$2 keep=${3:-5}
if [ ! -d "$src" ]; then
  echo "error: $src is not a directory" >&2
  exit 1
fi
case $keep in ''|*[!0-9]*) echo "error: KEEP must be a number" >&2; exit 2 ;; esac
src=$(cd "$src" && pwd)
stamp=${BACKUP_NOW:-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$dest"
out="$dest/backup-$stamp.tar.gz"
excludes=()
if [ -f "$src/.backupignore" ]; then
  while IFS= read -r pat || [ -n "$pat" ]; do
    [ -n "$pat" ] && excludes+=("--exclude=$pat")
  done < "$src/.backupignore"
fi
tar -czf "$out" "${excludes[@]}" -C "$(dirname "$src")" "$(basename "$src")"
# rotation: names sort chronologically because the stamp is fixed-width
mapfile -t all < <(find "$dest" -maxdepth 1 -type f -name 'backup-*.tar.gz' -printf '%f\n' | LC_ALL=C sort)
excess=$(( ${#all[@]} - keep ))
for (( i = 0; i < excess; i++ )); do
  rm -f -- "$dest/${all[$i]}"
done
echo "$out"
SH
chmod +x backup.sh
BACKUP_NOW=20240101-000000 ./backup.sh site /tmp/backups
tar -tzf /tmp/backups/backup-20240101-000000.tar.gz
./backup.sh /nonexistent /tmp/backups || echo "failed as expected"
rm -rf /tmp/backups
