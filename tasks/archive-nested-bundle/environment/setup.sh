#!/bin/bash
# Builds /app/incoming/: archives nested in archives, one CSV in Latin-1.
set -euo pipefail
python3 - <<'PY'
import io
import random
import tarfile
import zipfile
from pathlib import Path

r = random.Random(77)
inc = Path("/app/incoming")
inc.mkdir(parents=True, exist_ok=True)
MTIME = 1704067200


def csv_text(quarter, n):
    lines = ["region,product,units,revenue"]
    for _ in range(n):
        lines.append(f"{r.choice(['north', 'south', 'east', 'west'])},{r.choice(['widget', 'gadget', 'doohickey'])},"
                     f"{r.randint(1, 500)},{r.randint(100, 99999) / 100:.2f}")
    return ("\n".join(lines) + "\n").encode()


def add(tar, name, data, mode=0o644):
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), MTIME, mode
    tar.addfile(info, io.BytesIO(data))


def zip_bytes(members):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members:
            z.writestr(zipfile.ZipInfo(name, (2024, 1, 1, 0, 0, 0)), data)
    return buf.getvalue()


inner_zip = zip_bytes([("q3.csv", csv_text("q3", 40)), ("q4.csv", csv_text("q4", 45)),
                       ("README.md", b"# Second half\nQ3 and Q4 figures.\n")])
with tarfile.open(inc / "reports-2024.tar.gz", "w:gz") as t:
    add(t, "reports/q1.csv", csv_text("q1", 30))
    add(t, "reports/q2.csv", csv_text("q2", 35))
    add(t, "reports/notes.txt", b"Figures are preliminary.\n")
    add(t, "reports/inner/h2.zip", inner_zip)

legacy = ("id;name;city;amount\n" + "".join(
    f"{i};{n};{c};{r.randint(1, 9999)},{r.randint(0, 99):02d}\n"
    for i, (n, c) in enumerate([("Müller", "Köln"), ("Lefèvre", "Besançon"), ("Peña", "Málaga"),
                                ("Øster", "Århus"), ("Smith", "York"), ("Groß", "Düsseldorf")], 1)))
(inc / "legacy.zip").write_bytes(zip_bytes([("legacy/customers-2019.csv", legacy.encode("latin-1")),
                                            ("legacy/LICENSE", b"internal use only\n")]))

with tarfile.open(inc / "misc.tar.bz2", "w:bz2") as t:
    add(t, "misc/tool.sh", b"#!/bin/sh\necho tool\n", 0o755)
    add(t, "misc/data/weights.csv", csv_text("w", 12))
    blob = bytes(r.getrandbits(8) for _ in range(4096))
    add(t, "misc/data/blob.bin", blob)
PY
