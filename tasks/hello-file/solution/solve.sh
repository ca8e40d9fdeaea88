#!/bin/bash
set -euo pipefail
cd /app
mkdir -p greetings
chmod 750 greetings
printf 'Hello, t1!\nHave a nice day.\n' > greetings/hello.txt
chmod 640 greetings/hello.txt
ln -sfn greetings/hello.txt latest
wc -c < greetings/hello.txt | tr -d ' ' > greetings/count.txt
