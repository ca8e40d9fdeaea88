#!/bin/bash
set -euo pipefail
cd /app/root-fs
cat etc/passwd etc/group
cat /app/onboarding.csv /app/offboarding.txt
ls -la home
# highest regular uid before offboarding
maxuid=$(awk -F: '$3 >= 1000 && $3 < 60000 { if ($3 > m) m = $3 } END { print m }' etc/passwd)
echo "max uid: $maxuid"
# --- offboarding
while read -r u; do
  [ -n "$u" ] || continue
  tar -C home -czf "var/archive/$u.tar.gz" "$u"
  tar -tzf "var/archive/$u.tar.gz"
  rm -rf "home/$u"
  sed -i "/^$u:/d" etc/passwd etc/shadow
  sed -i "/^$u:x:[0-9]*:/d" etc/group
  awk -F: -v OFS=: -v u="$u" '{ n = split($4, m, ","); s = ""; for (i = 1; i <= n; i++) if (m[i] != u) s = s (s == "" ? "" : ",") m[i]; $4 = s; print }' etc/group > /tmp/group.new
  cat /tmp/group.new > etc/group
done < /app/offboarding.txt
cat etc/group
# --- onboarding (python for the CSV quoting, one user per call)
cat > /tmp/onboard.py <<'PY'
import csv, sys
uid = int(sys.argv[1])
root = "/app/root-fs/etc/"
row = [r for r in csv.DictReader(open("/app/onboarding.csv", newline=""))][int(sys.argv[2])]
groups = [l.rstrip("\n").split(":") for l in open(root + "group")]
used = {int(g[2]) for g in groups}
gid = uid
while gid in used:
    gid += 1
name = row["username"]
groups.append([name, "x", str(gid), ""])
used.add(gid)
for g in filter(None, row["groups"].split(";")):
    hit = [x for x in groups if x[0] == g]
    if not hit:
        new = min(i for i in range(2000, 3000) if i not in used)
        used.add(new)
        hit = [[g, "x", str(new), ""]]
        groups.append(hit[0])
    hit[0][3] = ",".join(filter(None, hit[0][3].split(",") + [name]))
open(root + "group", "w").write("".join(":".join(g) + "\n" for g in groups))
open(root + "passwd", "a").write(f"{name}:x:{uid}:{gid}:{row['full_name']}:/home/{name}:{row['shell'] or '/bin/bash'}\n")
open(root + "shadow", "a").write(f"{name}:!:19700:0:99999:7:::\n")
print(name, uid, gid)
PY
python3 /tmp/onboard.py $((maxuid + 1)) 0
python3 /tmp/onboard.py $((maxuid + 2)) 1
python3 /tmp/onboard.py $((maxuid + 3)) 2
for u in gina hugo ivan; do
  uid=$(awk -F: -v u="$u" '$1 == u { print $3 }' etc/passwd)
  gid=$(awk -F: -v u="$u" '$1 == u { print $4 }' etc/passwd)
  cp -a etc/skel "home/$u"
  chown -R "$uid:$gid" "home/$u"
  chmod 700 "home/$u"
done
ls -lan home home/*
cat etc/passwd etc/group etc/shadow
