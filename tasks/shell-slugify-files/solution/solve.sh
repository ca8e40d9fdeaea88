#!/bin/bash
set -euo pipefail
mkdir -p /app/bin
cat > /app/bin/slugify <<'SH'
#!/bin/bash
# slugify DIR: rename the regular files directly inside DIR to URL-safe slugs.
export LC_ALL=C
dir=${1-}
if [ -z "$dir" ] || [ ! -d "$dir" ]; then
  echo "slugify: not a directory: $dir" >&2
  exit 2
fi
status=0
while IFS= read -r -d '' path; do
  name=${path##*/}
  slug=$(printf '%s' "$name" | tr 'A-Z' 'a-z' | sed -e 's/[^a-z0-9.][^a-z0-9.]*/-/g' -e 's/^-*//' -e 's/-*$//')
  [ "$slug" = "$name" ] && continue
  if [ -z "$slug" ] || [ -e "$dir/$slug" ] || [ -L "$dir/$slug" ]; then
    echo "skip: $name" >&2
    status=1
    continue
  fi
  mv -n -- "$path" "$dir/$slug"
  printf '%s -> %s\n' "$name" "$slug"
done < <(find "$dir" -mindepth 1 -maxdepth 1 -type f -print0 | sort -z)
exit $status
SH
chmod +x /app/bin/slugify
ls -la /app/uploads
/app/bin/slugify /app/uploads || echo "exit $?"
ls -la /app/uploads
