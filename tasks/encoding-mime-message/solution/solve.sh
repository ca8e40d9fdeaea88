#!/bin/bash
set -euo pipefail
cd /app
head -n 20 mail/message.eml
mkdir -p out
python3 - <<'PY'
import email
from email import policy
from email.header import decode_header, make_header
with open("/app/mail/message.eml", "rb") as f:
    msg = email.message_from_binary_file(f, policy=policy.compat32)
dec = lambda h: str(make_header(decode_header(h)))
open("/app/out/headers.txt", "w", encoding="utf-8").write(f"From: {dec(msg['From'])}\nSubject: {dec(msg['Subject'])}\n")
for part in msg.walk():
    if part.is_multipart():
        continue
    data = part.get_payload(decode=True)
    charset = part.get_content_charset()
    name = part.get_filename()
    if name is None and part.get_content_type() == "text/plain":
        text = data.decode(charset).replace("\r\n", "\n")
        open("/app/out/body.txt", "w", encoding="utf-8").write(text)
    elif name:
        if part.get_content_maintype() == "text":
            data = data.decode(charset).encode("utf-8")
        open(f"/app/out/{name}", "wb").write(data)
PY
ls -l out
cat out/headers.txt
head -n 5 out/body.txt out/preise.csv
