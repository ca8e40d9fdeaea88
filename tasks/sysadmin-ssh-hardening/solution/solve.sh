#!/bin/bash
set -euo pipefail
cd /app/etc/ssh
cp -p sshd_config sshd_config.bak
cat -n sshd_config
# global part only: lines before the first Match
sed -i '1,/^Match /{s/^PermitRootLogin .*/PermitRootLogin no/;s/^PasswordAuthentication .*/PasswordAuthentication no/;s/^#PubkeyAuthentication .*/PubkeyAuthentication yes/;s/^X11Forwarding .*/X11Forwarding no/;s/^MaxAuthTries .*/MaxAuthTries 3/}' sshd_config
sed -i '0,/^Match /s/^Match /AllowUsers deploy backup\n\nMatch /' sshd_config
diff sshd_config.bak sshd_config || true
cd /app/home/deploy
ls -la . .ssh
cat /app/keys/*.pub | grep -v '^$' > .ssh/authorized_keys
chown 1500:1500 .ssh .ssh/authorized_keys
chmod 700 .ssh
chmod 600 .ssh/authorized_keys
chmod go-w /app/home/deploy
ls -lan . .ssh
