#!/bin/bash
set -euo pipefail
mkdir -p /app/bin
cat > /app/bin/snapshot <<'PY'
#!/usr/bin/env python3
"""snapshot SRC DEST: incremental hard-link snapshots with excludes and retention."""
import fnmatch
import os
import shutil
import sys
import time


def main(argv):
    if len(argv) != 3 or not os.path.isdir(argv[1]):
        sys.stderr.write("usage: snapshot SRC DEST (SRC must be a directory)\n")
        return 2
    src, dest = argv[1].rstrip("/") or "/", argv[2]
    stamp = os.environ.get("SNAPSHOT_TIME") or time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    keep = int(os.environ.get("KEEP", "5"))
    os.makedirs(dest, exist_ok=True)
    snap = os.path.join(dest, stamp)
    if os.path.lexists(snap):
        sys.stderr.write(f"snapshot {stamp} exists\n")
        return 1
    latest = os.path.join(dest, "latest")
    prev = os.path.realpath(latest) if os.path.isdir(latest) else None
    patterns = []
    ign = os.path.join(src, ".snapshotignore")
    if os.path.isfile(ign):
        patterns = [l.strip("\n") for l in open(ign) if l.strip()]
    tmp = snap + ".partial"
    shutil.rmtree(tmp, ignore_errors=True)
    copied = linked = 0
    dirs = []
    for root, subdirs, files in os.walk(src):
        subdirs[:] = sorted(d for d in subdirs if not any(fnmatch.fnmatchcase(d, p) for p in patterns))
        rel = os.path.relpath(root, src)
        out = os.path.normpath(os.path.join(tmp, rel))
        os.makedirs(out, exist_ok=True)
        dirs.append((root, out))
        for name in list(subdirs):
            if os.path.islink(os.path.join(root, name)):
                subdirs.remove(name)
                files.append(name)
        for name in sorted(files):
            if any(fnmatch.fnmatchcase(name, p) for p in patterns):
                continue
            s, d = os.path.join(root, name), os.path.join(out, name)
            if os.path.islink(s):
                os.symlink(os.readlink(s), d)
                continue
            if not os.path.isfile(s):
                continue
            st = os.stat(s)
            old = os.path.normpath(os.path.join(prev, rel, name)) if prev else None
            if old and os.path.isfile(old) and not os.path.islink(old):
                ost = os.stat(old)
                if ost.st_size == st.st_size and int(ost.st_mtime) == int(st.st_mtime):
                    os.link(old, d)
                    linked += 1
                    continue
            shutil.copy2(s, d)
            os.utime(d, (int(st.st_atime), int(st.st_mtime)))
            copied += 1
    for s, d in reversed(dirs):
        st = os.stat(s)
        os.chmod(d, st.st_mode & 0o7777)
        os.utime(d, (int(st.st_atime), int(st.st_mtime)))
    os.rename(tmp, snap)
    link_tmp = latest + ".new"
    if os.path.lexists(link_tmp):
        os.unlink(link_tmp)
    os.symlink(stamp, link_tmp)
    os.replace(link_tmp, latest)
    snaps = sorted(n for n in os.listdir(dest) if n not in ("latest",) and not n.endswith((".partial", ".new"))
                   and os.path.isdir(os.path.join(dest, n)) and not os.path.islink(os.path.join(dest, n)))
    for old in snaps[:-keep] if keep > 0 else []:
        shutil.rmtree(os.path.join(dest, old))
    print(f"copied {copied} linked {linked}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
PY
chmod +x /app/bin/snapshot
SNAPSHOT_TIME=20240101-000000 /app/bin/snapshot /app/data /app/backups
find /app/backups -printf '%p %i %l\n' | sort
