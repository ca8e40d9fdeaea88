#!/bin/bash
set -euo pipefail
cd /app
cat bin/collect.sh
cat > bin/collect.sh <<'SH'
#!/bin/bash
# collect.sh OUTDIR SRC...
# Copies every *.log file found under each SRC directory (recursively) into OUTDIR, named
#   <basename of SRC>__<path of the file relative to SRC, with every "/" replaced by "__">
# e.g. collect.sh out /var/app  copies /var/app/db/x.log to out/app__db__x.log
# Prints "collected N files" at the end. A SRC that is not a directory is reported on stderr as
# "missing: SRC"; the others are still processed and the exit status is then 1 (else 0).
out=$1
shift
mkdir -p -- "$out"
count=0
status=0
for src in "$@"; do
  if [ ! -d "$src" ]; then
    echo "missing: $src" >&2
    status=1
    continue
  fi
  src=${src%/}
  base=$(basename -- "$src")
  while IFS= read -r -d '' f; do
    rel=${f#"$src"/}
    name="${base}__${rel//\//__}"
    cp -- "$f" "$out/$name"
    count=$((count + 1))
  done < <(find "$src" -type f -name '*.log' -print0)
done
echo "collected $count files"
exit "$status"
SH
mkdir -p "/tmp/t/my app/sub dir" && echo x > "/tmp/t/my app/sub dir/a b.log"
bin/collect.sh /tmp/out "/tmp/t/my app" /nope; echo "exit $?"
ls /tmp/out
