#!/bin/bash
set -euo pipefail
mkdir -p /app/home/deploy  # empty folders do not survive git: make them here
chown -R 1500:1500 /app/home/deploy
chmod 775 /app/home/deploy
mkdir -p /app/home/deploy/.ssh
printf 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOLD old@retired\n' > /app/home/deploy/.ssh/authorized_keys
chmod 777 /app/home/deploy/.ssh
chmod 666 /app/home/deploy/.ssh/authorized_keys
